"""The idle analysis's arithmetic, column by column over one group's rows (a queue's, or a
device's): ``map``/``accumulate``/``compress`` over ``array('q')`` and ``sorted`` on runs,
so the loops run in C. The definitions are in :mod:`.idle`."""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from itertools import accumulate, compress, repeat
from operator import add, and_, ge, gt, le, lt, mul, rshift, sub
from operator import mod as modulo
from typing import Any

from kprof_core.analysis.idle_results import DelayStats, GroupAnalysis
from kprof_core.low_level import native


class Rows:
    """One group's rows, sorted by device start: starts, ends, launch starts, launch ends.

    ``mod`` is the compiled recorder (or None): it sorts and takes columns in C."""

    __slots__ = ("_bytes", "_runmax", "e", "le", "ls", "s")

    def __init__(
        self, s: array[int], e: array[int], ls: array[int], le_: array[int], mod: Any = None
    ) -> None:
        self._bytes: tuple[bytes, bytes, bytes, bytes] | None = None
        if mod is not None:
            order = mod.idle_order(s.tobytes())
            if order is not None:
                s, e, ls, le_ = (
                    of_bytes(mod.idle_take(c.tobytes(), order)) for c in (s, e, ls, le_)
                )
        elif len(s) > 1 and not all(map(le, s, s[1:])):
            # Several runs (queues merged, or a queue out of order): sort by start, rows
            # carried by their index (start * n + index sorts by start, then by index).
            n = len(s)
            order_ = array(
                "q", map(modulo, sorted(map(add, map(mul, s, repeat(n)), range(n))), repeat(n))
            )
            s, e, ls, le_ = (array("q", map(c.__getitem__, order_)) for c in (s, e, ls, le_))
        self.s, self.e, self.ls, self.le = s, e, ls, le_
        self._runmax: array[int] | None = None

    @property
    def runmax(self) -> array[int]:
        """The running maximum of the ends (rows before ``bisect_right(runmax, t)`` ended by t)."""
        if self._runmax is None:
            self._runmax = array("q", accumulate(self.e, max))
        return self._runmax

    def first_in(self, w0: int) -> int:
        """The first row that may reach into a window starting at ``w0``."""
        return 0 if not self.s or self.s[0] >= w0 else bisect_right(self.runmax, w0)

    def columns(self) -> tuple[bytes, bytes, bytes, bytes]:
        """Starts, ends, launch starts and launch ends as int64 bytes (for the compiled scan)."""
        if self._bytes is None:
            self._bytes = (self.s.tobytes(), self.e.tobytes(), self.ls.tobytes(), self.le.tobytes())
        return self._bytes


def of_bytes(b: bytes) -> array[int]:
    a = array("q")
    a.frombytes(b)
    return a


@dataclass
class Sums:
    window: int = 0
    busy: int = 0
    host: int = 0
    #: The part of ``host`` inside the next work's own launch call.
    launch: int = 0
    dep: int = 0
    other: int = 0
    depth_area: int = 0
    depth_max: int = 0
    #: The union's intervals, clipped to the windows (kept for overlaps only).
    spans: list[tuple[array[int], array[int]]] = field(default_factory=list)


def _window(
    r: Rows, w0: int, w1: int, others: array[int] | None, out: Sums, keep: bool, mod: Any
) -> None:
    """Add the busy time, idle split and queue depth of ``r`` within ``[w0, w1)`` to ``out``
    (in C where the compiled recorder is built: ``_crecorder.idle_window``, the same
    arithmetic row by row; a test checks both give the same figures)."""
    out.window += w1 - w0
    hi = bisect_left(r.s, w1)
    lo = r.first_in(w0)  # rows before lo ended by w0
    if mod is not None:
        _window_compiled(r, lo, hi, w0, w1, others, out, keep, mod)
        return
    if lo >= hi:
        out.host += w1 - w0
        return
    s = r.s[lo:hi]
    e = r.e[lo:hi]
    nls = r.ls[lo:hi]
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
    gls = array("q", compress(nls[1:], gap))
    gle = array("q", compress(nle[1:], gap))
    if s[0] > w0:  # the leading gap
        g0.insert(0, w0)
        g1.insert(0, s[0])
        gls.insert(0, nls[0])
        gle.insert(0, nle[0])
    _split_idle(out, (g0, g1, gls, gle), w0, w1, runmax[-1], others)
    _depth(out, nls, e, w0)
    if keep:  # the union's intervals: starts are s[0] and the gaps' ends, ends the gaps' starts
        u0 = array("q", [s[0]]) + array("q", compress(starts1, gap))
        u1 = array("q", compress(prev_end, gap)) + array("q", [runmax[-1]])
        out.spans.append((u0, u1))


def _window_compiled(
    r: Rows,
    lo: int,
    hi: int,
    w0: int,
    w1: int,
    others: array[int] | None,
    out: Sums,
    keep: bool,
    mod: Any,
) -> None:
    """``_window``'s arithmetic in C (``_crecorder.idle_window``)."""
    s_b, e_b, ls_b, le_b = r.columns()
    ob = None if others is None else others.tobytes()
    busy, host, launch, dep, other, area, dmax, u0, u1 = mod.idle_window(
        s_b, e_b, ls_b, le_b, lo, max(lo, hi), w0, w1, ob, keep
    )
    out.busy += busy
    out.host += host
    out.launch += launch
    out.dep += dep
    out.other += other
    out.depth_area += area
    out.depth_max = max(out.depth_max, dmax)
    if keep and u0 is not None and u1 is not None and lo < hi:
        out.spans.append((array("q", u0), array("q", u1)))


