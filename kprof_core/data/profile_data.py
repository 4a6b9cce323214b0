"""``ProfileData``: what a profile recorded, as data that reports, exports and files are made from.

The bottom of the views: storage, exports, renderers and compare read it; the user's facade
``kprof_core.result.Profile`` adds the methods that call them (so nothing here imports a
reader, and no reader imports ``Profile``)."""

from __future__ import annotations

import operator
import os
import socket
from array import array
from collections.abc import MutableMapping, Sequence
from dataclasses import replace
from itertools import compress, repeat
from operator import add, and_, eq, ge, mul
from typing import Any, Literal, overload

from kprof_core.data.config_summary import config_rows, grouping
from kprof_core.data.memory import Memory
from kprof_core.data.record_views import iter_device_records
from kprof_core.data.records import (
    COPY,
    KERNEL,
    MARKS,
    PLACED,
    RANGE,
    UNRESOLVED,
    DeviceClock,
    DeviceTable,
    HostTable,
    KernelRecord,
    MarkerRecord,
    QueueRecord,
    RangeRecord,
    Recording,
    ThreadRecord,
)
from kprof_core.data.site_summary import SiteRow, StackRow, site_rows, stack_rows
from kprof_core.data.sites import Site
from kprof_core.data.summary import Durations, Summary, _split, rekeyed, rows_of, said_totals
from kprof_core.data.tree import range_work


