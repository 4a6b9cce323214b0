"""The timeline model: which row (track) each record is drawn on, in what order, at what depth.

The console trace, the Chrome/Perfetto trace and the HTML timeline all lay a profile out with
this module, so they show the same rows:

- one **process** for the host side of a profile (its threads) and one per device;
- on the host, one **track** per thread (an asyncio task gets its own track, since tasks on
  one thread interleave): host ranges, captured launches (the enqueue call) and markers;
- on a device, one track per queue and launching thread (``queue 1, thread 2``): kernels,
  copies and the device time of ranges, each at its device time placed on the host clock.

Every track nests strictly (an entry lies wholly inside another, or after it), which both
Perfetto and the indented trace need. Data that breaks this (kernels overlapping on an
out-of-order queue, ranges entered and exited out of order) spills onto an overflow lane,
named ``... (overlap N)``, instead of being drawn wrong.

Records the device never timed (unresolved) are left off the device tracks; their launch stays
on its thread, with the reason. Host-timed records (backends without timestamps) are drawn on
their queue's track with their host times and flagged ``host_timed``.

Entries are items: ``row << 2 | tag``, where ``tag`` says which table the row is in and which
of its two intervals is meant (a device row has a launch and a device interval).
"""

from __future__ import annotations

import heapq
import re
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kprof_core.data.records import RANGE, UNRESOLVED, HostTable, QueueRecord, ThreadRecord

if TYPE_CHECKING:
    from kprof_core.data.profile_data import ProfileData

# Item tags.
LAUNCH, DEVICE, HOST_RANGE, MARK = 0, 1, 2, 3

#: Past this many overflow lanes on one track, further conflicts share the last lane (it then
#: may not nest strictly); only pathological data gets there.
MAX_LANES = 64


def thread_labels(p: ProfileData) -> list[str]:
    """``thread N`` for each of the profile's thread records.

    N counts threads in the order they first did something (so the thread that entered the
    profile is usually ``thread 1``, whatever order the records were harvested in). A thread
    is known by its ident and name (the OS reuses the ident of a finished thread). An asyncio
    task reads ``thread N, task <name>``: tasks on one thread share its number.
    """
    first: dict[int, int] = {}
    t, h = p.table, p.host
    for threads, starts in ((h.thread, h.start), (t.thread, t.launch_start)):
        for ti, s in zip(threads, starts):
            if s < first.get(ti, s + 1):
                first[ti] = s
    order = sorted(range(len(p.threads)), key=lambda i: (i not in first, first.get(i, 0), i))
    numbers: dict[tuple[int, str], int] = {}
    for i in order:
        th = p.threads[i]
        numbers.setdefault((th.ident, th.name), len(numbers) + 1)
    out = []
    for th in p.threads:
        n = numbers[(th.ident, th.name)]
        out.append(f"thread {n}, task {th.task}" if th.task else f"thread {n}")
    return out


def thread_title(th: ThreadRecord, label: str) -> str:
    """The label with the Python thread's name when it has a real one (not a bare ident)."""
    if th.name.startswith("thread ") and th.name[7:].isdigit():
        return label
    return f"{label} ({th.name})"


#: How a track's items are ordered: (start, start - end, rank, item). By start, longer first,
#: and at equal intervals ranges before what they may enclose (launches, kernels, markers).
Key = tuple[int, int, int, int]


def _in_order(keyed: Callable[[array[int]], Iterator[Key]], codes: array[int]) -> Iterable[Key]:
    """``keyed(codes)`` in sorted order: lazily when the starts already are in order (only
    runs of equal starts are then sorted), else as a sorted list."""
    prev = None
    for s, _neg, _rank, _c in keyed(codes):
        if prev is not None and s < prev:
            return sorted(keyed(codes))
        prev = s
    return _sort_runs(keyed(codes))