def _split_idle(
    out: Sums,
    gaps: tuple[array[int], array[int], array[int], array[int]],
    w0: int,
    w1: int,
    last_end: int,
    others: array[int] | None,
) -> None:
    """The window's busy time, and its idle time split by cause, from its gaps (each gap's
    start and end, and the launch call of the work that ends it) and the last work's end."""
    g0, g1, gls, gle = gaps
    idle_inner = sum(g1) - sum(g0)
    tail = w1 - last_end
    out.busy += (w1 - w0) - idle_inner - tail
    # Waiting for the host: from the gap's start to the next launch's end (within the gap).
    cut = array("q", map(min, g1, map(max, g0, gle)))
    host = sum(cut) - sum(g0)
    out.host += host + tail
    # Of that, inside the next work's own launch call: from its start (within the wait) on.
    out.launch += sum(cut) - sum(map(min, map(max, gls, g0), cut))
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


def _depth(out: Sums, nls: array[int], e: array[int], w0: int) -> None:
    """Queue depth: launch call begun and work not finished, within the window."""
    lc = array("q", map(min, map(max, nls, repeat(w0)), e))
    out.depth_area += sum(e) - sum(lc)
    n = len(e)
    # Events as (time - w0) * 2 + 1 for a launch, * 2 for an end: ends sort first at a tie.
    keys = sorted(
        [
            *map(mul, map(sub, e, repeat(w0)), repeat(2)),
            *map(add, map(mul, map(sub, lc, repeat(w0)), repeat(2)), repeat(1, n)),
        ]
    )
    steps = map(sub, map(mul, map(and_, keys, repeat(1)), repeat(2)), repeat(1))
    out.depth_max = max(out.depth_max, max(accumulate(steps)))


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
    mod = compiled_helpers()
    if mod is not None:
        return int(
            mod.idle_cover(
                b"".join(u0.tobytes() for u0, _ in spans),
                b"".join(u1.tobytes() for _, u1 in spans),
                at_least,
            )
        )
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
    kr: Rows,
    windows: list[tuple[int, int]],
    whole: bool,
    others: array[int] | None,
    clock: Any,
    keep: bool,
) -> tuple[GroupAnalysis, Sums]:
    """One group's analysis: the idle split of its rows ``r`` (kernels and copies) over the
    windows, its launch-to-start delays, and the short-kernel figures of its kernels ``kr``
    (``r`` itself where every row is a kernel)."""
    sums = Sums()
    mod = compiled_helpers()
    for w0, w1 in windows:
        _window(r, w0, w1, others, sums, keep, mod)
    aligned = clock is not None and clock.error_ns is not None
    rows, delays, _short = _stats(r, windows, whole, aligned, mod)
    kernels, _, short = (
        _stats(kr, windows, whole, False, mod) if kr is not r else (rows, None, _short)
    )
    g = GroupAnalysis(
        key=key,
        title=title,
        backend=backend,
        window_ns=sums.window,
        busy_ns=sums.busy,
        host_wait_ns=sums.host - sums.launch,
        launch_wait_ns=sums.launch,
        dependency_wait_ns=sums.dep,
        start_wait_ns=sums.other,
        rows=rows,
        kernels=kernels,
        short_rows=short[0],
        short_ns=short[1],
        median_duration_ns=short[2],
        median_launch_ns=short[3],
        delays=delays if rows else None,
        aligned=aligned,
        error_ns=clock.error_ns if clock is not None else None,
        depth_max=sums.depth_max,
        depth_mean=sums.depth_area / sums.window if sums.window else 0.0,
    )
    return g, sums


def _stats(
    r: Rows, windows: list[tuple[int, int]], whole: bool, aligned: bool, mod: Any
) -> tuple[int, DelayStats | None, tuple[int, int, int, int]]:
    """Of the rows starting in a window: their count, their launch-to-start delays (None
    unless ``aligned``), and (short rows, their device time, median duration, median launch
    call), short meaning shorter on the device than their launch call took."""
    if mod is not None:
        spans = (
            [(0, len(r.s))]
            if whole
            else [(bisect_left(r.s, w0), bisect_left(r.s, w1)) for w0, w1 in windows]
        )
        rows, short_rows, short_ns, md, ml, delays = mod.idle_stats(
            *r.columns(), array("q", [x for sp in spans for x in sp]).tobytes(), aligned
        )
        stats = DelayStats(*delays) if delays is not None else None
        return rows, stats, (short_rows, short_ns, md, ml)
    idx = _in_windows(r, windows, whole)
    s, e, le_, ls = r.s, r.e, r.le, r.ls
    if idx is not None:
        s, e, le_, ls = (array("q", map(c.__getitem__, idx)) for c in (r.s, r.e, r.le, r.ls))
    dur = array("q", map(sub, e, s))
    launch = array("q", map(sub, le_, ls))
    short = bytes(map(lt, dur, launch))
    delays = DelayStats.of(array("q", map(sub, s, le_))) if aligned else None
    return (
        len(s),
        delays,
        (sum(short), sum(compress(dur, short)), _median(dur), _median(launch)),
    )


#: The compiled helpers' calling convention this module uses (``_idle.c``'s IDLE_VERSION).
IDLE_VERSION = 2


def compiled_helpers() -> Any:
    """The compiled recorder where it is in use and has the analysis's helpers in the calling
    convention used here, else None (the Python twin)."""
    mod = native.compiled()
    return mod if getattr(mod, "IDLE_VERSION", None) == IDLE_VERSION else None
