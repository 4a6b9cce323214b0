"""The checks, one method each of :class:`Conformance`; each raises ``ConformanceError`` naming
the hook and the rule, or ``Skipped``."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from kprof_core.conformance.rules import ClockReport, Skipped, Subject, fail
from kprof_core.conformance.watch import Ledger, Once, is_module, plugin_module, snapshot
from kprof_core.host.backend import Alignment, Backend, BackendInfo, QueueInfo
from kprof_core.profiler import capture_installed, profile
from kprof_core.recording.annotations import kernel
from kprof_core.recording.annotations import range as kprof_range
from kprof_core.recording.recorder import Recorder, now


def _is_int(x: Any) -> bool:
    return not isinstance(x, bool) and hasattr(x, "__index__")


class Conformance:
    """The checks, one method each; each raises ``ConformanceError`` or ``Skipped``."""

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

    # -- helpers ------------------------------------------------------------------------------

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
            if not _is_int(et):
                raise fail(
                    "elapsed_time",
                    "returns an int",
                    f"it returned {type(et).__name__} {et!r} (nanoseconds, as an int)",
                )
            et = int(et)
        if self.b.has_device_times:
            pair = self._call("device_times", start, stop)
            if type(pair) is not tuple or len(pair) != 2 or not all(_is_int(x) for x in pair):
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

    # -- describe_backend ----------------------------------------------------------------------

    def check_describe_backend(self) -> str:
        for _ in range(2):
            try:
                info = self._call("describe_backend")
            except Exception as exc:
                raise fail(
                    "describe_backend",
                    "never raises",
                    f"it raised {type(exc).__name__}: {exc} (report a missing library "
                    f"or device in the status instead)",
                ) from exc
            if info is not None and not isinstance(info, BackendInfo):
                raise fail(
                    "describe_backend",
                    "returns a kprof.BackendInfo or None",
                    f"it returned {type(info).__name__} {info!r}",
                )
        if info is not None and info.timestamps and not self.b.has_timestamps:
            raise fail(
                "describe_backend",
                "claims timestamps only with the hooks for them",
                "timestamps=True, but the plugin does not implement record_timestamp "
                "and elapsed_time or device_times",
            )
        return f"describe_backend: {info!r}"

    # -- queues ------------------------------------------------------------------------------

    def check_queue_info(self) -> str:
        self.require_available()
        answers: list[tuple[str, QueueInfo]] = []

        def ask(when: str) -> None:
            q = self._current()
            info = self._call("queue_info", q)
            if not isinstance(info, QueueInfo):
                raise fail(
                    "queue_info",
                    "returns a kprof.QueueInfo",
                    f"it returned {type(info).__name__} {info!r}",
                )
            try:
                hash(info.key())
            except TypeError as exc:
                raise fail(
                    "queue_info",
                    "is stable for one queue",
                    f"its device_key {info.device_key!r} is not hashable",
                ) from exc
            answers.append((when, info))

        with self.s.queue_context():
            ask("first")
            ask("again")
            self.workload()
            ask("after a workload step")
        self._drain()
        for when, info in answers[1:]:
            if info != answers[0][1]:
                raise fail(
                    "queue_info",
                    "is stable for one queue",
                    f"{answers[0][1]!r} at first, {info!r} {when}",
                )
        return f"queue_info: {answers[0][1]!r}"

    # -- timestamps ------------------------------------------------------------------------------

    def check_tokens_read(self) -> str:
        """Three tokens in order around two workload steps: their times are ints, ordered,
        additive, and the two reading hooks agree."""
        self.require_timestamps()
        tol = self.s.tolerance_ns
        with self.s.queue_context():
            self._current()
            t1 = self._record()
            self.workload()
            t2 = self._record()
            self.workload()
            t3 = self._record()
            try:
                self._wait_done(t3)
                e12, d12 = self._read(t1, t2)
                e23, d23 = self._read(t2, t3)
                e13, d13 = self._read(t1, t3)
            finally:
                self._release(t1, t2, t3)
        if e12 is not None and e23 is not None and e13 is not None:
            for name, el in (("t1→t2", e12), ("t2→t3", e23), ("t1→t3", e13)):
                if el < 0:
                    raise fail(
                        "elapsed_time",
                        "is non-negative for ordered tokens on one queue",
                        f"{name} gave {el} ns",
                    )
            if abs(e12 + e23 - e13) > tol:
                raise fail(
                    "elapsed_time",
                    "adds up for ordered tokens on one queue",
                    f"t1→t2 {e12} ns + t2→t3 {e23} ns != t1→t3 {e13} ns (tolerance {tol} ns)",
                )
        if d12 is not None and d23 is not None and d13 is not None:
            for name, (b, e) in (("t1→t2", d12), ("t2→t3", d23), ("t1→t3", d13)):
                if e < b:
                    raise fail(
                        "device_times",
                        "begins before it ends for ordered tokens",
                        f"{name} gave begin {b} > end {e}",
                    )
            if d12[0] != d13[0] or d23[1] != d13[1]:
                raise fail(
                    "device_times",
                    "is consistent with elapsed_time",
                    f"one token gave two times: t1 began at {d12[0]} and {d13[0]}, "
                    f"t3 ended at {d23[1]} and {d13[1]}",
                )
            if e13 is not None:
                for name, et, (b, en) in (("t1→t2", e12, d12), ("t1→t3", e13, d13)):
                    if et is not None and abs((en - b) - et) > tol:
                        raise fail(
                            "device_times",
                            "is consistent with elapsed_time",
                            f"{name}: device_times gives {en - b} ns, elapsed_time "
                            f"{et} ns (tolerance {tol} ns)",
                        )
        return f"elapsed over two steps: {e13 if e13 is not None else d13} ns"

    def check_record_does_not_block(self) -> str:
        """With the queue held, ``record_timestamp`` returns and its token is not done; once
        the queue goes, the token completes."""
        self.require_timestamps()
        if self.s.stall is None:
            raise Skipped(
                "no stall(): give the kit a way to hold the queue to check that "
                "record_timestamp does not block"
            )
        with self.s.queue_context():
            self._current()
            release = Once(self.s.stall())
            watchdog = threading.Timer(self.s.blocking_timeout_s, release)
            watchdog.daemon = True
            watchdog.start()
            try:
                tok = self._record()
            finally:
                watchdog.cancel()
            try:
                if release.called_by_watchdog(watchdog):
                    raise fail(
                        "record_timestamp",
                        "does not block",
                        f"it had not returned after {self.s.blocking_timeout_s:g} s "
                        f"with the queue held (it returned once the queue was let go): "
                        f"the timestamp must be taken when the device reaches it",
                    )
                done = self._done(tok)
                if done:
                    raise fail(
                        "timestamp_done",
                        "is not done before the device reached it",
                        "it said True for a token recorded behind work that cannot "
                        "run yet (the queue was held)",
                    )
            finally:
                release()
            try:
                self._wait_done(tok)
            finally:
                self._release(tok)
        return "record_timestamp returned with the queue held; the token completed after"

    # -- tokens through a profile ---------------------------------------------------------------

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
        ) -> None:
            if backend is b:
                ledger.launches.append((name, threading.current_thread().name))
                for tok in (start, stop) if stop is not start else (start,):
                    if tok is not None:
                        ledger.handed(tok, "install_capture (a captured launch)")
            orig_launch(rec, backend, kind, name, queue, start_ns, end_ns, start, stop, nbytes)

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

    def check_tokens_released_once(self) -> str:
        self.require_available()
        with self._ledger() as ledger:
            self._profile(self.s.steps)
        self._drain()
        ledger.raise_violations()
        ledger.check_all_released()
        return f"{ledger.count} tokens, each released once"

    def check_tokens_not_reused_early(self) -> str:
        """Two profiles on a held queue: the first gives up its tokens (its timeout passes);
        the second must not get any of them back before the device reached them."""
        self.require_timestamps()
        if self.s.stall is None:
            raise Skipped(
                "no stall(): give the kit a way to hold the queue to check that "
                "tokens given up are not reused before the device reached them"
            )
        with self._ledger() as ledger:
            with self.s.queue_context():
                release = Once(self.s.stall())
            # A plugin that waits for the device would wait forever on a held queue.
            watchdog = threading.Timer(self.s.blocking_timeout_s + 4 * self.s.give_up_s, release)
            watchdog.daemon = True
            watchdog.start()
            try:
                for _ in range(2):
                    self._profile(2, timeout=self.s.give_up_s)
            finally:
                watchdog.cancel()
                release()
        self._drain()
        if release.called_by_watchdog(watchdog):
            raise fail(
                "record_timestamp",
                "does not block",
                "a profile on a held queue did not end until the queue was let go: "
                "record_timestamp or a capture wrapper waited for the device",
            )
        ledger.raise_violations()
        if (
            "timestamp_done" in self.b.implemented
        ):  # else reads abandoned at the timeout keep theirs
            ledger.check_all_released()
        return f"{ledger.undone_releases} tokens released before the device reached them; none reused early"

    # -- capture ------------------------------------------------------------------------------

    def check_records_per_call(self) -> str:
        """N workload calls give exactly N times the records of one, device-timed; a step run
        outside the profile's context (a thread it did not propagate to) records nothing."""
        self.require_available()
        per = self.s.records_per_step
        if per is None:
            per = len(self._profile(1, ranges=False).kernels)
            if per == 0:
                raise fail(
                    "install_capture",
                    "N workload calls give exactly N times the records of one",
                    "one workload step gave no record: the capture records nothing",
                )
        n = self.s.steps
        step = self._step()
        outside_error: list[BaseException] = []

        def outside() -> None:
            try:
                with self.s.queue_context():
                    step()
            except BaseException as exc:  # reported below, in the test's thread
                outside_error.append(exc)

        with profile(backends=[self.b.name]) as p, self.s.queue_context():
            for _ in range(n):
                step()
            t = threading.Thread(target=outside, name="kprof.testing outside")
            t.start()
            t.join()
        self._still_in_use()
        self._drain()
        if outside_error:
            raise outside_error[0]
        ks = p.kernels
        mine = [k for k in ks if k.thread != "kprof.testing outside"]
        if len(ks) != len(mine):
            raise fail(
                "install_capture",
                "records nothing outside the profile's context",
                f"{len(ks) - len(mine)} records came from a thread the profile did not "
                f"propagate to (when capture.active() is None, call straight through)",
            )
        if len(ks) != n * per:
            raise fail(
                "install_capture",
                "N workload calls give exactly N times the records of one",
                f"{n} calls gave {len(ks)} records, expected {n * per} ({per} per call): "
                f"{sorted({k.name for k in ks})}",
            )
        if self.b.has_timestamps:
            bad = [k for k in ks if k.host_timed or k.error is not None or k.duration_ns < 0]
            if bad:
                k = bad[0]
                raise fail(
                    "install_capture",
                    "records are device-timed",
                    f"{len(bad)} of {len(ks)} records were not: {k.name!r} "
                    f"host_timed={k.host_timed}, error={k.error!r}, "
                    f"duration={k.duration_ns} ns (hand tokens to recorder.launch)",
                )
        return f"{n} calls, {len(ks)} records ({per} per call)"

    def check_capture_restores(self) -> str:
        self.require_available()
        if "install_capture" not in self.b.implemented:
            raise Skipped("the plugin has no automatic capture (no install_capture)")
        if capture_installed():
            raise Skipped("a profile is active: capture cannot be installed and removed alone")
        own = ("kprof", "kprof_core", *(self.s.own_modules or plugin_module(self.b.plugin)))
        before = snapshot(own)
        owners = {k[0] for k in before}
        self._call("install_capture")
        try:
            installed = snapshot(own)
            # Installed but outside any profile: the wrappers call straight through.
            with self.s.queue_context():
                self.workload()
            self._drain()
        finally:
            self._call("remove_capture")
        after = snapshot(own)
        patched = [k for k in installed if k in before and installed[k][0] is not before[k][0]]
        added = [
            k
            for k in installed
            if k not in before
            and k[0] in owners
            and not is_module(installed[k][0])
            and k[1] != "__warningregistry__"
        ]
        wrong = [before[k][1] for k in patched if k not in after or after[k][0] is not before[k][0]]
        wrong += [installed[k][1] for k in added if k in after]
        if wrong:
            raise fail(
                "remove_capture",
                "restores the very same objects",
                f"not as before install_capture: {', '.join(sorted(wrong))}",
            )
        names = sorted(before[k][1] for k in patched) + sorted(installed[k][1] for k in added)
        return f"patched and restored {len(names)}: {', '.join(names[:8])}" + (
            " ..." if len(names) > 8 else ""
        )

    # -- clocks ---------------------------------------------------------------------------------

    def check_clock_alignment(self) -> ClockReport:
        self.require_timestamps()
        with self.s.queue_context():
            self._current()
            h0 = now()
            tok = self._record()
            h1 = now()
            try:
                self._wait_done(tok)
                h2 = now()
                try:
                    a = self._call("align_clock", tok, (h0, h1))
                except Exception as exc:
                    raise fail(
                        "align_clock",
                        "returns a kprof.Alignment or None",
                        f"it raised {type(exc).__name__}: {exc}",
                    ) from exc
            finally:
                self._release(tok)
        if a is not None and (
            not isinstance(a, Alignment)
            or not _is_int(a.host_ns)
            or not _is_int(a.error_ns)
            or a.error_ns < 0
        ):
            raise fail(
                "align_clock",
                "returns a kprof.Alignment or None",
                f"it returned {a!r} (host_ns and a non-negative error_ns as ints)",
            )
        if a is not None and not h0 - a.error_ns <= a.host_ns <= h2 + a.error_ns:
            raise fail(
                "align_clock",
                "places the token where the device reached it, within its error bound",
                f"it put the token at {a.host_ns} ns ± {a.error_ns}, but it was enqueued "
                f"at {h0} and seen done at {h2} (host clock, time.perf_counter_ns): "
                f"{_off(a.host_ns, h0, h2)}",
            )
        p = self._profile(2, ranges=True)
        self._drain()
        report = ClockReport(
            a.method if a else None,
            a.error_ns if a else None,
            [f"{c.device}: {c.describe()}" for c in p.clocks.values()],
        )
        for c in p.clocks.values():
            if a is not None and c.error_ns is not None and c.shift_ns > c.error_ns:
                raise fail(
                    "align_clock",
                    "needs no shift of the device in a profile beyond its error bound",
                    f"{c.device}: work would have started {c.shift_ns} ns before its "
                    f"launch, more than the bound of {c.error_ns} ns",
                )
        return report


def _off(t: int, lo: int, hi: int) -> str:
    return f"{lo - t} ns too early" if t < lo else f"{t - hi} ns too late"
