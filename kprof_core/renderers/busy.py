"""Device-time counter tracks: how busy each queue, and each device, was, bin by bin.

The Chrome trace and the Perfetto export draw the same numbers, a counter track per queue
(``busy, <queue>``) under its device, and ``busy, all queues`` per device with more than one:

- **Bins.** The profile's span ``[t0, t1)`` (``t0`` its first time, as the trace's base;
  ``t1`` the end of its block or of its last device work, whichever is later) is cut into
  bins of ``width`` ns: the smallest of 1, 2 and 5 times a power of ten that is at least
  ``MIN_BIN_NS`` and at least the span over ``MAX_BINS``. So a track has at most ``MAX_BINS``
  bins (``MAX_BINS + 1`` points) however many launches the profile holds: a window of a long
  run costs the same few kilobytes of counters as a short profile. The last bin ends at ``t1``.
- **Value.** Per bin, the percentage of its length the device was busy with the track's
  work: the **union** of the rows' device intervals within the bin (work overlapping on two
  queues counts once for the device, never twice), times 100, over the bin's length, as a
  float (``100 * busy_ns / length``: correctly rounded, the same in both files). A point at
  each bin's start, and 0 at ``t1``.
- **Rows.** As the idle analysis (``Profile.analysis()``) counts busy time: device kernels and
  copies with a device time; device ranges are left out (they would cover their kernels'
  gaps), and so are host-timed, approximate and unresolved rows (their times do not say when
  the device was idle). A queue with none of them has no counter track. Summed over the
  bins, a queue's busy time is the analysis's ``busy_ns`` for it where the profile's span
  starts at its block.

Column-wise (``accumulate``/``compress``/``map`` over ``array('q')``, one ``bisect`` per bin
edge; rows sorted by start in C where the compiled recorder is built): no Python object per
record is kept.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from dataclasses import dataclass
from itertools import accumulate, compress, repeat
from operator import add, and_, eq, gt, le, ne, sub
from typing import TYPE_CHECKING, Any

from kprof_core.analysis.idle_columns import compiled_helpers
from kprof_core.data.records import APPROXIMATE, HOST_TIMED, PLACED, RANGE, UNRESOLVED
from kprof_core.renderers.common import first_time

if TYPE_CHECKING:
    from kprof_core.renderers.timeline import Timeline

#: At most this many bins per counter track.
MAX_BINS = 1000
#: The narrowest bin: 1 µs (a profile shorter than a millisecond has fewer bins).
MIN_BIN_NS = 1000
#: The name of the device-wide track, beside its queues' (``busy, <queue label>``).
ALL_QUEUES = "all queues"


def bin_width(span_ns: int) -> int:
    """The bins' width for a span (see the module docstring)."""
    want = max(MIN_BIN_NS, -(-span_ns // MAX_BINS))
    scale = 1
    while True:
        for m in (1, 2, 5):
            if m * scale >= want:
                return m * scale
        scale *= 10


@dataclass(frozen=True)
class Bins:
    """The bins of one profile: ``[t0 + k * width, min(t0 + (k + 1) * width, t1))``."""

    t0: int
    t1: int
    width: int

    @property
    def count(self) -> int:
        return -(-(self.t1 - self.t0) // self.width)

    def edges(self) -> list[int]:
        """Each bin's start, then ``t1``."""
        return [*range(self.t0, self.t1, self.width), self.t1]

    def percent(self, busy: array[int]) -> list[float]:
        """Each bin's busy share in percent, from its busy nanoseconds."""
        e = self.edges()
        return [100 * b / (e1 - e0) for b, e0, e1 in zip(busy, e, e[1:])]


@dataclass(frozen=True)
class BusyTrack:
    """One counter track: its name (``busy, queue 1``) and its busy nanoseconds per bin."""

    name: str
    busy: array[int]


def busy_tracks(tl: Timeline) -> tuple[Bins | None, dict[int, list[BusyTrack]]]:
    """The profile's bins (None: nothing to count) and, per device process of the timeline
    (its index in ``tl.processes``), its counter tracks: its queues' in the timeline's order,
    then ``busy, all queues`` when it has more than one."""
    p = tl.profile
    t = p.table
    if not len(t):
        return None, {}
    mod = compiled_helpers()
    n = len(t)
    # Ends (a duration below 0 counts as 0, as the timeline draws it): in C where built.
    if min(t.duration) >= 0:
        ends = (
            _of(mod.idle_ends(t.start.tobytes(), t.duration.tobytes())[0])
            if mod is not None
            else array("q", map(add, t.start, t.duration))
        )
    else:
        ends = array("q", map(add, t.start, map(max, t.duration, repeat(0))))
    t0 = first_time(p)
    t1 = max(p.end_ns, max(ends))
    if t1 <= t0:
        return None, {}
    bins = Bins(t0, t1, bin_width(t1 - t0))
    qcol, starts = t.queue, t.start
    if t.kind.count(RANGE) or t.flags.count(PLACED) != n:  # else every row counts
        bad = UNRESOLVED | HOST_TIMED | APPROXIMATE
        good = map(eq, map(and_, t.flags, repeat(bad)), repeat(0))
        keep = bytes(map(and_, good, map(ne, t.kind, repeat(RANGE))))
        qcol = array("q", compress(qcol, keep))
        starts = array("q", compress(starts, keep))
        ends = array("q", compress(ends, keep))
    one_queue = bool(qcol) and qcol.count(qcol[0]) == len(qcol)
    edges = bins.edges()
    out: dict[int, list[BusyTrack]] = {}
    for pi, proc in enumerate(tl.processes):
        if proc.kind != "device":
            continue
        qids = list(dict.fromkeys(tr.queue for tr in proc.tracks if tr.queue is not None))
        unions = []
        tracks = []
        for q in qids:
            if p.queues[q].backend == "host":
                continue
            if one_queue:
                if q != qcol[0]:
                    continue
                s, e = starts, ends
            else:
                m = bytes(map(eq, qcol, repeat(q)))
                s, e = array("q", compress(starts, m)), array("q", compress(ends, m))
            if not s:
                continue
            u = union(*_by_start(s, e, mod))
            unions.append(u)
            tracks.append(BusyTrack(f"busy, {p.queues[q].label}", per_bin(*u, edges)))
        if len(unions) > 1:
            s, e = array("q"), array("q")
            for u0, u1 in unions:
                s += u0
                e += u1
            u = union(*_by_start(s, e, mod))
            tracks.append(BusyTrack(f"busy, {ALL_QUEUES}", per_bin(*u, edges)))
        if tracks:
            out[pi] = tracks
    return (bins if out else None), out


def union(s: array[int], e: array[int]) -> tuple[array[int], array[int]]:
    """The union of intervals ``[s[i], e[i])`` sorted by start (``e >= s``), as the starts and
    ends of disjoint intervals in order (touching intervals merge)."""
    if not s:
        return array("q"), array("q")
    runmax = array("q", accumulate(e, max))
    prev_end = runmax[:-1]
    gap = bytes(map(gt, s[1:], prev_end))  # a row starting after everything before it ended
    u0 = s[:1]
    u0.extend(compress(s[1:], gap))
    u1 = array("q", compress(prev_end, gap))
    u1.append(runmax[-1])
    return u0, u1


def per_bin(u0: array[int], u1: array[int], edges: list[int]) -> array[int]:
    """Busy nanoseconds of the disjoint sorted intervals ``[u0[j], u1[j])`` in each bin
    ``[edges[k], edges[k + 1])``: ``covered(edges[k + 1]) - covered(edges[k])``, where
    ``covered(x)`` is the union's length before ``x`` (a prefix sum, and one bisect)."""
    before = array("q", [0])
    before.extend(accumulate(map(sub, u1, u0)))  # the union's length before interval j

    def covered(x: int) -> int:
        j = bisect_right(u0, x)
        if j == 0:
            return 0
        return before[j - 1] + min(x, u1[j - 1]) - u0[j - 1]

    c = [covered(x) for x in edges]
    return array("q", map(sub, c[1:], c[:-1]))


def _by_start(s: array[int], e: array[int], mod: Any) -> tuple[array[int], array[int]]:
    """The rows sorted by start (stable), ends carried: in C where built; in Python only
    when they are not already in order (one queue in order is the common case)."""
    if mod is not None:
        order = mod.idle_order(s.tobytes())
        if order is None:
            return s, e
        return _of(mod.idle_take(s.tobytes(), order)), _of(mod.idle_take(e.tobytes(), order))
    if all(map(le, s, s[1:])):
        return s, e
    order = sorted(range(len(s)), key=s.__getitem__)
    return array("q", map(s.__getitem__, order)), array("q", map(e.__getitem__, order))


def _of(b: bytes) -> array[int]:
    a = array("q")
    a.frombytes(b)
    return a
