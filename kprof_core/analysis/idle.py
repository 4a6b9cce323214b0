"""Why the device waits: busy and idle time per device and per queue, idle split by cause,
launch-to-start delays, short kernels, queue depth and overlap, and a one-line verdict.

Definitions (each figure is exact integer arithmetic over the recorded rows):

- Rows analysed: device kernels and copies with a device time. Host-timed rows (``*``: the
  backend gave no timestamps, so kprof synchronized and timed the call) and approximate rows
  (``~``: completions observed on the host) cannot tell when the device was idle; they are
  skipped and counted (``Analysis.skipped``), as are unresolved rows. Device ranges are left
  out (they would count their kernels twice).
- Window: the profile's active span, from the first analysed row's start to the last one's
  end (the time before it, start-up such as contexts and program builds, and after it are
  reported apart: ``before_ns``, ``after_ns``), or the instances of a host range
  (``range="step"``), summed.
- Busy: the union of the rows' device intervals within the window; idle: the window less busy.
- Idle is split gap by gap. A gap ends where the next work starts; that work's launch call ran
  from ``launch_start`` to ``launch_end``. The part of the gap before ``launch_end`` is waiting
  for the host (nothing was enqueued yet): **inside that launch call** from ``launch_start``
  on (``launch_wait_ns``), **the host's own work** before it (``host_wait_ns``; so is the tail
  of a range after its last work ends). Of the part after the launch, the device was
  **waiting on another queue** up to the latest end of work on any other queue (or device)
  within the gap (a dependency it started after); the rest is **waiting to start**
  (``start_wait_ns``: the driver preparing or submitting it, a compile at a kernel's first
  launch, a wait on a host event, work kprof does not see).
- Launch-to-start delay: device start minus the launch call's end, only on devices whose clock
  was aligned to the host's (``Profile.clocks``: ``error_ns`` not None; the largest bound is
  named). It may be negative: work can start before the call returns.
- Short kernels: kernels (not copies) whose device duration is shorter than their launch call
  took; the medians the verdict compares are the kernels' too.
- First launches: a kernel's first row in the profile with its launch configuration (drivers
  compile a kernel at its first launch, PoCL per local size); a start-bound verdict says how
  much of the waiting to start came before them, and compares the kernels' median with the
  median waiting to start before a row (the per-launch overhead).
- Queue depth: work whose launch call had begun and that had not yet finished. Its mean over
  the window is exact by Little's law (the sum of each row's time from launch start to device
  end, clipped to the window, over the window's length); its maximum comes from a sweep.
- The verdict: :func:`kprof_core.analysis.idle_results.decide` (which kind) and
  :func:`~kprof_core.analysis.idle_results.verdict` (the line, with advice only where its
  figures support it).
- Overlap: per device, the time two or more of its queues were busy at once, and per pair.

Column-wise: ``map``/``accumulate``/``compress`` over ``array('q')`` columns and ``sorted`` on
runs (each queue's rows are already in start order, so Timsort only checks or merges runs):
the loops run in C on both recorder paths (``bench/analysis.py``: a million launches).
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from dataclasses import replace
from itertools import compress, repeat
from operator import add, and_, contains, eq, ne, not_
from typing import TYPE_CHECKING

from kprof_core.analysis.idle_columns import (
    Rows,
    Sums,
    busy_count,
    compiled_helpers,
    group,
    of_bytes,
)
from kprof_core.analysis.idle_results import (
    Analysis,
    DelayStats,
    GroupAnalysis,
    decide,
    notes,
    verdict,
)
from kprof_core.data.records import (
    APPROXIMATE,
    HOST_TIMED,
    KERNEL,
    PLACED,
    RANGE,
    UNRESOLVED,
    HostTable,
)

if TYPE_CHECKING:
    from kprof_core.data.profile_data import ProfileData

__all__ = ["Analysis", "DelayStats", "GroupAnalysis", "analyse"]

_indexes = range  # `analyse` takes a parameter named `range`, as the user writes it

#: Pairwise overlaps are listed for devices with at most this many queues (n² pairs).
MAX_PAIRED_QUEUES = 8


def analyse(p: ProfileData, range: str | None = None) -> Analysis:
    """Analyse ``p``'s device rows over its span, or over the instances of the host range
    named ``range``; see the module's docstring for every definition."""
    sel = _Selected(p)
    if range is None:
        windows, before, after = _active_span(p, sel)
    else:
        windows, before, after = _range_windows(p, range), None, None
    whole = range is None
    queues = p.queues
    devices: dict[str, list[int]] = {}
    for q in sel.qids:
        devices.setdefault(queues[q].device_key, []).append(q)
    q_out: list[GroupAnalysis] = []
    d_out: list[GroupAnalysis] = []
    overlaps: list[tuple[str, str, int]] = []
    for dkey, qs in devices.items():
        d_out.append(_device(p, sel, dkey, qs, windows, whole, q_out, overlaps))
    errors = [g.error_ns for g in d_out if g.aligned and g.error_ns is not None]
    kind, about = decide(d_out)
    first_wait = typical_wait = None
    if kind == "start-bound" and about is not None:  # the only verdict that needs them
        wanted = tuple(q for q in sel.qids if queues[q].device_key == about.key)
        first_wait, typical_wait = _first_launch_wait(
            wanted,
            (sel.qcol, sel.start, sel.end, sel.lend, sel.names, sel.configs),
            sel.is_kernel,
            windows,
            sel.others_of(list(wanted)),
        )
    said = verdict(kind, about, len(d_out) > 1, first_wait, typical_wait)
    if not d_out and sel.skipped:  # there was device work, none of it exactly timed
        said = "no exactly timed device work to analyse"
    return Analysis(
        range=range,
        windows=len(windows),
        window_ns=sum(w1 - w0 for w0, w1 in windows),
        devices=d_out,
        queues=q_out,
        overlaps=overlaps,
        skipped=sel.skipped,
        error_ns=max(errors) if errors else None,
        kind=kind,
        verdict=said,
        notes=notes(d_out, sel.skipped, errors),
        before_ns=before,
        after_ns=after,
        first_launch_wait_ns=first_wait,
    )