class ProfileData:
    """The result of ``kprof.profile()``: print it, or read its records.

    Record views, built when asked for: ``kernels`` (device work: kernels and copies),
    ``device_ranges`` (device time of ``kprof.range`` blocks), ``ranges`` (host ranges),
    ``launches`` (the host calls that enqueued the kernels), ``markers``, ``unresolved``. Times
    in records are nanoseconds relative to the profile's start, ``start_ns``. ``summary()``
    gives per-name statistics, ``report()`` (or ``print(p)``) the printed report.

    Attributes, as data (what reports, exports and ``.kprof`` files are made from):

    - ``start_ns``, ``end_ns``: the host times (``time.perf_counter_ns``) at which the profile's
      block began and ended; ``span_ns`` may reach past ``end_ns`` (work still running).
    - ``clocks``: per device (its ``device_key``), a ``DeviceClock`` saying how its timestamps
      were placed on the host clock: ``method``, ``error_ns`` (the bound, or None when
      unknown) and ``shift_ns`` (how far the device was moved so that no work starts before
      its launch); ``describe()`` says it in words.
    - ``table``: device rows (``DeviceTable``: ``array('q')`` columns ``name``, ``kind``,
      ``queue``, ``thread``, ``launch_start``, ``launch_end``, ``start``, ``duration``,
      ``nbytes``, ``flags``; times absolute, on the host clock); ``host``: host rows
      (``HostTable``: ranges, markers and the host calls of untimed launches).
    - ``names``, ``queues`` (``QueueRecord``), ``threads`` (``ThreadRecord``): the interned
      values the tables' ``name``, ``queue`` and ``thread`` columns index.
    - ``sites``: the launch sites (``kprof.Site``: file, line, function) the tables' ``site``
      columns index (-1: unknown), sorted; ``summary(by="line")`` gives device time per site.
    - ``configs``: the launch configurations' texts the device table's ``config`` column
      indexes (-1: none); ``summary(by=("name", "config"))`` groups by them.
    - ``stacks``: the launch stacks (``profile(stacks=True)``): per stack id, its frames as
      ``kprof.Site``s, outermost first; ``kprof_core.data.stacks.frames_of`` reads a row's.
    - ``errors``: device row index -> why that row has no device time.
    - ``details``: device row index -> what the backend said about that row (a kernel's grid and
      block, its stream; rows from activity records such as CUPTI's).
    - ``dropped``: backend name -> (activity records its tracer lost while the profile ran,
      why): those kernels and copies are missing from the tables.
    - ``memory``: device memory reported allocated and freed (:class:`kprof.Memory`).
    - ``backends``: the names of the backends the profile used; ``trace``: whether printing it
      shows the trace; ``meta``: provenance (host, pid, rank, world size, clock anchors) and
      ``notes``, what a backend said the profile may lack (printed under the summary).
    """

    def __init__(self, trace: bool = False, backends: list[str] | None = None) -> None:
        self.trace = trace
        self.backends = list(backends or [])
        self.start_ns = 0
        self.end_ns = 0
        self.table = DeviceTable()
        self.host = HostTable()
        self.names: list[str] = []
        self.queues: list[QueueRecord] = []
        self.threads: list[ThreadRecord] = []
        self.sites: list[Site] = []
        self.configs: list[str] = []
        #: Stack id -> its frames, outermost first (``profile(stacks=True)``); ``frames_of``.
        self.stacks: tuple[tuple[Site, ...], ...] = ()
        self.errors: dict[int, str] = {}
        #: Row -> what the backend said about that device row (a kernel's grid and block).
        self.details: MutableMapping[int, str] = {}
        self.clocks: dict[str, DeviceClock] = {}
        #: backend name -> (activity records its tracer dropped while the profile ran, why).
        self.dropped: dict[str, tuple[int, str]] = {}
        self.meta: dict[str, Any] = {"host": socket.gethostname(), "pid": os.getpid()}
        self.memory = Memory()
        self._finished = False

    def _take(self, rec: Recording) -> None:
        """Become the profile of the recording a recorder handed up as it ended."""
        self.table, self.host = rec.table, rec.host
        self.names, self.queues, self.threads = rec.names, rec.queues, rec.threads
        self.sites, self.configs = rec.sites, rec.configs
        self.stacks = rec.stacks
        self.errors, self.clocks = rec.errors, rec.clocks
        self.details = rec.details
        self.dropped = rec.dropped
        self._finished = True
        from kprof_core.data.provenance import fill_meta

        # The process that ended the profile: a child forked inside it has its own records.
        self.meta["pid"] = os.getpid()
        fill_meta(self.meta)  # rank, clock domain and wall anchor: what merging needs

    # -- records ------------------------------------------------------------------------------

    @property
    def span_ns(self) -> int:
        """Nanoseconds from the profile's start to the end of its block or of the last device
        work it recorded, whichever is later (launches don't wait, so work can finish after)."""
        t = self.table
        # Unresolved rows start at their launch with no duration: they never reach past the end.
        end = max(self.end_ns, max(map(operator.add, t.start, t.duration), default=self.end_ns))
        return max(0, end - self.start_ns)

    def _device(self, kinds: tuple[int, ...]) -> list[KernelRecord]:
        views = (self.table, self.names, self.queues, self.threads, self.errors)
        recs = iter_device_records(*views, self.start_ns, self.sites, self.configs)
        kind = self.table.kind
        return [r for i, r in enumerate(recs) if kind[i] in kinds]

    @property
    def kernels(self) -> list[KernelRecord]:
        """Device records of kernels and copies, in the order they were harvested."""
        return self._device((KERNEL, COPY))

    @property
    def device_ranges(self) -> list[KernelRecord]:
        """The device side of ``kprof.range``/``kprof.kernel`` blocks, one record per queue:
        between the range's two timestamps, or, on a backend that reports its work itself
        (CUDA with CUPTI), from the first start to the last end of the work launched inside
        it on that queue (a range without work has none there)."""
        return self._device((RANGE,))

    @property
    def unresolved(self) -> list[KernelRecord]:
        """Device records that got no device time, each with its ``error``."""
        if not self.errors:  # every unresolved row has its reason there
            return []
        return [r for r in self._device((KERNEL, COPY, RANGE)) if r.error is not None]

    @property
    def ranges(self) -> list[RangeRecord]:
        """Host ranges (``kprof.range``), in the order they ended."""
        h, o = self.host, self.start_ns
        return [
            RangeRecord(
                self.names[h.name[i]],
                self.threads[h.thread[i]].label,
                h.start[i] - o,
                h.end[i] - h.start[i],
                site=self.sites[h.site[i]] if h.site[i] >= 0 else None,
            )
            for i in range(len(h))
            if h.kind[i] == HostTable.RANGE
        ]

    @property
    def launches(self) -> list[RangeRecord]:
        """The host side of every captured launch (the enqueue call), in harvest order
        (with ``device=False``, launches have only this host side)."""
        t, h, o = self.table, self.host, self.start_ns
        return [
            RangeRecord(
                self.names[t.name[i]],
                self.threads[t.thread[i]].label,
                t.launch_start[i] - o,
                t.launch_end[i] - t.launch_start[i],
                "launch",
            )
            for i in range(len(t))
            if t.kind[i] != RANGE
        ] + [
            RangeRecord(
                self.names[h.name[i]],
                self.threads[h.thread[i]].label,
                h.start[i] - o,
                h.end[i] - h.start[i],
                "launch",
            )
            for i in range(len(h))
            if h.kind[i] == HostTable.LAUNCH
        ]

    @property
    def markers(self) -> list[MarkerRecord]:
        """``kprof.mark`` instants, in the order they were recorded."""
        h, o = self.host, self.start_ns
        return [
            MarkerRecord(self.names[h.name[i]], self.threads[h.thread[i]].label, h.start[i] - o)
            for i in range(len(h))
            if h.kind[i] == HostTable.MARK
        ]

    def kernel_times(self, name: str) -> list[int]:
        """Device durations (ns) of every kernel or copy called ``name``."""
        t = self.table
        try:
            nid = self.names.index(name)
        except ValueError:
            return []
        return [
            t.duration[i]
            for i in range(len(t))
            if t.name[i] == nid and t.kind[i] != RANGE and not t.flags[i] & UNRESOLVED
        ]

    # -- summaries ------------------------------------------------------------------------------

    def durations(self) -> Durations:
        """Every duration (ns) grouped by ``(name, marks)``, section by section: what the
        summary's statistics and ``Profile.diff``'s tests are computed from.

        Column-wise (C-level ``map``/``compress`` over the columns) when there are few distinct
        names, else one pass over each table: a million records take well under a second.
        """
        t, h, names = self.table, self.host, self.names
        device, dranges, sizes = _device_groups(t)
        # The host side: launches' host calls (device rows that are not ranges), then host rows.
        host = _launch_groups(t)
        markers = _host_groups(h, names, host)

        def named(groups: dict[tuple[int, int], Any]) -> dict[tuple[str, int], Any]:
            return {(names[nid], marks): v for (nid, marks), v in groups.items()}

        flops, range_nbytes, range_flops = said_totals(t.name, t.kind, t.flags, t.nbytes, t.flops)
        # A range's device time is its work's (range_work); its rows' spans go apart. Bytes and
        # flops said of a range belong to its name, whatever marks its work has.
        work = range_work(self)
        return Durations(
            named(host),
            named(device),
            named(work),
            named(sizes),
            markers,
            named(flops),
            named(rekeyed(range_nbytes, work)),
            named(rekeyed(range_flops, work)),
            named(dranges),
        )

    @overload
    def summary(self, by: Literal["line"]) -> list[SiteRow]: ...  # type: ignore[overload-overlap]
    @overload
    def summary(self, by: Literal["stack"]) -> list[StackRow]: ...  # type: ignore[overload-overlap]
    @overload
    def summary(self, by: str | tuple[str, ...] | list[str] = ...) -> Summary: ...
    def summary(
        self, by: str | tuple[str, ...] | list[str] = "name"
    ) -> Summary | list[SiteRow] | list[StackRow]:
        """Per-name statistics of the host side, the device side and device ranges; with
        ``by="line"``, the device time of kernels and copies per launch site (``SiteRow``s,
        largest total first, with the kernels launched from each); with ``by="stack"``, the
        same per launch stack (``StackRow``s; ``profile(stacks=True)``); with ``by=("name",
        "config")`` the device rows per name and launch configuration (``SummaryRow.config``),
        with ``by="config"`` per configuration alone."""
        key = grouping(by)
        if key == "line":
            return site_rows(self.table, self.names, self.sites, self.span_ns)
        if key == "stack":
            return stack_rows(self.table, self.names, self.sites, self.stacks, self.span_ns)
        if key != "name":
            s = self.summary()
            rows = config_rows(self.table, self.names, self.configs, s.span_ns, "name" in key)
            return replace(s, device=rows)
        d, span = self.durations(), self.span_ns
        spans: dict[str, int] = {}
        for (name, _marks), durs in d.range_spans.items():
            spans[name] = spans.get(name, 0) + sum(durs)
        ranges = [
            replace(r, span_ns=spans.get(r.name))
            for r in rows_of(d.device_ranges, d.range_nbytes, span, d.range_flops)
        ]
        return Summary(
            span,
            rows_of(d.host, {}, span),
            rows_of(d.device, d.nbytes, span, d.flops),
            ranges,
            sorted(d.markers.items(), key=lambda kv: (-kv[1], kv[0])),
        )

    @property
    def counts(self) -> tuple[int, int]:
        """(host ranges, device kernels and copies) recorded."""
        h, t = self.host, self.table
        return h.kind.count(HostTable.RANGE), len(t) - t.kind.count(RANGE)

    @property
    def copies(self) -> int:
        """How many copies (and fills) were recorded; ``counts[1]`` less this is kernels."""
        return self.table.kind.count(COPY)


