"""Combining profiles of several processes (ranks) onto one timeline (the cross-rank summary
of such a run is ``ranks/summary.py``).

Each profile's times are on its own host clock (``perf_counter_ns``). ``clock_placements``
decides, for each profile, the offset that puts its times on one common timeline, and how
well it is known:

1. measured: ``meta["clock_offset_ns"]`` (set by ``kprof.mpi``, against rank 0's clock), with
   its ``clock_error_ns``;
2. same clock: a profile whose ``clock_domain`` (boot id) equals one already placed shares its
   clock, so it takes the same offset (exact for the ranks of one machine);
3. wall clocks: otherwise the ``wall_anchor``s tie each clock to ``time.time_ns()``, which is
   as good as the machines' NTP synchronization (error unknown, typically micro- to
   milliseconds);
4. nothing known: offset 0.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kprof_core.data.memory import Memory, MemoryTable
from kprof_core.data.provenance import source_label
from kprof_core.data.records import STACK_TYPE, Interner, QueueRecord, ThreadRecord
from kprof_core.data.timefmt import format_time
from kprof_core.host.backend import KprofError
from kprof_core.io.filecheck import TIME_LIMIT
from kprof_core.result import Profile

MEASURED = "measured against rank 0 (MPI ping-pong)"
REFERENCE = "the reference clock (rank 0 of the MPI job)"
SAME_CLOCK = "same host clock"
WALL = "wall clocks (time.time_ns), as synchronized as NTP keeps them"
UNKNOWN = "no alignment information: assumed to share the first profile's clock"


@dataclass(frozen=True)
class ClockPlacement:
    """How one profile is put on the common timeline: add ``offset_ns`` to its times."""

    offset_ns: int
    error_ns: int | None
    method: str

    def describe(self) -> str:
        err = "error unknown" if self.error_ns is None else f"error ≤ {format_time(self.error_ns)}"
        return f"{self.method}, offset {self.offset_ns} ns, {err}"


def _anchor_delta(meta: dict[str, Any]) -> int | None:
    """wall − perf for this profile's clock, when it has a wall anchor."""
    a = meta.get("wall_anchor")
    if (
        isinstance(a, dict)
        and isinstance(a.get("wall_ns"), int)
        and isinstance(a.get("perf_ns"), int)
    ):
        return int(a["wall_ns"]) - int(a["perf_ns"])
    return None


def clock_placements(profiles: Sequence[Profile]) -> list[ClockPlacement]:
    """For each profile, the offset that puts its times on the common timeline (see module doc)."""
    out: list[ClockPlacement | None] = [None] * len(profiles)
    # Per clock domain: the best placement known so far, and the wall − perf of that clock.
    domains: dict[str, ClockPlacement] = {}
    ref_anchor: tuple[int, ClockPlacement] | None = None

    def note(i: int, pl: ClockPlacement) -> None:
        nonlocal ref_anchor
        out[i] = pl
        meta = profiles[i].meta
        dom = meta.get("clock_domain")
        if isinstance(dom, str):
            prev = domains.get(dom)
            if prev is None or (
                pl.error_ns is not None and (prev.error_ns is None or pl.error_ns < prev.error_ns)
            ):
                domains[dom] = pl
        delta = _anchor_delta(meta)
        if delta is not None and (
            ref_anchor is None or (pl.error_ns is not None and ref_anchor[1].error_ns is None)
        ):
            ref_anchor = (delta, pl)

    for i, p in enumerate(profiles):
        off = p.meta.get("clock_offset_ns")
        if isinstance(off, int) and not isinstance(off, bool):
            err = p.meta.get("clock_error_ns")
            method = REFERENCE if p.meta.get("clock_reference") is True else MEASURED
            note(i, ClockPlacement(off, err if isinstance(err, int) else None, method))
    if profiles and all(pl is None for pl in out):
        # Nothing measured: the timeline is the clock of the lowest rank (else the first).
        # (Not "no clock domain known": a measured offset without a domain is kept.)
        ranks = [p.meta.get("rank") for p in profiles]
        ref = min(
            range(len(profiles)),
            key=lambda i: (
                not isinstance(ranks[i], int),
                ranks[i] if isinstance(ranks[i], int) else 0,
                i,
            ),
        )
        note(ref, ClockPlacement(0, 0, SAME_CLOCK))
    for i, p in enumerate(profiles):
        if out[i] is not None:
            continue
        dom = p.meta.get("clock_domain")
        delta = _anchor_delta(p.meta)
        if isinstance(dom, str) and dom in domains:
            known = domains[dom]
            note(
                i,
                ClockPlacement(
                    known.offset_ns,
                    known.error_ns,
                    SAME_CLOCK if known.method == SAME_CLOCK else f"{SAME_CLOCK}; {known.method}",
                ),
            )
        elif (
            delta is not None
            and ref_anchor is not None
            and abs(delta - ref_anchor[0] + ref_anchor[1].offset_ns) < TIME_LIMIT
        ):
            # (Wall clocks more than 73 years apart are not clocks: such an anchor is ignored.)
            ref_delta, ref_pl = ref_anchor
            note(i, ClockPlacement(delta - ref_delta + ref_pl.offset_ns, None, WALL))
        else:
            note(i, ClockPlacement(0, None, UNKNOWN))
    return [pl for pl in out if pl is not None]