class _Selected:
    """The device rows analysed (exactly timed kernels and copies: ranges, unresolved,
    host-timed and approximate rows left out, counted in ``skipped``), column by column, and
    each queue's rows, in ``_crecorder``'s ``idle_*`` helpers where built."""

    def __init__(self, p: ProfileData) -> None:
        t = p.table
        n = len(t)
        self.mod = mod = compiled_helpers()
        bad = UNRESOLVED | HOST_TIMED | APPROXIMATE
        self.skipped: dict[str, int] = {}
        mask = None
        if t.kind.count(RANGE) or (
            t.flags.count(PLACED) != n  # the usual flags, counted in C
            and any(map(and_, t.flags, repeat(bad)))
        ):
            flagged = array("q", map(and_, t.flags, repeat(bad)))
            for bit, why in (
                (UNRESOLVED, "unresolved"),
                (HOST_TIMED, "host-timed"),
                (APPROXIMATE, "approximate"),
            ):
                k = sum(
                    compress(
                        map(ne, map(and_, flagged, repeat(bit)), repeat(0)),
                        map(ne, t.kind, repeat(RANGE)),
                    )
                )
                if k:
                    self.skipped[why] = k
            mask = bytes(map(and_, map(eq, flagged, repeat(0)), map(ne, t.kind, repeat(RANGE))))
        cols: tuple[array[int], ...] = (
            t.queue,
            t.start,
            t.duration,
            t.launch_start,
            t.launch_end,
            t.kind,
            t.name,
            t.config if len(t.config) == n else array("q", bytes(8 * n)),
        )
        if mask is not None:
            cols = tuple(array("q", compress(c, mask)) for c in cols)
        self.qcol, self.start, dur, self.lstart, self.lend, kinds, self.names, self.configs = cols
        # Copies are not kernels: the short-kernel figures take kernels only.
        only_kernels = kinds.count(KERNEL) == len(kinds)
        self.is_kernel = None if only_kernels else bytes(map(eq, kinds, repeat(KERNEL)))
        if mod is not None:
            end_b, last = mod.idle_ends(self.start.tobytes(), dur.tobytes())
            self.end = of_bytes(end_b)
            if mask is not None:  # the span, as ProfileData.span_ns has it, from every row
                last = mod.idle_ends(t.start.tobytes(), t.duration.tobytes())[1]
            last_end = max(p.end_ns, p.end_ns if last is None else last)
            self.span_end = p.start_ns + max(0, last_end - p.start_ns)
        else:
            self.end = array("q", map(add, self.start, dur))
            self.span_end = p.start_ns + p.span_ns
        qcol = self.qcol
        one = qcol and qcol.count(qcol[0]) == len(qcol)
        self.qids = [qcol[0]] if one else list(dict.fromkeys(qcol))
        self.qbytes = qcol.tobytes() if mod is not None and len(self.qids) > 1 else b""
        self.by_queue: dict[int, Rows] = {}
        self.kernels_of: dict[int, Rows] = {}
        for q in self.qids:
            self._queue(q)

    def _queue(self, q: int) -> None:
        """Queue ``q``'s rows, and its kernels' rows."""
        mod, qcol = self.mod, self.qcol
        cols = (self.start, self.end, self.lstart, self.lend)
        sel: tuple[array[int], ...]
        if len(self.qids) == 1:
            sel = cols
        elif mod is not None:
            sel = tuple(
                of_bytes(mod.idle_pick(self.qbytes, (q,), c.tobytes(), True, False)) for c in cols
            )
        else:
            m = bytes(map(eq, qcol, repeat(q)))
            sel = tuple(array("q", compress(c, m)) for c in cols)
        self.by_queue[q] = Rows(sel[0], sel[1], sel[2], sel[3], mod)
        if self.is_kernel is None:
            self.kernels_of[q] = self.by_queue[q]
        else:
            m = bytes(map(and_, map(eq, qcol, repeat(q)), self.is_kernel))
            ksel = [array("q", compress(c, m)) for c in cols]
            self.kernels_of[q] = Rows(ksel[0], ksel[1], ksel[2], ksel[3], mod)

    def others_of(self, qs: list[int]) -> array[int] | None:
        """Sorted ends of every other queue's rows, after a sentinel below every time."""
        if len(qs) == len(self.qids):
            return None
        sentinel = array("q", [-(1 << 62)])
        if self.mod is not None:
            picked = self.mod.idle_pick(self.qbytes, tuple(qs), self.end.tobytes(), False, True)
            return sentinel + of_bytes(picked)
        mine = map(contains, repeat(set(qs)), self.qcol)
        return sentinel + array("q", sorted(compress(self.end, map(not_, mine))))

    def rows_of(self, qs: list[int]) -> tuple[Rows, Rows]:
        """The rows of the queues ``qs`` together, and their kernels'."""
        cat = [array("q"), array("q"), array("q"), array("q")]
        kcat = [array("q"), array("q"), array("q"), array("q")]
        for q in qs:
            r, kr = self.by_queue[q], self.kernels_of[q]
            for c, col in zip(cat, (r.s, r.e, r.ls, r.le)):
                c += col
            for c, col in zip(kcat, (kr.s, kr.e, kr.ls, kr.le)):
                c += col
        rows = Rows(cat[0], cat[1], cat[2], cat[3], self.mod)
        if self.is_kernel is None:
            return rows, rows
        return rows, Rows(kcat[0], kcat[1], kcat[2], kcat[3], self.mod)


