"""A backend whose timestamps are complete the moment they are taken, read from the host clock.

Exact and deterministic, for tests of placement and of misbehaving hooks (subclass it and
override one hook, with ``@kprof.plugin.hookimpl``). Not an entry point: tests register an instance
with ``kprof.register_backend(InstantClock(), "instant")``; ``with backend_obj.using(q):``
makes ``q`` the calling thread's current queue.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

from kprof import plugin as kp


class Token:
    __slots__ = ("t",)

    def __init__(self, t: int) -> None:
        self.t = t


class InstantQueue:
    def __init__(self, name: str) -> None:
        self.name = name


class InstantClock:
    def __init__(self) -> None:
        self._local = threading.local()
        self.live: set[int] = set()  # ids of tokens handed out and not released
        self.released = 0

    @contextlib.contextmanager
    def using(self, queue: InstantQueue) -> Iterator[InstantQueue]:
        saved = getattr(self._local, "queue", None)
        self._local.queue = queue
        try:
            yield queue
        finally:
            self._local.queue = saved

    @kp.hookimpl
    def describe_backend(self, backend: kp.Backend) -> Any:
        return kp.BackendInfo(library="instant", library_version="1", devices=("instant 0",))

    @kp.hookimpl
    def current_queue(self, backend: kp.Backend) -> Any:
        return getattr(self._local, "queue", None)

    @kp.hookimpl
    def record_timestamp(self, backend: kp.Backend) -> Any:
        tok = Token(time.perf_counter_ns())
        self.live.add(id(tok))
        return tok

    @kp.hookimpl
    def timestamp_done(self, backend: kp.Backend, token: Token) -> Any:
        return True

    @kp.hookimpl
    def elapsed_time(self, backend: kp.Backend, start: Token, stop: Token) -> Any:
        return stop.t - start.t

    @kp.hookimpl
    def release_timestamp(self, backend: kp.Backend, token: Token) -> None:
        self.live.discard(id(token))
        self.released += 1

    @kp.hookimpl
    def queue_info(self, backend: kp.Backend, queue: InstantQueue) -> Any:
        return kp.QueueInfo(device="instant 0", label=queue.name)

    @kp.hookimpl
    def align_clock(self, backend: kp.Backend, token: Token, launch_window: tuple[int, int]) -> Any:
        return kp.Alignment(host_ns=token.t, error_ns=0, method="host clock (instant)")