#: A group's key: (name id, marks).
Key = tuple[int, int]


def _device_groups(
    t: DeviceTable,
) -> tuple[dict[Key, list[int]], dict[Key, list[int]], dict[Key, int]]:
    """The device table's durations by ``(name id, marks)``: kernels and copies, ranges' own
    spans, and the bytes said of kernels and copies; unresolved rows left out."""
    device: dict[tuple[int, int], list[int]] = {}
    dranges: dict[tuple[int, int], list[int]] = {}
    sizes: dict[tuple[int, int], int] = {}
    # key = name * 32 + (UNRESOLVED and MARKS bits) * 2 + is a range.
    bits = UNRESOLVED | MARKS
    n = len(t)
    one_name = n > 0 and RANGE not in t.kind and t.name.count(t.name[0]) == n
    split: dict[int, list[int]] | None
    if one_name and (
        t.flags.count(PLACED) == n  # the usual flags, counted in C
        or not any(map(and_, t.flags, repeat(bits)))
    ):
        key0 = t.name[0] * 32  # every row has this key: no need to compute it
        split, nb_split = {key0: list(t.duration)}, {key0: t.nbytes}
    else:
        keys = array(
            "q",
            map(
                add,
                map(mul, t.name, repeat(32)),
                map(
                    add,
                    map(mul, map(and_, t.flags, repeat(bits)), repeat(2)),
                    map(eq, t.kind, repeat(RANGE)),
                ),
            ),
        )
        split = _split(keys, t.duration)
        nb_split = _split(keys, t.nbytes) if split is not None else None  # type: ignore[assignment]
    if split is not None and nb_split is not None:
        for key, durs in split.items():
            nid, rest = divmod(key, 32)
            flags = rest >> 1
            if flags & UNRESOLVED:
                continue
            gkey = (nid, flags & MARKS)
            (dranges if rest & 1 else device)[gkey] = durs
            nb = nb_split[key]
            if not rest & 1 and max(nb) >= 0:  # ranges' bytes: said_totals
                sizes[gkey] = sizes.get(gkey, 0) + sum(compress(nb, map(ge, nb, repeat(0))))
    else:
        for nid, kind, flags, dur, nbytes in zip(t.name, t.kind, t.flags, t.duration, t.nbytes):
            if flags & UNRESOLVED:
                continue
            key2 = (nid, flags & MARKS)
            groups = dranges if kind == RANGE else device
            group = groups.get(key2)
            if group is None:
                group = groups[key2] = []
            group.append(dur)
            if nbytes >= 0 and kind != RANGE:
                sizes[key2] = sizes.get(key2, 0) + nbytes
    return device, dranges, sizes


