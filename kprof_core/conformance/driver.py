"""The driver of the conformance checks: a plugin's hooks called as kprof calls them, the
workload, and the waits and ledgers the checks share (``checks_tokens.py``, ``checks.py``)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from kprof_core.conformance.rules import Skipped, Subject, fail
from kprof_core.conformance.watch import Ledger
from kprof_core.host.backend import Backend
from kprof_core.profiler import profile
from kprof_core.recording.annotations import kernel
from kprof_core.recording.annotations import range as kprof_range
from kprof_core.recording.recorder import Recorder


def is_int(x: Any) -> bool:
    """An integer of any integer type (numpy.int64 too), not a bool."""
    return not isinstance(x, bool) and hasattr(x, "__index__")


class Driver:
    """What every check uses: the subject, its backend, the workload and the helpers."""

    def __init__(self, subject: Subject) -> None:
        self.s = subject
        self.b = subject.backend
        self._workload: Callable[[], Any] | None = None

    @property
    def workload(self) -> Callable[[], Any]:
        """The author's workload step, made on first use (after the availability check)."""
        if self._workload is None:
            self._workload = self.s.make_workload()
        return self._workload

    def _call(self, hook: str, *args: Any) -> Any:
        return getattr(self.b, hook)(self.b, *args)

    def require_available(self) -> None:
        if self.b.broken is not None:
            raise Skipped(
                f"backend {self.b.name!r} was disabled by an earlier failure: {self.b.broken}"
            )
        info = self.b.info(refresh=True)
        if info.status != "available":
            why = f"status {info.status!r}" + (f" ({info.detail})" if info.detail else "")
            if self.s.require_available:
                raise fail(
                    "describe_backend",
                    "is available",
                    f"{why}: the checks need the backend available here (set "
                    f"require_available = False to skip them instead)",
                )
            raise Skipped(f"backend {self.b.name!r} is not available: {why}")
        self.workload  # noqa: B018  (made here, never inside a profile)

    def require_timestamps(self) -> None:
        self.require_available()
        if not self.b.has_timestamps:
            raise Skipped(
                f"backend {self.b.name!r} has no device timestamps (record_timestamp "
                f"and elapsed_time or device_times): it is timed on the host"
            )

    def _current(self) -> Any:
        q = self._call("current_queue")
        if q is None:
            raise fail(
                "current_queue",
                "gives a queue inside queue_context()",
                "it returned None: make queue_context() make a queue current on the "
                "calling thread, as the plugin's users do",
            )
        return q

    def _record(self) -> Any:
        tok = self._call("record_timestamp")
        if tok is None:
            raise fail(
                "record_timestamp",
                "returns a token where there is a current queue",
                "it returned None although current_queue gave a queue: give "
                "queue_context() a queue that supports timestamps",
            )
        return tok

    def _done(self, tok: Any) -> bool | None:
        done = self._call("timestamp_done", tok)
        if done is not None and not isinstance(done, bool):
            raise fail(
                "timestamp_done",
                "returns True, False or None",
                f"it returned {type(done).__name__} {done!r}",
            )
        return done

    def _wait_done(self, tok: Any) -> None:
        """Until the device reached ``tok`` (by polling, or by a reading hook that waits)."""
        deadline = time.monotonic() + self.s.done_timeout_s
        while True:
            done = self._done(tok)
            if done is None:
                self._read(tok, tok)  # it cannot tell: the reading hooks wait themselves
                return
            if done:
                return
            if time.monotonic() > deadline:
                raise fail(
                    "timestamp_done",
                    "becomes True once the device reached the token",
                    f"still False after {self.s.done_timeout_s:g} s (is the queue "
                    f"flushed? a token must complete without anyone waiting on it)",
                )
            time.sleep(0.001)

    def _read(self, start: Any, stop: Any) -> tuple[int | None, tuple[int, int] | None]:
        """``elapsed_time`` and ``device_times`` of two tokens, each checked for its type."""
        et = dt = None
        if "elapsed_time" in self.b.implemented:
            et = self._call("elapsed_time", start, stop)
            if not is_int(et):
                raise fail(
                    "elapsed_time",
                    "returns an int",
                    f"it returned {type(et).__name__} {et!r} (nanoseconds, as an int)",
                )
            et = int(et)
        if self.b.has_device_times:
            pair = self._call("device_times", start, stop)
            if type(pair) is not tuple or len(pair) != 2 or not all(is_int(x) for x in pair):
                raise fail(
                    "device_times",
                    "returns a pair of ints",
                    f"it returned {pair!r}, expected (begin_ns, end_ns)",
                )
            dt = (int(pair[0]), int(pair[1]))
        return et, dt

    def _release(self, *tokens: Any) -> None:
        seen: set[int] = set()
        for tok in tokens:
            if id(tok) not in seen:
                seen.add(id(tok))
                self._call("release_timestamp", tok)

    def _drain(self) -> None:
        """Let the current queue finish (so one check's work does not run into the next)."""
        with self.s.queue_context():
            q = self._call("current_queue")
            if "synchronize" in self.b.implemented:
                self._call("synchronize", q)
            elif q is not None and self.b.has_timestamps:
                tok = self._call("record_timestamp")
                if tok is not None:
                    self._wait_done(tok)
                    self._release(tok)

    def _step(self) -> Callable[[], Any]:
        if "install_capture" in self.b.implemented:
            return self.workload
        return kernel(self.workload, name="kprof.testing step")

    @contextlib.contextmanager
    def _ledger(self) -> Iterator[Ledger]:
        """Watch every token handed to kprof (by record_timestamp or a capture) and released."""
        b = self.b
        ledger = Ledger(b, b.timestamp_done, self.s.rerecord_supersedes)
        orig_record, orig_release, orig_launch = (
            b.record_timestamp,
            b.release_timestamp,
            Recorder.launch,
        )

        def record(backend: Backend) -> Any:
            tok = orig_record(backend)
            if tok is not None:
                ledger.handed(tok, "record_timestamp")
            return tok

        def release(backend: Backend, tok: Any) -> None:
            ledger.released(tok)
            orig_release(backend, tok)

        def launch(
            rec: Recorder,
            backend: Backend,
            kind: int,
            name: str,
            queue: Any,
            start_ns: int,
            end_ns: int,
            start: Any = None,
            stop: Any = None,
            nbytes: int = -1,
            config: Any = None,
        ) -> None:
            if backend is b:
                ledger.launches.append((name, threading.current_thread().name))
                for tok in (start, stop) if stop is not start else (start,):
                    if tok is not None:
                        ledger.handed(tok, "install_capture (a captured launch)")
            orig_launch(
                rec, backend, kind, name, queue, start_ns, end_ns, start, stop, nbytes, config
            )

        b.record_timestamp, b.release_timestamp = record, release
        setattr(Recorder, "launch", launch)  # noqa: B010  (the checks watch every launch)
        try:
            yield ledger
        finally:
            b.record_timestamp, b.release_timestamp = orig_record, orig_release
            setattr(Recorder, "launch", orig_launch)  # noqa: B010

    def _profile(self, steps: int, timeout: float | None = None, ranges: bool = True) -> Any:
        step = self._step()
        with profile(backends=[self.b.name], timeout=timeout) as p, self.s.queue_context():
            for _ in range(steps):
                if ranges:
                    with kprof_range("kprof.testing range"):
                        step()
                else:
                    step()
        self._still_in_use()
        return p

    def _still_in_use(self) -> None:
        """After a profile: kprof disables a backend whose hook raised or returned a wrong
        type on the way (it warns once); that fails the check that saw it."""
        if self.b.broken is not None:
            raise fail(
                "any hook",
                "kprof never disables the backend",
                f"kprof stopped using it during a profile: {self.b.broken}",
            )
