"""Pooled CUDA events: the tokens behind kprof's device timestamps on CUDA.

Creating a timing event (``cudaEventCreate`` plus CuPy's finalizer) for every launch is what
made the reference implementation cost ~6 µs more per launch. Here an event is created only
when a device's pool is empty; kprof gives every token back (``release_timestamp``) once it
has read its times, so in a steady state no event is created at all.

The pool knows nothing of CuPy: it is handed a function that creates an event on a given
device, so tests can drive it with fake events.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["DevicePool", "EventPool", "PoolStats", "Stamp"]


@dataclass(frozen=True)
class PoolStats:
    """Counts of one pool (or of all of them): what tests check "no event per launch" with."""

    created: int  #: events ever created
    in_use: int  #: handed out and not given back yet
    free: int  #: waiting in the pool for reuse

    def __add__(self, other: PoolStats) -> PoolStats:
        return PoolStats(
            self.created + other.created, self.in_use + other.in_use, self.free + other.free
        )


class Stamp:
    """One pooled timing event, and the token kprof holds for it.

    ``ptr`` is the ``cudaEvent_t`` handle, which is all ``cupy.cuda.get_elapsed_time`` reads,
    so a stamp can be passed to it directly. ``event`` owns the handle (CuPy destroys it when
    the ``Event`` object is collected).
    """

    __slots__ = ("device", "event", "ptr")

    def __init__(self, device: int, event: Any) -> None:
        self.device = device
        self.event = event
        self.ptr: int = event.ptr

    def __repr__(self) -> str:
        return f"<kprof_cuda.Stamp event 0x{self.ptr:x} on device {self.device}>"


class DevicePool:
    """The free events of one device. ``take``/``give`` are thread-safe without a lock
    (``list.pop``/``list.append`` are atomic); only creating an event takes one."""

    __slots__ = ("_create", "_lock", "created", "destroyed", "device", "free")

    def __init__(self, device: int, create: Callable[[int], Any]) -> None:
        self.device = device
        self._create = create
        self._lock = threading.Lock()
        self.free: list[Stamp] = []
        self.created = 0
        self.destroyed = 0

    def take(self) -> Stamp:
        """A free event of this device, created only if none is free."""
        try:
            return self.free.pop()
        except IndexError:
            return self._new()

    def _new(self) -> Stamp:
        with self._lock:
            stamp = Stamp(self.device, self._create(self.device))
            self.created += 1
        return stamp

    def give(self, stamp: Stamp) -> None:
        """Put an event back for reuse (recording it again later overwrites its state)."""
        self.free.append(stamp)

    def trim(self, keep: int) -> int:
        """Destroy free events beyond ``keep`` (after a profile that had a huge backlog)."""
        extra = len(self.free) - max(keep, 0)
        if extra <= 0:
            return 0
        del self.free[:extra]  # CuPy destroys each event when its object is collected
        dropped = extra
        with self._lock:
            self.destroyed += dropped
        return dropped

    def stats(self) -> PoolStats:
        free = len(self.free)
        return PoolStats(self.created, self.created - self.destroyed - free, free)


class EventPool:
    """One :class:`DevicePool` per device: an event belongs to the device it was created on,
    and can only be recorded on that device's streams."""

    def __init__(self, create: Callable[[int], Any]) -> None:
        self._create = create
        self._lock = threading.Lock()
        self.devices: dict[int, DevicePool] = {}

    def get(self, device: int) -> DevicePool:
        pool = self.devices.get(device)
        if pool is None:
            with self._lock:
                pool = self.devices.setdefault(device, DevicePool(device, self._create))
        return pool

    def take(self, device: int) -> Stamp:
        return self.get(device).take()

    def give(self, stamp: Stamp) -> None:
        self.devices[stamp.device].give(stamp)

    def trim(self, keep: int) -> int:
        return sum(p.trim(keep) for p in list(self.devices.values()))

    def stats(self, device: int | None = None) -> PoolStats:
        """Counts for one device, or summed over every device when ``device`` is None."""
        if device is not None:
            pool = self.devices.get(device)
            return pool.stats() if pool is not None else PoolStats(0, 0, 0)
        total = PoolStats(0, 0, 0)
        for p in list(self.devices.values()):
            total = total + p.stats()
        return total
