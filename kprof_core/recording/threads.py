"""Who launched: a small int key per thread (and the asyncio task's name when one runs).

Threads are keyed by a number given on a thread's first kprof call and kept in a
thread-local, so that two threads never share a key even when the second reuses the first's
ident, and the thread's name is known even if it has ended by the time its work is harvested.
A plain int, not an object: pending entries then hold only objects the garbage collector
does not track, and a million of them cost no collection time (see ``Recorder.launch``).
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from asyncio import current_task as _current_task
from collections.abc import Callable
from typing import Any

# A C function: cheap on the launch path. Bound here (not imported under another name) so that
# the recorder can import it from this module.
_running_loop = asyncio._get_running_loop

_thread_keys = itertools.count(1)
#: key -> (ident, name) of every thread that made a kprof call.
thread_names: dict[int, tuple[int, str]] = {}
_tls = threading.local()


#: Keys of threads that ended (see _Reaper); forgotten by ``forget_ended``.
_ended: list[int] = []


class _Reaper:
    """Kept in the thread-local: dropped when its thread ends, which notes the key."""

    __slots__ = ("key",)

    def __init__(self, key: int) -> None:
        self.key = key

    def __del__(self) -> None:
        try:
            _ended.append(self.key)  # atomic; runs as the thread's state is cleared
        except Exception:  # interpreter shutdown: nothing to forget any more
            pass


def _new_thread_key() -> int:
    t = threading.current_thread()
    key = next(_thread_keys)
    thread_names[key] = (t.ident or 0, t.name)
    _tls.key = key
    _tls.reaper = _Reaper(key)
    return key


def forget_ended() -> None:
    """Forget the names of threads that ended. Only when no profile is being recorded: a
    pending entry of a thread that ended is named from ``thread_names`` at its harvest.
    (Each thread ever seen cost ~110 bytes, kept for the life of the process.)"""
    while _ended:
        thread_names.pop(_ended.pop(), None)


def thread_key() -> int | None:
    """The calling thread's key, or None if it has made no kprof call yet."""
    return getattr(_tls, "key", None)


def who() -> Any:
    """The launching thread's key, with its asyncio task's name when a task is running."""
    try:
        key = _tls.key
    except AttributeError:
        key = _new_thread_key()
    if _running_loop() is not None:
        task = _current_task()
        if task is not None:
            return (key, task.get_name())
    return key


#: Per thread: how many ``OwnedLock``s it holds (or is taking), in ``n``.
_held = threading.local()
#: Thread ident -> what that thread calls as it lets go of its last ``OwnedLock``.
_when_free: dict[int, Callable[[], None]] = {}


def holding() -> bool:
    """Whether the calling thread holds (or is taking) any ``OwnedLock``: kprof's own code
    that a signal handler must not re-enter (capture install or removal, a harvest, an end)."""
    return getattr(_held, "n", 0) > 0


def when_free(fn: Callable[[], None]) -> None:
    """Have the calling thread call ``fn`` as it releases its last ``OwnedLock`` (a signal
    handler that found one held defers its work to then); replaces an earlier ``fn``."""
    _when_free[threading.get_ident()] = fn


class OwnedLock:
    """A lock that tells whether the calling thread holds it (or is taking it).

    A Python signal handler runs on the thread the signal interrupted, between two bytecodes
    of whatever it was doing, kprof's own code included: a handler that blocks on a lock that
    thread holds waits forever. Code that may run in a handler (``kprof.mark``, a launch, a
    profile's entry or exit) asks ``held_here()`` first and defers or skips its work instead.
    The mark is per thread and set before the lock is taken and cleared after it is released,
    so that a signal between the two steps finds it set (deferring is always safe).
    ``holding()`` asks the same of all of them at once, and ``when_free`` has the thread act
    once it lets go of the last.
    """

    __slots__ = ("_here", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._here = threading.local()

    def acquire(self, blocking: bool = True) -> bool:
        _held.n = getattr(_held, "n", 0) + 1  # first: a handler between the two defers
        self._here.held = True
        try:
            got = self._lock.acquire(blocking)
        except BaseException:
            self._let_go()
            raise
        if not got:
            self._let_go()
        return got

    def release(self) -> None:
        self._lock.release()
        self._let_go()

    def _let_go(self) -> None:
        self._here.held = False
        n = _held.n = _held.n - 1
        if not n and _when_free:
            fn = _when_free.pop(threading.get_ident(), None)
            if fn is not None:
                fn()

    def held_here(self) -> bool:
        """Whether the calling thread holds the lock (or is between taking and having it)."""
        return getattr(self._here, "held", False)

    def locked(self) -> bool:
        return self._lock.locked()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