def _sort_runs(keys: Iterator[Key]) -> Iterator[Key]:
    run: list[Key] = []
    for k in keys:
        if run and k[0] != run[0][0]:
            if len(run) > 1:
                run.sort()
            yield from run
            run = []
        run.append(k)
    run.sort()
    yield from run


def _natural(s: str) -> tuple[tuple[int, int | str], ...]:
    """A sort key that puts ``queue 2`` before ``queue 10``."""
    return tuple((0, int(x)) if x.isdigit() else (1, x) for x in re.split(r"(\d+)", s) if x)


def device_title(q: QueueRecord) -> str:
    """How a device is named: ``OpenCL <device>``, ``CUDA 0``; the device name alone when it
    already starts with the backend's name (``testdev 0``)."""
    if q.backend == "host":
        return "host-timed work (no device queue)"
    title = q.backend_title
    if q.device.lower().startswith(title.lower()):
        return q.device
    return f"{title} {q.device}"


@dataclass
class Track:
    """One row of the timeline: items sorted by start (longer first at equal starts)."""

    process: int
    name: str
    kind: str  # "thread" or "queue"
    thread: int
    queue: int | None = None
    lane: int = 0
    items: array[int] = field(default_factory=lambda: array("q"))
    depths: array[int] = field(default_factory=lambda: array("q"))

    @property
    def max_depth(self) -> int:
        return max(self.depths, default=0)


@dataclass
class Process:
    """A group of tracks: the host side of a profile, or one device."""

    name: str
    kind: str  # "host" or "device"
    device_key: str | None = None
    tracks: list[Track] = field(default_factory=list)