def _stacks(col: array[int], stack_map: list[int], n: int) -> array[int]:
    """A table's ``stack`` column in the merged profile's ids (-1 for every row without)."""
    if not col:
        return array(STACK_TYPE, (-1,)) * n
    return array(STACK_TYPE, [-1 if v < 0 else stack_map[v] for v in col])


def _shifted(col: array[int], delta: int) -> array[int]:
    if not delta:
        return array("q", col)
    if col and not (-TIME_LIMIT <= min(col) + delta and max(col) + delta < TIME_LIMIT):
        # Loaded times and offsets lie within ±2**61 ns, so this is the only check needed for
        # the sums to stay in int64 (and for the result to save and load back).
        raise KprofError(
            f"these profiles cannot share one timeline: shifting their times by "
            f"{delta} ns (their clock offsets) takes them beyond ±2**61 ns; check "
            f"the files' clock_offset_ns and wall_anchor"
        )
    return array("q", [v + delta for v in col])


def shift_profile(p: Profile, delta_ns: int) -> None:
    """Add ``delta_ns`` to every host-clock time of ``p`` in place (records, span, wall anchor)."""
    if not delta_ns:
        return
    t, h = p.table, p.host
    for c in ("launch_start", "launch_end", "start"):
        setattr(t, c, _shifted(getattr(t, c), delta_ns))
    h.start, h.end = _shifted(h.start, delta_ns), _shifted(h.end, delta_ns)
    p.start_ns, p.end_ns = (int(v) for v in _shifted(array("q", [p.start_ns, p.end_ns]), delta_ns))
    p.memory.table.time = _shifted(p.memory.table.time, delta_ns)
    p.memory.start_ns = p.start_ns
    anchor = p.meta.get("wall_anchor")
    if isinstance(anchor, dict) and isinstance(anchor.get("perf_ns"), int):
        p.meta["wall_anchor"] = {**anchor, "perf_ns": anchor["perf_ns"] + delta_ns}


def _identity(meta: dict[str, Any]) -> tuple[Any, ...]:
    return (meta.get("host"), meta.get("pid"), meta.get("rank"))


def source_labels(profiles: Sequence[Profile]) -> list[str]:
    """``rank N`` (else ``host:pid``) for each profile; repeated labels get ``#2``, ``#3``."""
    labels: list[str] = []
    for p in profiles:
        base = source_label(p.meta)
        label, k = base, 2
        while label in labels:
            label, k = f"{base} #{k}", k + 1
        labels.append(label)
    return labels


