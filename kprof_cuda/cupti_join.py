"""The join of CUPTI's records by correlation id on numpy arrays, for the pure-Python reader
(``cupti_pure``; the compiled reader does the same in C, ``_cupti_src/``). It hands over the
columns of ``cupti_layout.ROW_COLUMNS`` but the queue, which the reader interns."""

from __future__ import annotations

import numpy as np

from .cupti_layout import MAX_LAUNCHES, ROW_COLUMNS

__all__ = ["RAW_COLUMNS", "TIME_COLUMNS", "Join", "rebase"]
#: Work records kept while their correlation records have not come.
MAX_PENDING_ROWS = 1 << 20

#: Columns of work records before the join: the row columns but scope, queue, launch times
#: and site (the launch's), plus the context (the queue is interned after the join, from
#: device, context and stream).
RAW_COLUMNS = (
    *(c for c in ROW_COLUMNS if c not in ("scope", "queue", "launch_begin", "launch_end", "site")),
    "context",
)


#: The row columns that hold CUPTI timestamps (launch times are 0 when the API record was lost).
TIME_COLUMNS = ("begin", "end", "launch_begin", "launch_end")


def rebase(cols: dict[str, np.ndarray], base: int) -> None:
    """Subtract ``base`` from the timestamps of ``cols`` (in place; a launch time of 0, meaning
    unknown, stays 0). CUPTI's default clock on Linux is CLOCK_REALTIME: about 1.8e18 ns since
    1970, beyond the ±2**59 ns kprof keeps of a plugin's values; relative to a base taken when
    the reader started they are small, and ``cupti_clock`` adds the base back when placing."""
    if not base:
        return
    for c in TIME_COLUMNS:
        col = cols[c]
        if c.startswith("launch"):
            cols[c] = np.where(col != 0, col - base, 0)
        else:
            cols[c] = col - base


