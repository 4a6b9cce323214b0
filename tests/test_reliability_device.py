"""Device errors while resolving: a timestamp that never completes, ``elapsed_time`` raising.
The wait is bounded, records say why they have no time, the report still prints."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from fakeclock import FakeClock
from kprof_testbackend import device, plugin
from kprof_testbackend.instant import InstantClock, InstantQueue

import kprof
from kprof_core.recording.recorder import Recorder

pytestmark = pytest.mark.usefixtures("testbackends")


def hung_profile(q: device.Queue, clock: FakeClock, **kwargs: Any) -> tuple[kprof.Profile, float]:
    """A profile with a kernel that never completes; how long it waited, on ``clock``."""
    q.hang.clear()  # kernels named "hang" block the queue until q.hang is set
    t0 = clock.now
    with kprof.profile(**kwargs) as p, q:
        q.launch("before", 10)
        q.launch("hang")
        for _ in range(200):
            q.launch("after")
    waited = clock.now - t0
    q.hang.set()
    return p, waited


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_a_timestamp_that_never_completes(
    tdq: Any, monkeypatch: pytest.MonkeyPatch, how: str, fake_clock: FakeClock
) -> None:
    q = tdq()
    if how == "environment":
        monkeypatch.setenv("KPROF_RESOLVE_TIMEOUT", "0.2")
        p, waited = hung_profile(q, fake_clock)
    else:
        p, waited = hung_profile(q, fake_clock, timeout=0.2)
    # One bounded wait in all, not one per pending record (that would be 40 s here); the
    # last pause between polls may end past the deadline.
    assert 0.2 <= waited <= 0.2 + 0.005
    names = [(k.name, k.error is None) for k in p.kernels]
    assert names == [("before", True), ("hang", False)] + [("after", False)] * 200
    reason = p.kernels[1].error
    assert reason is not None and "did not reach the timestamp within 0.2 s" in reason
    assert "KPROF_RESOLVE_TIMEOUT" in reason
    text = str(p)
    assert "201 device records could not be resolved and are left out of the tables:" in text
    assert f"201 × {reason}" in text
    assert p.summary().device_row("before").calls == 1
    with pytest.raises(KeyError):
        p.summary().device_row("hang")
    assert not plugin.live  # given back, although the device never reached them


class ElapsedRaises(InstantClock):
    @kprof.plugin.hookimpl
    def elapsed_time(self, backend: kprof.plugin.Backend, start: Any, stop: Any) -> Any:
        raise RuntimeError("CL_OUT_OF_RESOURCES")


def test_elapsed_time_raising() -> None:
    clock = ElapsedRaises()
    kprof.register_backend(clock, "failing")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with kprof.profile(backends=["failing"]) as p, clock.using(InstantQueue("fq")):
            for _ in range(3):
                kprof.kernel(lambda: None, name="w")()
    [msg] = [str(w.message) for w in caught if "'failing'" in str(w.message)]
    assert "elapsed_time raised RuntimeError: CL_OUT_OF_RESOURCES" in msg
    errors = [k.error for k in p.kernels]
    assert len(errors) == 3 and all(e and "CL_OUT_OF_RESOURCES" in e for e in errors)
    assert "3 device records could not be resolved" in str(p)
    assert not clock.live


def test_a_hung_device_costs_one_timeout_under_back_pressure(
    tdq: Any, monkeypatch: pytest.MonkeyPatch, fake_clock: FakeClock
) -> None:
    """Issue 25 item 12: the first kernel never finishes and the program keeps launching.
    Back-pressure waited a whole timeout again every few thousand launches (1M launches
    under the default 60 s: about 2 hours); the README says a hung device costs one timeout.
    Once the device let a deadline pass, its pending work is unresolved at once, with the
    reason, and the end does not wait for it again either."""
    monkeypatch.setattr(Recorder, "harvest_every", 16)
    monkeypatch.setattr(Recorder, "max_pending", 64)
    q = tdq()
    q.hang.clear()
    try:
        t0 = fake_clock.now
        with kprof.profile(timeout=1) as p, q:
            q.launch("hang")
            for _ in range(600):
                q.launch("after")
            launching = fake_clock.now - t0
        ending = fake_clock.now - t0 - launching
    finally:
        q.hang.set()
    assert 1 <= launching <= 1 + 0.005  # one timeout (was 1 s per 32 launches: 18 s)
    assert ending == 0  # not waited for again at the end
    assert len(p.kernels) == 601 and all(k.error for k in p.kernels)
    assert "did not reach the timestamp within 1 s" in p.kernels[0].error
    assert "not waited for again" in p.kernels[-1].error
    assert not plugin.live
