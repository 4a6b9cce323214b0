"""The checks, one method each of :class:`Conformance`; each raises ``ConformanceError`` naming
the hook and the rule, or ``Skipped``."""

from __future__ import annotations

import threading
import warnings

from kprof_core.conformance.checks_tokens import TokenChecks
from kprof_core.conformance.driver import is_int
from kprof_core.conformance.rules import ClockReport, Skipped, fail
from kprof_core.conformance.watch import is_module, is_patch, plugin_module, snapshot
from kprof_core.host.backend import Alignment, BackendInfo, QueueInfo
from kprof_core.profiler import capture_installed, profile
from kprof_core.recording.recorder import now


class Conformance(TokenChecks):
    """The checks, one method each; each raises ``ConformanceError`` or ``Skipped`` (the token
    checks are ``TokenChecks``', the helpers ``Driver``'s)."""

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
                    "returns a kprof.plugin.BackendInfo or None",
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

    def check_queue_info(self) -> str:
        self.require_available()
        answers: list[tuple[str, QueueInfo]] = []

        def ask(when: str) -> None:
            q = self._current()
            info = self._call("queue_info", q)
            if not isinstance(info, QueueInfo):
                raise fail(
                    "queue_info",
                    "returns a kprof.plugin.QueueInfo",
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

    def check_launch_configs(self) -> str:
        """With ``launch_config`` implemented, the workload's kernels carry launch
        configurations (``rec.launch(..., config=...)``), each made text without failing;
        without it there is nothing to check (configurations are optional)."""
        self.require_available()
        if "launch_config" not in self.b.implemented:
            return "launch_config is not implemented: launches carry no configuration to check"
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            p = self._profile(1, ranges=False)
        said = [str(w.message) for w in caught if "launch_config" in str(w.message)]
        if said:
            raise fail("launch_config", "makes every configuration its capture hands text", said[0])
        kernels = [k for k in p.kernels if k.kind == "kernel"]
        if kernels and not any(k.config for k in kernels):
            raise fail(
                "install_capture",
                "hands each kernel's launch configuration (rec.launch(..., config=...))",
                f"none of the {len(kernels)} kernels of a step has one, though the plugin "
                f"implements launch_config",
            )
        bad = [c for c in p.configs if not c.strip()]
        if bad:
            raise fail("launch_config", "returns a text that says something", f"it gave {bad[0]!r}")
        return f"launch configurations: {', '.join(p.configs)}"

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
        patched = [k for k in installed if k in before and is_patch(before[k][0], installed[k][0])]
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
                        "returns a kprof.plugin.Alignment or None",
                        f"it raised {type(exc).__name__}: {exc}",
                    ) from exc
            finally:
                self._release(tok)
        if a is not None and (
            not isinstance(a, Alignment)
            or not is_int(a.host_ns)
            or not is_int(a.error_ns)
            or a.error_ns < 0
        ):
            raise fail(
                "align_clock",
                "returns a kprof.plugin.Alignment or None",
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

    def check_memory(self) -> str:
        """``memory_install`` answers True, False or None; with an author's ``allocate``, an
        allocation and its free in a profile are one event each (a str device, the size),
        none outside it; ``memory_remove`` restores the very same objects."""
        self.require_available()
        if not self.b.has_memory:  # the defaults: nothing installed, nothing to break
            return "no memory hooks: the backend reports no device memory"
        if capture_installed():
            raise Skipped("a profile is active: memory tracking cannot be installed alone")
        own = ("kprof", "kprof_core", *(self.s.own_modules or plugin_module(self.b.plugin)))
        before = snapshot(own)
        self._call("install_capture")
        try:
            on = self._call("memory_install")
            if on is not None and not isinstance(on, bool):
                raise fail(
                    "memory_install", "returns True, False or None", f"it returned {on!r:.60}"
                )
            if on:
                self._call("memory_remove")
        finally:
            self._call("remove_capture")
        after = snapshot(own)
        wrong = sorted(
            v[1] for k, v in before.items() if is_patch(v[0], after[k][0] if k in after else None)
        )
        if wrong:
            raise fail("memory_remove", "restores the very same objects", ", ".join(wrong))
        if not on:
            raise Skipped(f"memory_install returned {on}: the backend reports no memory here")
        if self.s.allocate is None:
            return "memory_install: True; no allocate() given, so no allocation was checked"
        nbytes, free = self.s.allocate()  # outside every profile: nothing recorded
        free()
        with profile(backends=[self.b.name]) as p:
            nbytes, free = self.s.allocate()
            free()
        self._drain()
        events = [(e.kind, e.nbytes, type(e.device)) for e in p.memory.events]
        if events != [("alloc", nbytes, str), ("free", nbytes, str)]:
            raise fail(
                "memory_install",
                "an allocation and its free are one event each, on a str device, with the size",
                f"one allocation of {nbytes} bytes and its free gave {events}",
            )
        return f"one allocation of {nbytes} bytes and its free: two events, as reported"


def _off(t: int, lo: int, hi: int) -> str:
    return f"{lo - t} ns too early" if t < lo else f"{t - hi} ns too late"
