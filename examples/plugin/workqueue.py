"""workqueue: a tiny "vendor library" for the example kprof plugin (not part of kprof).

A ``Queue`` runs the functions launched on it in order, on its own worker thread: the device.
``Queue.write()`` and ``Queue.read()`` copy between the host and a ``Buffer`` (device memory)
in the same order. ``Queue.timestamp()`` enqueues a timestamp that the worker stamps, when it
reaches it, with the device's own clock (``device_clock()``, not the host's
``perf_counter_ns``). ``with queue:`` makes a queue the calling thread's current one.
"""

from __future__ import annotations

import queue as _queue
import threading
import time
from collections.abc import Callable
from typing import Any

__version__ = "1.0"
_local = threading.local()


class Timestamp:
    """Stamped with the device clock when the queue's worker reaches it."""

    def __init__(self) -> None:
        self.device_ns = 0
        self.reached = threading.Event()


class Buffer:
    """Device memory: ``nbytes`` bytes that only the device (the queue's worker) touches."""

    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes
        self.data = bytearray(nbytes)


class Queue:
    def __init__(self, name: str = "queue") -> None:
        self.name = name
        self._commands: _queue.SimpleQueue[Any] = _queue.SimpleQueue()
        threading.Thread(target=self._run, name=f"workqueue {name}", daemon=True).start()

    def _run(self) -> None:
        while True:
            fn, args = self._commands.get()
            fn(*args)

    def launch(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the device, after everything launched before it."""
        self._commands.put((fn, args))

    def write(self, buffer: Buffer, data: bytes) -> None:
        """Copy ``data`` from the host into ``buffer``, after everything launched before it."""
        self._commands.put((_copy, (buffer.data, data)))

    def read(self, buffer: Buffer, out: bytearray) -> None:
        """Copy ``buffer`` into ``out`` on the host, after everything launched before it."""
        self._commands.put((_copy, (out, buffer.data)))

    def timestamp(self, ts: Timestamp) -> Timestamp:
        """Enqueue ``ts``: it is stamped when the device reaches it."""
        ts.reached.clear()
        self._commands.put((_stamp, (ts,)))
        return ts

    def wait_for(self, event: threading.Event) -> None:
        """Hold the queue until ``event`` is set."""
        self._commands.put((event.wait, ()))

    def finish(self) -> None:
        """Block until everything launched so far has run."""
        done = threading.Event()
        self._commands.put((done.set, ()))
        done.wait()

    def __enter__(self) -> Queue:
        _local.__dict__.setdefault("stack", []).append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _local.stack.pop()


def device_clock() -> int:
    """The device's clock now, in nanoseconds: the one timestamps are stamped with."""
    return time.monotonic_ns()


def _stamp(ts: Timestamp) -> None:
    ts.device_ns = device_clock()
    ts.reached.set()


def _copy(dst: bytearray, src: bytes | bytearray) -> None:
    dst[:] = src


def current() -> Queue | None:
    """The calling thread's current queue (the innermost ``with queue:``), or None."""
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else None
