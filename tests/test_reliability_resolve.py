"""The resolve timeout bounds the end of a profile whatever the backend: one that cannot tell
whether work is done (``timestamp_done`` missing or returning None, then ``elapsed_time``
waits itself), one whose ``timestamp_done`` is slow. Past the deadline nothing more is asked of
the device; what is pending is unresolved with the reason, and nothing is lost."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from kprof_testbackend.instant import InstantClock, InstantQueue

import kprof

pytestmark = pytest.mark.usefixtures("testbackends")


class CannotTell(InstantClock):
    """The documented default: no answer from timestamp_done; elapsed_time waits for the
    device, which has stalled (until ``release`` is set)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.reads = 0

    @kprof.hookimpl
    def timestamp_done(self, backend: kprof.Backend, token: Any) -> Any:
        return None

    @kprof.hookimpl
    def elapsed_time(self, backend: kprof.Backend, start: Any, stop: Any) -> Any:
        self.reads += 1
        self.release.wait()
        return stop.t - start.t


class SlowDone(InstantClock):
    """A working device whose every question takes 50 ms."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = 0

    @kprof.hookimpl
    def timestamp_done(self, backend: kprof.Backend, token: Any) -> Any:
        self.asked += 1
        time.sleep(0.05)
        return True


def ranges_on(plugin: InstantClock, n: int, timeout: float) -> tuple[kprof.Profile, float]:
    kprof.register_backend(plugin, "odd")
    prof = kprof.profile(backends=["odd"], timeout=timeout)
    with prof as p, plugin.using(InstantQueue("q")):
        for _ in range(n):
            with kprof.range("r"):
                pass
        t0 = time.monotonic()
    return p, time.monotonic() - t0


def test_a_stalled_device_that_cannot_tell_is_bounded() -> None:
    plugin = CannotTell()
    try:
        p, took = ranges_on(plugin, 20, timeout=0.5)
    finally:
        plugin.release.set()
    assert took < 5  # 0.5 s, and a few multiples for a loaded machine (it hung forever)
    assert len(p.device_ranges) == 20 and len(p.ranges) == 20  # nothing lost
    assert all(r.error for r in p.device_ranges)
    assert "elapsed_time did not return within 0.5 s" in p.device_ranges[0].error
    assert "the device did not reach the timestamp within 0.5 s" in p.device_ranges[1].error
    assert plugin.reads == 1  # past the deadline, nothing more was asked


def test_a_backend_that_cannot_tell_still_resolves_when_the_device_answers() -> None:
    plugin = CannotTell()
    plugin.release.set()
    p, _took = ranges_on(plugin, 20, timeout=30)
    assert len(p.device_ranges) == 20 and not p.unresolved
    assert not plugin.live  # every token given back


def test_slow_questions_stop_at_the_deadline() -> None:
    plugin = SlowDone()
    p, took = ranges_on(plugin, 100, timeout=1)
    assert took < 4  # was 11 s: every pending entry still cost a 50 ms question
    resolved = [r for r in p.device_ranges if r.error is None]
    unresolved = [r for r in p.device_ranges if r.error]
    assert len(resolved) + len(unresolved) == 100 and unresolved
    assert all("within 1 s" in r.error for r in unresolved)
    assert plugin.asked < 60  # about 1 s of 50 ms questions, then none
    assert not plugin.live
