"""The 'vendor library' of the test backend: a device whose work runs on host worker threads.

Each Queue has a worker thread that runs its commands in order: a kernel sleeps (or spins) for
its requested duration; a marker is stamped with the host clock (time.perf_counter_ns) when
the worker reaches it. So markers complete later than they are recorded, as on a real device.

With ``KPROF_TESTDEV_CLOCK=simulated`` (read when a queue is made) a queue's markers are stamped
on a simulated device clock instead, which advances by exactly each kernel's duration: device
times are then the same on a loaded machine as on an idle one (a 50 µs kernel measured 11 to
19 ms of wall time at a load average of 11, reordering tests that compare device times). The
kernels still take their time on the host, so completion stays real.
"""

from __future__ import annotations

import itertools
import os
import queue as _queue
import threading
import time
from typing import Any

_counter = itertools.count(1)
_local = threading.local()
stats = {"markers_created": 0, "launches": 0}
_stats_lock = threading.Lock()


class Marker:
    """A device timestamp: ``time_ns`` is set when the queue's worker reaches it."""

    __slots__ = ("_done", "time_ns")

    def __init__(self) -> None:
        with _stats_lock:
            stats["markers_created"] += 1
        self.time_ns = 0
        self._done = threading.Event()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def reset(self) -> None:
        self.time_ns = 0
        self._done.clear()

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)


class Queue:
    """An in-order queue with its own worker thread."""

    def __init__(self, name: str | None = None) -> None:
        self.index = next(_counter)
        self.name = name or f"q{self.index}"
        self.markers_recorded = 0  # timestamps put on this queue (scope tests count them)
        self._commands: _queue.SimpleQueue[Any] = _queue.SimpleQueue()
        self._worker = threading.Thread(target=self._run, name=f"testdev-{self.name}", daemon=True)
        self._worker.start()
        self.hang = threading.Event()  # set: kernels named "hang" block until released
        self.hang.set()
        # The simulated device clock (None: markers read the host clock when reached).
        self._clock: int | None = (
            time.perf_counter_ns() if os.environ.get("KPROF_TESTDEV_CLOCK") == "simulated" else None
        )

    def _run(self) -> None:
        while True:
            cmd = self._commands.get()
            if cmd is None:
                return
            kind, arg = cmd
            if kind == "kernel":
                name, duration_ns = arg
                if name == "hang":
                    self.hang.wait()
                # Sleep, not spin: sleeping releases the GIL, so the host keeps launching.
                if duration_ns:
                    time.sleep(duration_ns / 1e9)
                if self._clock is not None:
                    self._clock += duration_ns
            elif kind == "marker":
                arg.time_ns = time.perf_counter_ns() if self._clock is None else self._clock
                arg._done.set()
            elif kind == "event":
                arg.set()

    # -- the library's API -----------------------------------------------------------------

    def launch(
        self,
        name: str,
        duration_us: float = 0.0,
        grid: tuple[int, ...] | None = None,
        block: tuple[int, ...] | None = None,
    ) -> None:
        """Enqueue a kernel that runs for ``duration_us`` microseconds on the device (``grid``
        and ``block``: its launch configuration, which the device does not use)."""
        with _stats_lock:
            stats["launches"] += 1
        self._commands.put(("kernel", (name, int(duration_us * 1000))))

    def record(self, marker: Marker) -> Marker:
        """Enqueue a timestamp."""
        self.markers_recorded += 1
        self._commands.put(("marker", marker))
        return marker

    def finish(self) -> None:
        """Block until every command enqueued so far has run."""
        ev = threading.Event()
        self._commands.put(("event", ev))
        ev.wait()

    def close(self) -> None:
        self._commands.put(None)

    # -- the current queue of the calling thread ---------------------------------------------

    def __enter__(self) -> Queue:
        stack = _local.__dict__.setdefault("stack", [])
        stack.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _local.stack.pop()


def current() -> Queue | None:
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else None


class PlainQueue(Queue):
    """A queue of a second 'library' whose plugin has no timestamps (for the host fallback).

    It has its own ``launch`` so that patching ``Queue.launch`` does not reach it.
    """

    def launch(
        self,
        name: str,
        duration_us: float = 0.0,
        grid: tuple[int, ...] | None = None,
        block: tuple[int, ...] | None = None,
    ) -> None:
        with _stats_lock:
            stats["launches"] += 1
        self._commands.put(("kernel", (name, int(duration_us * 1000))))


# -- device memory: allocations at distinct addresses, freed explicitly --------------------------

_addresses = itertools.count(0x10000, 0x1000)


class Allocation:
    """``nbytes`` of device memory at ``address``, until ``free()``."""

    __slots__ = ("address", "nbytes")

    def __init__(self, nbytes: int, address: int) -> None:
        self.nbytes = nbytes
        self.address = address

    def free(self) -> None:
        pass


def alloc(nbytes: int, address: int | None = None) -> Allocation:
    """Allocate ``nbytes`` (at ``address``, to reuse one, else at a new one)."""
    return Allocation(nbytes, next(_addresses) if address is None else address)
