"""Ranges at the edges of a profile: one still open when the profile ends is recorded up to
the end (with a warning), one object entered twice records both entries (with a warning), and
a profile exited from another context puts nothing more on any device."""

from __future__ import annotations

import contextvars
import threading
import warnings
from typing import Any

import pytest
from kprof_testbackend.instant import InstantClock, InstantQueue

import kprof

pytestmark = pytest.mark.usefixtures("testbackends")


class Counting(InstantClock):
    def __init__(self) -> None:
        super().__init__()
        self.recorded = 0

    @kprof.plugin.hookimpl
    def record_timestamp(self, backend: kprof.plugin.Backend) -> Any:
        self.recorded += 1
        return super().record_timestamp(backend)


@pytest.fixture
def odd() -> Counting:
    plugin = Counting()
    kprof.register_backend(plugin, "odd")
    return plugin


def test_a_range_open_when_its_profile_ends_is_kept_up_to_the_end(odd: Counting) -> None:
    entered, release = threading.Event(), threading.Event()

    def worker() -> None:
        with odd.using(InstantQueue("wq")), kprof.range("straggler"):
            entered.set()
            release.wait()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with kprof.profile(backends=["odd"]) as p:
            t = threading.Thread(target=kprof.propagate(worker))
            t.start()
            entered.wait()
            with kprof.range("main"):
                pass
        release.set()
        t.join()
    assert sorted(r.name for r in p.ranges) == ["main", "straggler"]
    straggler = next(r for r in p.ranges if r.name == "straggler")
    assert 0 <= straggler.start_ns <= straggler.end_ns <= p.end_ns - p.start_ns
    assert [str(w.message) for w in caught if "still open" in str(w.message)] == [
        "kprof: 1 range was still open when the profile ended ('straggler'): recorded on the "
        "host up to the profile's end, without device time"
    ]
    assert not odd.live  # its device timestamp was given back
    assert p.device_ranges == []


def test_a_range_object_entered_twice_records_both(odd: Counting) -> None:
    r = kprof.range("shared")
    with pytest.warns(RuntimeWarning, match="'shared' was entered again before it exited"):
        with kprof.profile(backends=["odd"]) as p, odd.using(InstantQueue("q")):
            with r:
                with r:
                    pass
    assert [x.name for x in p.ranges] == ["shared", "shared"]
    inner, outer = p.ranges
    assert outer.start_ns <= inner.start_ns and inner.end_ns <= outer.end_ns
    assert len(p.device_ranges) == 2 and not odd.live
    with r:  # outside a profile it still pairs its exits with its entries
        pass
    assert r._top is None and not r._more


def test_a_profile_exited_from_another_context_puts_no_more_timestamps(odd: Counting) -> None:
    prof = kprof.profile(backends=["odd"])
    ctx = contextvars.copy_context()
    p = ctx.run(prof.__enter__)
    prof.__exit__(None, None, None)  # exited here, in another context than it entered
    assert kprof.plugin.active() is None
    before = odd.recorded

    def later() -> None:
        with odd.using(InstantQueue("q")), kprof.range("late"):
            pass

    ctx.run(later)
    assert odd.recorded == before  # nothing more put on the device for a finished profile
    assert not odd.live
    assert p.ranges == []
