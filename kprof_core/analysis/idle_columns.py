"""The idle analysis's arithmetic, column by column over one group's rows (a queue's, or a
device's): ``map``/``accumulate``/``compress`` over ``array('q')`` and ``sorted`` on runs,
so the loops run in C. The definitions are in :mod:`.idle`."""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from itertools import accumulate, compress, repeat
from operator import add, and_, ge, gt, le, lt, mod, mul, rshift, sub
from typing import Any

from kprof_core.analysis.idle_results import DelayStats, GroupAnalysis


class Rows:
    """One group's rows, sorted by device start: starts, ends, launch starts, launch ends."""

    __slots__ = ("e", "le", "ls", "runmax", "s")

    def __init__(self, s: array[int], e: array[int], ls: array[int], le_: array[int]) -> None:
        if len(s) > 1 and not all(map(le, s, s[1:])):
            # Several runs (queues merged, or a queue out of order): sort by start, rows
            # carried by their index (start * n + index sorts by start, then by index).
            n = len(s)
            order = array(
                "q", map(mod, sorted(map(add, map(mul, s, repeat(n)), range(n))), repeat(n))
            )
            s, e, ls, le_ = (array("q", map(c.__getitem__, order)) for c in (s, e, ls, le_))
        self.s, self.e, self.ls, self.le = s, e, ls, le_
        self.runmax = array("q", accumulate(e, max))


@dataclass
class Sums:
    window: int = 0
    busy: int = 0
    host: int = 0
    dep: int = 0
    other: int = 0
    depth_area: int = 0
    depth_max: int = 0
    #: The union's intervals, clipped to the windows (kept for overlaps only).
    spans: list[tuple[array[int], array[int]]] = field(default_factory=list)


def _window(r: Rows, w0: int, w1: int, others: array[int] | None, out: Sums, keep: bool) -> None:
    """Add the busy time, idle split and queue depth of ``r`` within ``[w0, w1)`` to ``out``."""
    out.window += w1 - w0
    hi = bisect_left(r.s, w1)
    lo = bisect_right(r.runmax, w0)  # rows before lo ended by w0
    if lo >= hi:
        out.host += w1 - w0
        return
    s = r.s[lo:hi]
    e = r.e[lo:hi]
    nle = r.le[lo:hi]
    if s[0] < w0:  # clip what reaches out of the window
        s = array("q", map(max, s, repeat(w0)))
    if r.runmax[hi - 1] > w1:
        e = array("q", map(min, e, repeat(w1)))
    e = array("q", map(max, e, s))
    runmax = array("q", accumulate(e, max)) if lo or r.runmax[hi - 1] > w1 else r.runmax[lo:hi]
    # Gaps: a row starting after everything before it ended.
    starts1, prev_end = s[1:], runmax[:-1]
    gap = bytes(map(gt, starts1, prev_end))
    g0 = array("q", compress(prev_end, gap))
    g1 = array("q", compress(starts1, gap))
    gle = array("q", compress(nle[1:], gap))
    if s[0] > w0:  # the leading gap
        g0.insert(0, w0)
        g1.insert(0, s[0])
        gle.insert(0, nle[0])
    idle_inner = sum(g1) - sum(g0)
    tail = w1 - runmax[-1]
    out.busy += (w1 - w0) - idle_inner - tail
    # Waiting for the host: from the gap's start to the next launch's end (within the gap).
    cut = array("q", map(min, g1, map(max, g0, gle)))
    host = sum(cut) - sum(g0)
    out.host += host + tail
    rest = idle_inner - host
    if rest and others is not None:
        # After the launch: waiting on another queue up to the latest other end in the gap.
        m = bytes(map(lt, cut, g1))
        a = array("q", compress(cut, m))
        b = array("q", compress(g1, m))
        # The last other end at or before each gap's end (others[-1] stands for "none": the
        # list starts with a sentinel below every time, so max(0, ...) drops it).
        latest = map(others.__getitem__, map(sub, map(bisect_right, repeat(others), b), repeat(1)))
        dep = sum(map(max, map(sub, latest, a), repeat(0)))
        out.dep += dep
        rest -= dep
    out.other += rest
    # Queue depth: launched (call ended) and not finished, within the window.
    lc = array("q", map(min, map(max, nle, repeat(w0)), e))
    out.depth_area += sum(e) - sum(lc)
    n = len(s)
    # Events as (time - w0) * 2 + 1 for a launch, * 2 for an end: ends sort first at a tie.
    keys = sorted(
        [
            *map(mul, map(sub, e, repeat(w0)), repeat(2)),
            *map(add, map(mul, map(sub, lc, repeat(w0)), repeat(2)), repeat(1, n)),
        ]
    )
    steps = map(sub, map(mul, map(and_, keys, repeat(1)), repeat(2)), repeat(1))
    out.depth_max = max(out.depth_max, max(accumulate(steps)))
    if keep:  # the union's intervals: starts are s[0] and the gaps' ends, ends the gaps' starts
        u0 = array("q", [s[0]]) + array("q", compress(starts1, gap))
        u1 = array("q", compress(prev_end, gap)) + array("q", [runmax[-1]])
        out.spans.append((u0, u1))