def combine(profiles: Sequence[Profile], labels: Sequence[str] | None = None) -> Profile:
    """One profile holding every record of ``profiles``, on one timeline.

    Times are shifted by ``clock_placements``. When the profiles come from several processes,
    queue labels, thread names and device keys are prefixed with each one's label (``rank N``
    or ``host:pid``, or ``labels``) so that their rows stay apart. The result's ``meta`` lists
    the ``sources`` (each one's meta, label and placement) and, per queue and thread, the index
    of its source (``queue_source``, ``thread_source``), which ``cross_rank_summary`` uses.
    Profiles that are themselves combined contribute their sources as they are.
    """
    profiles = list(profiles)
    if not profiles:
        raise ValueError("combine() needs at least one profile")
    for p in profiles:
        if not isinstance(p, Profile):
            raise TypeError(f"combine() takes kprof.Profile objects, not {type(p).__name__}")
    if labels is not None and len(labels) != len(profiles):
        raise ValueError(f"{len(labels)} labels for {len(profiles)} profiles")
    labels = list(labels) if labels is not None else source_labels(profiles)
    placements = clock_placements(profiles)
    plain = [p for p in profiles if "sources" not in p.meta]
    several = len(profiles) > 1 and (
        len({_identity(p.meta) for p in plain}) > 1 or len(plain) < len(profiles)
    )
    out = Profile(
        trace=any(p.trace for p in profiles),
        backends=sorted({b for p in profiles for b in p.backends}),
    )
    merged = _Merged(out)
    for p, label, pl in zip(profiles, labels, placements):
        merged.add(p, label, pl, several)
    merged.finish()
    spans = array("q")
    for p, pl in zip(profiles, placements):
        spans.extend(_shifted(array("q", [p.start_ns, p.end_ns]), pl.offset_ns))
    out.start_ns, out.end_ns = min(spans[::2]), max(spans[1::2])
    out.memory = Memory(merged.mem, list(merged.mem_devices), list(merged.mem_sites), out.start_ns)
    ref = next(
        (p for p, pl in zip(profiles, placements) if pl.offset_ns == 0 and pl.error_ns == 0), None
    )
    out.meta = {
        "sources": merged.sources,
        "queue_source": merged.queue_source,
        "thread_source": merged.thread_source,
    }
    if ref is not None:  # the timeline is this profile's clock: later merges can align to it
        for k in ("host_clock", "clock_domain", "wall_anchor"):
            if k in ref.meta:
                out.meta[k] = ref.meta[k]
    out._finished = True
    return out


def _intern(
    table: dict[Any, int], value: Any, owners: list[int] | None = None, owner: int = 0
) -> int:
    i = table.get(value)
    if i is None:
        i = table[value] = len(table)
        if owners is not None:
            owners.append(owner)
    return i