class Join:
    """External-correlation, API and work records joined by correlation id, in any order.

    Launches (a correlation id with its scope, launch times, launch site, whether it is a
    graph launch and how many rows it got) are numpy columns sorted by id; work records whose launch is not
    known yet wait in ``pending``. A row is ready when its launch has both its scope (an
    EXTERNAL_CORRELATION record of kprof's kind) and its API record; it is foreign when its
    API record came without a scope (launched outside every profile)."""

    def __init__(self) -> None:
        self.corr = np.zeros(0, np.uint64)
        self.scope = np.zeros(0, np.int64)
        self.api = np.zeros(0, bool)
        self.lb = np.zeros(0, np.int64)
        self.le = np.zeros(0, np.int64)
        self.graph = np.zeros(0, bool)
        self.mem = np.zeros(0, bool)  # an allocating or freeing call: never waited for
        self.rows = np.zeros(0, np.int64)
        self.devices = np.zeros(0, np.uint64)  # bit d: a row of the launch ran on device d
        self.site = np.zeros(0, np.int64)  # the callback's raw launch site id, -1 none
        self.pending: dict[str, np.ndarray] = {c: np.zeros(0, np.int64) for c in RAW_COLUMNS}
        self.foreign = 0
        self.max_launches = MAX_LAUNCHES
        self.forgotten = 0  # launches forgotten past max_launches, the oldest first

    def add_launches(
        self,
        ext_corr: np.ndarray,
        ext_scope: np.ndarray,
        api_corr: np.ndarray,
        api_lb: np.ndarray,
        api_le: np.ndarray,
        api_graph: np.ndarray,
        no_work: np.ndarray,
        api_mem: np.ndarray | None = None,
        site_corr: np.ndarray | None = None,
        site: np.ndarray | None = None,
    ) -> None:
        """Launches learned from a batch: external correlation (scope), API records (launch
        times, graph, memory), calls that enqueue no work (dropped), and the callback's
        launch sites (``site_corr``, ``site``)."""
        n0, n1, n2 = len(self.corr), len(ext_corr), len(api_corr)
        if site_corr is None or site is None:
            site_corr, site = np.zeros(0, np.uint64), np.zeros(0, np.int64)
        keys = np.concatenate([self.corr, ext_corr, api_corr, site_corr.astype(np.uint64)])
        if not len(keys):
            return
        u, inv = np.unique(keys, return_inverse=True)
        a, b = inv[:n0], inv[n0 : n0 + n1]
        c, d = inv[n0 + n1 : n0 + n1 + n2], inv[n0 + n1 + n2 :]
        scope = np.zeros(len(u), np.int64)
        api = np.zeros(len(u), bool)
        lb = np.zeros(len(u), np.int64)
        le = np.zeros(len(u), np.int64)
        graph = np.zeros(len(u), bool)
        mem = np.zeros(len(u), bool)
        rows = np.zeros(len(u), np.int64)
        devices = np.zeros(len(u), np.uint64)
        sites = np.full(len(u), -1, np.int64)
        devices[a] = self.devices
        sites[a] = self.site
        sites[d] = site
        scope[a], api[a], lb[a], le[a] = self.scope, self.api, self.lb, self.le
        graph[a], rows[a], mem[a] = self.graph, self.rows, self.mem
        scope[b] = ext_scope
        api[c], lb[c], le[c], graph[c] = True, api_lb, api_le, api_graph
        if api_mem is not None:
            mem[c] = api_mem
        keep = ~np.isin(u, no_work) if len(no_work) else np.ones(len(u), bool)
        while keep.sum() > self.max_launches:  # launches whose records never came
            # The oldest eighth (ids are sorted) are forgotten, as the compiled reader does.
            n = int(keep.sum())
            drop = n // 8 + 1
            keep &= np.cumsum(keep) > drop
            self.forgotten += drop
        self.corr, self.scope, self.api = u[keep], scope[keep], api[keep]
        self.lb, self.le, self.graph, self.rows = lb[keep], le[keep], graph[keep], rows[keep]
        self.devices, self.mem, self.site = devices[keep], mem[keep], sites[keep]

    def match(
        self,
        new: dict[str, np.ndarray],
        final: bool = False,
        release: tuple[int, ...] | None = None,
    ) -> dict[str, np.ndarray]:
        """Join ``new`` work records (and those pending) with the launches; return the ready
        rows (``RAW_COLUMNS`` columns plus scope and launch times). Rows of a launch with a scope
        whose API record never came (lost) are ready without launch times when their scope is
        in ``release`` (its profile is ending) or ``final``; with ``final`` the rest are
        foreign."""
        r = {c: np.concatenate([self.pending[c], new[c]]) for c in RAW_COLUMNS}
        corr = r["correlation"].astype(np.uint64)
        n, m = len(corr), len(self.corr)
        if m:
            idx = np.minimum(np.searchsorted(self.corr, corr), m - 1)
            found = self.corr[idx] == corr
            has_api = found & self.api[idx]
            scoped = found & (self.scope[idx] != 0)
        else:
            idx = np.zeros(n, np.int64)
            found = has_api = scoped = np.zeros(n, bool)
        ready = has_api & scoped
        foreign = has_api & ~scoped
        if final:
            ready |= scoped
            foreign |= ~ready
        elif release and m:
            ready |= scoped & np.isin(self.scope[idx], np.array(release, np.int64))
        out = {c: r[c][ready] for c in RAW_COLUMNS}
        j = idx[ready]
        empty = np.zeros(0, np.int64)
        out["scope"] = self.scope[j] if m else empty
        out["launch_begin"] = self.lb[j] if m else empty
        out["launch_end"] = self.le[j] if m else empty
        out["site"] = self.site[j] if m else empty
        self.foreign += int(foreign.sum())
        used = idx[(ready | foreign) & found]
        emitted = ready & found
        if emitted.any():
            dev = r["device"][emitted]
            low = dev < 64
            bits = np.left_shift(np.uint64(1), dev[low].astype(np.uint64))
            np.bitwise_or.at(self.devices, idx[emitted][low], bits)
        if len(used):
            np.add.at(self.rows, used, 1)
            self._drop((self.rows > 0) & ~self.graph)
        wait = ~(ready | foreign)
        if wait.sum() > MAX_PENDING_ROWS:
            extra = int(wait.sum()) - MAX_PENDING_ROWS
            self.foreign += extra
            wait &= np.cumsum(wait) > extra
        self.pending = {c: r[c][wait] for c in RAW_COLUMNS}
        return out

    def _drop(self, done: np.ndarray) -> None:
        keep = ~done
        self.corr, self.scope, self.api = self.corr[keep], self.scope[keep], self.api[keep]
        self.lb, self.le = self.lb[keep], self.le[keep]
        self.graph, self.rows = self.graph[keep], self.rows[keep]
        self.devices, self.mem, self.site = self.devices[keep], self.mem[keep], self.site[keep]

    def waiting(self, scopes: tuple[int, ...]) -> int:
        """Launches of ``scopes`` whose API record came and no work record yet (allocating
        and freeing calls not counted: one that failed writes no record)."""
        if not len(self.corr):
            return 0
        mine = np.isin(self.scope, np.array(scopes, np.int64))
        return int((mine & self.api & ~self.mem & (self.rows == 0)).sum())

    def graph_devices(self, scopes: tuple[int, ...]) -> int:
        """Bit mask of the devices the rows of ``scopes``' graph launches ran on (CUPTI does
        not say how many node records a graph launch has: the profile's end waits for these
        devices, then flushes)."""
        if not len(self.corr):
            return 0
        mine = np.isin(self.scope, np.array(scopes, np.int64)) & self.graph & (self.rows > 0)
        return int(np.bitwise_or.reduce(self.devices[mine], initial=np.uint64(0)))

    def forget(self, scopes: tuple[int, ...], keep_waiting: bool = True) -> None:
        """The profile of ``scopes`` ended: drop its launches, but those still waiting (their
        records, if they come, are then known as late rather than foreign)."""
        if not len(self.corr):
            return
        mine = np.isin(self.scope, np.array(scopes, np.int64))
        if keep_waiting:
            mine &= ~(self.api & ~self.mem & (self.rows == 0))
        self._drop(mine)