def _active_span(
    p: ProfileData, sel: _Selected
) -> tuple[list[tuple[int, int]], int | None, int | None]:
    """The one window of a whole profile: from the first analysed work to the last one's end
    (the profile's span without any), and the profile's time before and after it."""
    if not len(sel.start):
        return [(p.start_ns, sel.span_end)], None, None
    first, last = min(sel.start), max(sel.end)
    return [(first, last)], first - p.start_ns, max(0, sel.span_end - last)


def _range_windows(p: ProfileData, range: str) -> list[tuple[int, int]]:
    """The host range ``range``'s instances, in order; KeyError (naming the ranges there
    are) when it has none."""
    h = p.host
    try:
        nid = p.names.index(range)
    except ValueError:
        nid = -1
    windows = sorted(
        (h.start[i], h.end[i])
        for i in compress(
            _indexes(len(h)),
            map(and_, map(eq, h.name, repeat(nid)), map(eq, h.kind, repeat(HostTable.RANGE))),
        )
    )
    if not windows:
        ranges = sorted(
            {p.names[h.name[i]] for i in _indexes(len(h)) if h.kind[i] == HostTable.RANGE}
        )
        raise KeyError(f"no host range named {range!r}; ranges: {ranges}")
    return windows


def _device(
    p: ProfileData,
    sel: _Selected,
    dkey: str,
    qs: list[int],
    windows: list[tuple[int, int]],
    whole: bool,
    q_out: list[GroupAnalysis],
    overlaps: list[tuple[str, str, int]],
) -> GroupAnalysis:
    """Device ``dkey``'s analysis, from its queues ``qs``: each queue's goes to ``q_out``,
    each pair of its queues that overlap to ``overlaps``."""
    queues, clock = p.queues, p.clocks.get(dkey)
    q0 = queues[qs[0]]
    dtitle = f"{q0.backend_title} {q0.device}"
    q_sums: dict[int, Sums] = {}
    for q in qs:
        qr = queues[q]
        g, sums = group(
            f"{dkey}/{qr.label}",
            f"{dtitle}, {qr.label}",
            qr.backend,
            sel.by_queue[q],
            sel.kernels_of[q],
            windows,
            whole,
            sel.others_of([q]),
            clock,
            keep=len(qs) > 1,
        )
        q_out.append(g)
        q_sums[q] = sums
    if len(qs) == 1:
        return _retitle(q_out[-1], dkey, dtitle)
    rows, krows = sel.rows_of(qs)
    g, _ = group(
        dkey, dtitle, q0.backend, rows, krows, windows, whole, sel.others_of(qs), clock, keep=False
    )
    if len(qs) <= MAX_PAIRED_QUEUES:
        for i, a in enumerate(qs):
            for b in qs[i + 1 :]:
                both = busy_count([*q_sums[a].spans, *q_sums[b].spans], 2)
                if both:
                    overlaps.append(
                        (f"{dkey}/{queues[a].label}", f"{dkey}/{queues[b].label}", both)
                    )
    spans = [sp for q in qs for sp in q_sums[q].spans]
    return _with_overlap(g, busy_count(spans, 2))


