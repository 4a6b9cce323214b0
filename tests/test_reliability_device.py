"""Device errors while resolving: a timestamp that never completes, ``elapsed_time`` raising.
The wait is bounded, records say why they have no time, the report still prints."""

from __future__ import annotations

import time
import warnings
from typing import Any

import pytest
from kprof_testbackend import device, plugin
from kprof_testbackend.instant import InstantClock, InstantQueue

import kprof

pytestmark = pytest.mark.usefixtures("testbackends")


def hung_profile(q: device.Queue, **kwargs: Any) -> tuple[kprof.Profile, float]:
    q.hang.clear()  # kernels named "hang" block the queue until q.hang is set
    t0 = time.monotonic()
    with kprof.profile(**kwargs) as p, q:
        q.launch("before", 10)
        q.launch("hang")
        for _ in range(200):
            q.launch("after")
    waited = time.monotonic() - t0
    q.hang.set()
    return p, waited


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_a_timestamp_that_never_completes(
    tdq: Any, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    q = tdq()
    if how == "environment":
        monkeypatch.setenv("KPROF_RESOLVE_TIMEOUT", "0.2")
        p, waited = hung_profile(q)
    else:
        p, waited = hung_profile(q, timeout=0.2)
    # One bounded wait in all, not one per pending record (that would be 40 s here).
    assert waited < 10
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
    @kprof.hookimpl
    def elapsed_time(self, backend: kprof.Backend, start: Any, stop: Any) -> Any:
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
