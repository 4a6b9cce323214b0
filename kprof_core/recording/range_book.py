"""The ``kprof.range`` blocks a profile has open, and what is said about ranges at its end.

A range's frame is ``(name, t0, begun, thread, recorder)``: ``t0`` the host range's start
(taken before its timestamps), ``begun`` what ``Recorder.device_range_begin`` put. The
Python range path (``annotations.py``) and the compiled one (``_range.c``) register a frame
here on entry and take it out on exit; the profile's end takes what is left (``cut``).
"""

from __future__ import annotations

from itertools import compress
from typing import TYPE_CHECKING, Any

from kprof_core.data.records import RANGE, HostTable

if TYPE_CHECKING:
    from collections.abc import Iterable

    from kprof_core.data.records import Recording
    from kprof_core.host.backend import Backend


class RangeBook:
    """The ranges entered and not yet exited while a profile records."""

    def __init__(self) -> None:
        #: id(frame) -> frame, for every range entered and not yet exited.
        self.open: dict[int, tuple[Any, ...]] = {}
        #: In a child made by ``os.fork()``: the open ranges begun before the fork, id(frame)
        #: -> the fork's time, where the child's part of each begins (host only).
        self.forked: dict[int, int] = {}
        #: How many times this process was forked inside the profile (counted in the child):
        #: a ``kprof.kernel`` call that began before a fork leaves no row in the child.
        self.forks = 0

    def after_fork(self, me: Any, fork_ns: int) -> None:
        """In the child of an ``os.fork()``: the forking thread's ranges go on from
        ``fork_ns``, on the host only (their device timestamps are the parent's); other
        threads' are dropped (those threads do not exist in the child). The frames stay:
        their ids must stay unique while they are open."""
        for key, frame in list(self.open.items()):
            who = frame[3]
            if (who[0] if isinstance(who, tuple) else who) != me:
                del self.open[key]
        self.forked.clear()
        self.forked.update(dict.fromkeys(self.open, fork_ns))
        self.forks += 1

    def cut(self) -> list[tuple[str, Any, int, Any]]:
        """Every range still open, taken out: ``(name, thread, start, begun)`` each, the part
        of a range begun before a fork starting at the fork, without timestamps."""
        cut = []
        while self.open:
            key, frame = self.open.popitem()
            name, h0, begun, who, _rec = frame
            since = self.forked.pop(key, None)
            if since is not None:
                # Begun before an os.fork() (this is the child): its timestamps are the
                # parent's, not given back here.
                h0, begun = since, None
            cut.append((name, who, h0, begun))
        return cut


def queueless_notes(
    rec: Recording, backends: Iterable[Backend], device: bool, by_work: Iterable[Backend] = ()
) -> list[str]:
    """Why some ranges have no device time on a backend that did device work in the profile:
    counted at the end from the tables (host ranges of a name minus that backend's device
    ranges of it), so that entering a range costs nothing more. The usual cause is a range
    entered before the thread had a current queue (OpenCL: before its first launch). Not
    for the backends ``by_work``, whose ranges' spans are their work's (a range without work
    has none)."""
    if not device:
        return []
    table, host = rec.table, rec.host
    entered: dict[int, int] = {}
    for kind, name in zip(host.kind, host.name):
        if kind == HostTable.RANGE:
            entered[name] = entered.get(name, 0) + 1
    if not entered:  # no range: no scan of the (maybe million-row) device table
        return []
    timed = {b.name for b in backends if b.has_timestamps} - {b.name for b in by_work}
    used = {rec.queues[q].backend for q in set(table.queue) if q >= 0}
    if not used & timed:
        return []
    on_device: dict[tuple[str, int], int] = {}
    # Only the range rows reach Python: the kind test runs in C (map, compress).
    for q, name in compress(zip(table.queue, table.name), map(RANGE.__eq__, table.kind)):
        if q >= 0:
            key = (rec.queues[q].backend, name)
            on_device[key] = on_device.get(key, 0) + 1
    notes = []
    for backend in sorted(used & timed):
        for name, n in sorted(entered.items()):
            missing = n - on_device.get((backend, name), 0)
            if missing > 0:
                label = rec.names[name]
                notes.append(
                    f"{missing} of {n} {label!r} ranges have no span on {backend} (their "
                    "device time, their work's, is counted): entered where the thread had no "
                    "current queue (OpenCL learns it from the thread's first launch, or "
                    "kprof_opencl.use_queue(q); HIP from kprof_hip.use_stream(s))"
                )
    return notes