def _first_launch_wait(
    qs: tuple[int, ...],
    cols: tuple[array[int], ...],
    is_kernel: bytes | None,
    windows: list[tuple[int, int]],
    others: array[int] | None,
) -> tuple[int, int]:
    """Of the device's waiting to start (queues ``qs``; ``cols``: queue, start, end, launch
    end, name and configuration per row): the part of the gaps whose next work is a kernel's
    first launch in the profile with its configuration (drivers compile a kernel per
    configuration: PoCL per local size), the gaps cut as the scan in :mod:`.idle_columns` cuts
    them; and the median over its rows of the waiting to start before each (0 where a row
    followed without a gap): per-launch overhead shows there, a few long waits do not. A Python
    loop: run only for a start-bound verdict."""
    qcol, start, end, lend, names, configs = cols
    mine = set(qs)
    idx = [i for i in _indexes(len(start)) if qcol[i] in mine]
    first: set[int] = set()
    seen: set[tuple[int, int]] = set()
    for i in sorted(idx, key=lend.__getitem__):
        key = (names[i], configs[i])
        if (is_kernel is None or is_kernel[i]) and key not in seen:
            seen.add(key)
            first.add(i)
    idx.sort(key=start.__getitem__)
    total = 0
    waits: list[int] = []
    for w0, w1 in windows:
        runmax: int | None = None
        for i in idx:
            if start[i] >= w1:
                break
            if end[i] <= w0:  # ended before the window
                continue
            si = max(start[i], w0)
            ei = max(min(end[i], w1), si)
            g0 = w0 if runmax is None else runmax
            wait = 0
            if si > g0:
                cut = min(si, max(g0, lend[i]))  # the host's part ends at the launch's end
                dep = 0
                if others is not None:  # then another queue's work, as the scan counts it
                    dep = max(others[bisect_right(others, si) - 1] - cut, 0)
                wait = si - cut - dep
                if i in first:
                    total += wait
            waits.append(wait)
            runmax = ei if runmax is None else max(runmax, ei)
    waits.sort()
    return total, waits[(len(waits) - 1) // 2] if waits else 0


def _retitle(g: GroupAnalysis, key: str, title: str) -> GroupAnalysis:
    return replace(g, key=key, title=title)


def _with_overlap(g: GroupAnalysis, ns: int) -> GroupAnalysis:
    return replace(g, overlap_ns=ns)