class Timeline:
    """One profile laid out as processes and tracks (see the module docstring).

    ``bounds(item)`` gives an item's ``(start, end)`` in absolute host nanoseconds.
    """

    def __init__(self, p: ProfileData) -> None:
        self.profile = p
        self.thread_labels = thread_labels(p)
        self.processes: list[Process] = []
        t, h = p.table, p.host
        n = len(t)
        kind, flags, thread, queue = t.kind, t.flags, t.thread, t.queue

        # Thread records with one label (an ident reused by a thread of the same name) share
        # a track: they ran one after the other.
        labels = self.thread_labels
        first_of: dict[str, int] = {}
        canon = [first_of.setdefault(label, i) for i, label in enumerate(labels)]

        # Group items per track first (as arrays: a million records cost 8 MB per item list).
        thread_items: dict[int, array[int]] = {}
        for j in range(len(h)):
            tag = MARK if h.kind[j] == HostTable.MARK else HOST_RANGE
            thread_items.setdefault(canon[h.thread[j]], array("q")).append(j << 2 | tag)
        queue_items: dict[tuple[int, int], array[int]] = {}
        for i in range(n):
            tid = canon[thread[i]]
            if kind[i] != RANGE:
                thread_items.setdefault(tid, array("q")).append(i << 2 | LAUNCH)
            if not flags[i] & UNRESOLVED:
                queue_items.setdefault((queue[i], tid), array("q")).append(i << 2 | DEVICE)

        host = Process("host", "host")
        self.processes.append(host)
        for tid in sorted(thread_items, key=lambda k: _natural(labels[k])):
            base = Track(0, labels[tid], "thread", tid)
            host.tracks += self._lay_out(base, thread_items.pop(tid))

        devices: dict[str, int] = {}
        for qid in range(len(p.queues)):  # devices in the order their queues were first seen
            key = p.queues[qid].device_key
            if key not in devices and any(k[0] == qid for k in queue_items):
                devices[key] = len(self.processes)
                self.processes.append(Process(device_title(p.queues[qid]), "device", key))
        for qid, tid in sorted(
            queue_items,
            key=lambda k: (_natural(p.queues[k[0]].label), k[0], _natural(labels[k[1]])),
        ):
            q = p.queues[qid]
            pi = devices[q.device_key]
            name = f"{q.label}, {labels[tid]}" if q.backend != "host" else labels[tid]
            base = Track(pi, name, "queue", tid, qid)
            self.processes[pi].tracks += self._lay_out(base, queue_items.pop((qid, tid)))

    # -- geometry --------------------------------------------------------------------------------

    def bounds(self, item: int) -> tuple[int, int]:
        """``(start, end)`` of an item, absolute host nanoseconds (end ≥ start)."""
        i, tag = item >> 2, item & 3
        if tag == DEVICE:
            t = self.profile.table
            return t.start[i], t.start[i] + max(0, t.duration[i])
        if tag == LAUNCH:
            t = self.profile.table
            return t.launch_start[i], max(t.launch_start[i], t.launch_end[i])
        h = self.profile.host
        return h.start[i], max(h.start[i], h.end[i])

    def row_name(self, track: Track) -> str:
        """The track's full name, as the trace's ``On`` column prints it."""
        if track.kind == "thread":
            return track.name
        return f"{self.processes[track.process].name}, {track.name}"

    def tracks(self) -> Iterator[Track]:
        for proc in self.processes:
            yield from proc.tracks

    def _lay_out(self, base: Track, items: array[int]) -> list[Track]:
        """Sort a track's items and give each a depth; spill what doesn't nest onto lanes."""
        t, h = self.profile.table, self.profile.host
        # Items as Keys: in order by start, longer first at equal starts (see Key).
        # Launches on a thread and kernels on an in-order queue are already in that order, so
        # each group is sorted only when it needs it (a million sorted tuples cost ~250 MB).
        if base.kind == "queue":
            st, du, kind = t.start, t.duration, t.kind

            def keyed(codes: array[int]) -> Iterator[Key]:
                return ((st[c >> 2], min(0, -du[c >> 2]), kind[c >> 2] != RANGE, c) for c in codes)

            order: Iterable[Key] = _in_order(keyed, items)
        else:
            ls, le, hs, he = t.launch_start, t.launch_end, h.start, h.end

            def launches(codes: array[int]) -> Iterator[Key]:
                return ((ls[c >> 2], min(0, ls[c >> 2] - le[c >> 2]), 1, c) for c in codes)

            def host(codes: array[int]) -> Iterator[Key]:
                return (
                    (hs[c >> 2], min(0, hs[c >> 2] - he[c >> 2]), 2 * (c & 3 == MARK), c)
                    for c in codes
                )

            split = array("q", (c for c in items if c & 3 == LAUNCH))
            rest = array("q", (c for c in items if c & 3 != LAUNCH))
            order = heapq.merge(_in_order(launches, split), _in_order(host, rest))
        lanes: list[Track] = [base]
        stacks: list[list[int]] = [[]]  # per lane: ends of the entries still open
        stack0 = stacks[0]
        items0, depths0 = base.items, base.depths
        for s, neg, _rank, item in order:
            e = s - neg
            if item & 3 == MARK:
                # An instant: drawn where it happens, inside whatever is open then.
                while stack0 and stack0[-1] < s:
                    stack0.pop()
                items0.append(item)
                depths0.append(len(stack0))
                continue
            while stack0 and stack0[-1] <= s:
                stack0.pop()
            if not stack0 or stack0[-1] >= e:  # the common case: it nests on the track
                items0.append(item)
                depths0.append(len(stack0))
                stack0.append(e)
                continue
            li = 0
            while True:  # the first overflow lane where it nests
                li += 1
                if li == len(stacks):
                    if li > MAX_LANES:
                        li -= 1
                        break
                    lanes.append(
                        Track(
                            base.process,
                            f"{base.name} (overlap {li})",
                            base.kind,
                            base.thread,
                            base.queue,
                            li,
                        )
                    )
                    stacks.append([])
                stack = stacks[li]
                while stack and stack[-1] <= s:
                    stack.pop()
                if not stack or stack[-1] >= e:
                    break
            stack = stacks[li]
            lanes[li].items.append(item)
            lanes[li].depths.append(len(stack))
            stack.append(e)
        return lanes