class _Merged:
    """The combined profile as its sources are added: the interners every source's ids are
    mapped into, and which source each queue and thread came from."""

    def __init__(self, out: Profile) -> None:
        self.out = out
        self.names: dict[str, int] = {}
        self.sites = Interner()  # launch sites are the same text in every rank: never prefixed
        self.configs = Interner()  # so are launch configurations
        self.stacks = Interner()  # and so are stacks
        self.queues: dict[QueueRecord, int] = {}
        self.threads: dict[ThreadRecord, int] = {}
        self.mem = MemoryTable()
        self.mem_devices: dict[tuple[str, str], int] = {}
        self.mem_sites: dict[str, int] = {}
        self.sources: list[dict[str, Any]] = []
        self.queue_source: list[int] = []
        self.thread_source: list[int] = []

    def add(self, p: Profile, label: str, pl: ClockPlacement, several: bool) -> None:
        """``p``'s rows, shifted by its placement (prefixed with ``label`` when ``several``)."""
        nested = p.meta.get("sources")
        base = len(self.sources)
        if isinstance(nested, list):  # an already combined profile: keep its labels
            self.sources.extend(nested)
            qsrc = [base + int(s) for s in p.meta.get("queue_source", [0] * len(p.queues))]
            tsrc = [base + int(s) for s in p.meta.get("thread_source", [0] * len(p.threads))]
            prefix = None
        else:
            self.sources.append(
                {
                    "label": label,
                    "meta": p.meta,
                    "offset_ns": pl.offset_ns,
                    "error_ns": pl.error_ns,
                    "method": pl.method,
                }
            )
            qsrc, tsrc = [base] * len(p.queues), [base] * len(p.threads)
            prefix = label if several else None
        maps = _Maps(
            names=[_intern(self.names, n) for n in p.names],
            sites={i: self.sites(site) for i, site in enumerate(p.sites)} | {-1: -1},
            configs=[*map(self.configs, p.configs), -1],  # -1 (none) indexes the last
            stacks=[self.stacks(s) for s in p.stacks],
            queues=[
                _intern(
                    self.queues,
                    q
                    if prefix is None
                    else QueueRecord(
                        q.backend, q.device, f"{prefix}: {q.label}", f"{prefix}/{q.device_key}"
                    ),
                    self.queue_source,
                    qsrc[k],
                )
                for k, q in enumerate(p.queues)
            ],
            threads=[
                _intern(
                    self.threads,
                    t if prefix is None else ThreadRecord(t.ident, f"{prefix}: {t.name}", t.task),
                    self.thread_source,
                    tsrc[k],
                )
                for k, t in enumerate(p.threads)
            ],
        )
        self._device(p, maps, pl.offset_ns)
        self._host(p, maps, pl.offset_ns)
        for key, clock in p.clocks.items():
            self.out.clocks[key if prefix is None else f"{prefix}/{key}"] = clock
        m = p.memory  # each rank's devices apart, named as its queues are
        dmap = [
            _intern(self.mem_devices, (b, dv) if prefix is None else ("", f"{prefix}: {lab}"))
            for (b, dv), lab in zip(m.devices, m.labels)
        ]
        smap = [_intern(self.mem_sites, x) for x in m.sites]
        self.mem.extend(m.table, dmap, smap, _shifted(m.table.time, pl.offset_ns))

    def _device(self, p: Profile, maps: _Maps, off: int) -> None:
        t, d, out = p.table, self.out.table, self.out
        first = len(d)
        d.name.extend(array("q", [maps.names[v] for v in t.name]))
        d.kind.extend(t.kind)
        d.queue.extend(array("q", [maps.queues[v] for v in t.queue]))
        d.thread.extend(array("q", [maps.threads[v] for v in t.thread]))
        for c in ("launch_start", "launch_end", "start"):
            getattr(d, c).extend(_shifted(getattr(t, c), off))
        d.duration.extend(t.duration)
        d.nbytes.extend(t.nbytes)
        d.flags.extend(t.flags)
        d.site.extend(array("q", [maps.sites[v] for v in t.site]))
        d.config.extend(array("q", map(maps.configs.__getitem__, t.config)))
        d.flops.extend(t.flops)
        d.stack.extend(_stacks(t.stack, maps.stacks, len(t)))
        for row, msg in p.errors.items():
            out.errors[first + row] = msg
        for row, text in p.details.items():
            out.details[first + row] = text

    def _host(self, p: Profile, maps: _Maps, off: int) -> None:
        h, oh = p.host, self.out.host
        oh.name.extend(array("q", [maps.names[v] for v in h.name]))
        oh.kind.extend(h.kind)
        oh.thread.extend(array("q", [maps.threads[v] for v in h.thread]))
        oh.start.extend(_shifted(h.start, off))
        oh.end.extend(_shifted(h.end, off))
        oh.site.extend(array("q", [maps.sites[v] for v in h.site]))
        oh.stack.extend(_stacks(h.stack, maps.stacks, len(h)))

    def finish(self) -> None:
        """The combined profile's lists, from the interners."""
        out = self.out
        out.names = list(self.names)
        out.sites = self.sites.values
        out.configs = self.configs.values
        out.stacks = tuple(self.stacks.values)
        if not out.stacks:  # no rank recorded stacks: the columns stay empty, as such a profile's
            out.table.stack, out.host.stack = array(STACK_TYPE), array(STACK_TYPE)
        out.queues = list(self.queues)
        out.threads = list(self.threads)


@dataclass
class _Maps:
    """One source's ids -> the combined profile's, per thing its columns index."""

    names: list[int]
    sites: dict[int, int]
    configs: list[int]
    stacks: list[int]
    queues: list[int]
    threads: list[int]


__all__ = [
    "ClockPlacement",
    "clock_placements",
    "combine",
    "shift_profile",
    "source_labels",
]