def _in_windows(r: Rows, windows: list[tuple[int, int]], whole: bool) -> list[int] | None:
    """Indexes of the rows starting in a window (None: every row)."""
    if whole:
        return None
    idx: list[int] = []
    for w0, w1 in windows:
        idx.extend(range(bisect_left(r.s, w0), bisect_left(r.s, w1)))
    return idx


def _median(values: Any) -> int:
    v = sorted(values)
    return v[(len(v) - 1) // 2] if v else 0


def busy_count(spans: list[tuple[array[int], array[int]]], at_least: int) -> int:
    """Time during which at least ``at_least`` of the interval lists cover (each disjoint)."""
    if not spans:
        return 0
    base = min(u0[0] for u0, _ in spans if len(u0))
    keys = sorted(
        [
            k
            for u0, u1 in spans
            for k in (
                *map(add, map(mul, map(sub, u0, repeat(base)), repeat(2)), repeat(1)),
                *map(mul, map(sub, u1, repeat(base)), repeat(2)),
            )
        ]
    )
    if not keys:
        return 0
    count = array(
        "q", accumulate(map(sub, map(mul, map(and_, keys, repeat(1)), repeat(2)), repeat(1)))
    )
    times = array("q", map(rshift, keys, repeat(1)))
    lengths = map(sub, times[1:], times[:-1])
    return sum(compress(lengths, map(ge, count[:-1], repeat(at_least))))


def group(
    key: str,
    title: str,
    backend: str,
    r: Rows,
    dur: array[int],
    windows: list[tuple[int, int]],
    whole: bool,
    others: array[int] | None,
    clock: Any,
    keep: bool,
) -> tuple[GroupAnalysis, Sums]:
    sums = Sums()
    for w0, w1 in windows:
        _window(r, w0, w1, others, sums, keep)
    idx = _in_windows(r, windows, whole)
    s, le_, ls = r.s, r.le, r.ls
    if idx is not None:
        s, le_, ls = (array("q", map(c.__getitem__, idx)) for c in (r.s, r.le, r.ls))
        dur = array("q", map(dur.__getitem__, idx))
    launch = array("q", map(sub, le_, ls))
    short = bytes(map(lt, dur, launch))
    aligned = clock is not None and clock.error_ns is not None
    return (
        GroupAnalysis(
            key=key,
            title=title,
            backend=backend,
            window_ns=sums.window,
            busy_ns=sums.busy,
            host_wait_ns=sums.host,
            dependency_wait_ns=sums.dep,
            unexplained_ns=sums.other,
            rows=len(s),
            short_rows=sum(short),
            short_ns=sum(compress(dur, short)),
            median_duration_ns=_median(dur),
            median_launch_ns=_median(launch),
            delays=DelayStats.of(array("q", map(sub, s, le_))) if aligned else None,
            aligned=aligned,
            error_ns=clock.error_ns if clock is not None else None,
            depth_max=sums.depth_max,
            depth_mean=sums.depth_area / sums.window if sums.window else 0.0,
        ),
        sums,
    )