def _launch_groups(t: DeviceTable) -> dict[Key, list[int]]:
    """The host calls' durations of device rows that are not ranges, by ``(name id, 0)``."""
    host: dict[Key, list[int]] = {}
    n = len(t)
    launch_durs = array("q", map(operator.sub, t.launch_end, t.launch_start))
    split: dict[int, list[int]] | None
    if n > 0 and RANGE not in t.kind and t.name.count(t.name[0]) == n:  # one name
        split = {t.name[0] * 2: list(launch_durs)}
    else:
        split = _split(
            array("q", map(add, map(mul, t.name, repeat(2)), map(eq, t.kind, repeat(RANGE)))),
            launch_durs,
        )
    if split is not None:
        for key, durs in split.items():
            if not key & 1:
                host[(key >> 1, 0)] = durs
    else:
        for nid, kind, dur in zip(t.name, t.kind, launch_durs):
            if kind != RANGE:
                group = host.get((nid, 0))
                if group is None:
                    group = host[(nid, 0)] = []
                group.append(dur)
    return host


def _host_groups(h: HostTable, names: Sequence[str], host: dict[Key, list[int]]) -> dict[str, int]:
    """The host table's durations added to ``host`` by ``(name id, 0)``; returns how many
    marks of each name."""
    markers: dict[str, int] = {}
    host_durs = array("q", map(operator.sub, h.end, h.start))
    split = _split(array("q", map(add, map(mul, h.name, repeat(4)), h.kind)), host_durs)
    if split is not None:
        for key, durs in split.items():
            nid, kind = divmod(key, 4)
            if kind == HostTable.MARK:
                markers[names[nid]] = markers.get(names[nid], 0) + len(durs)
            else:
                host[(nid, 0)] = [*host.get((nid, 0), ()), *durs]
    else:
        for nid, kind, dur in zip(h.name, h.kind, host_durs):
            if kind == HostTable.MARK:
                markers[names[nid]] = markers.get(names[nid], 0) + 1
                continue
            group = host.get((nid, 0))
            if group is None:
                group = host[(nid, 0)] = []
            group.append(dur)
    return markers
