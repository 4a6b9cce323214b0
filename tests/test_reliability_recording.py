"""Recording at its edges: a nested profile with fewer backends, thread names of ended threads,
one warning per kind of device error, a profile exited on another thread."""

from __future__ import annotations

import gc
import threading
import warnings
from typing import Any

import pytest
from kprof_testbackend import plugin
from kprof_testbackend.instant import InstantClock, InstantQueue

import kprof
from kprof_core.recording import threads

pytestmark = pytest.mark.usefixtures("testbackends")


def test_a_nested_profile_with_fewer_backends_loses_no_kernel_of_the_outer(tdq: Any) -> None:
    """Item 22: outer backends testdev and testnots, inner testnots only: the testdev kernel
    launched inside the inner profile was lost to the outer one."""
    q = tdq()
    with kprof.profile(backends=["testdev", "testnots"]) as outer, q:
        q.launch("before")
        with kprof.profile(backends=["testnots"]) as inner:
            q.launch("inside")
        q.launch("after")
    assert [k.name for k in outer.kernels] == ["before", "inside", "after"]  # was no "inside"
    assert not inner.kernels and not outer.unresolved
    assert not plugin.live


def test_ended_threads_are_forgotten_once_no_profile_records() -> None:
    """Item 21: every thread ever seen kept an entry (~110 B) for the life of the process."""
    gc.collect()
    threads.forget_ended()
    before = len(threads.thread_names)

    def work() -> None:
        kprof.mark("m")

    with kprof.profile(device=False) as p:
        ts = [threading.Thread(target=kprof.propagate(work)) for _ in range(50)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    assert len(p.markers) == 50 and len({m.thread for m in p.markers}) >= 1
    with kprof.profile(device=False):  # a profile's end forgets what ended meanwhile
        pass
    assert len(threads.thread_names) <= before + 1  # this thread's own, if it was new


class FailsPerRecord(InstantClock):
    """A device error whose message differs for every record (an event's address)."""

    @kprof.plugin.hookimpl
    def elapsed_time(self, backend: kprof.plugin.Backend, start: Any, stop: Any) -> Any:
        raise RuntimeError(f"event {id(stop):#x} failed")


def test_one_warning_per_backend_and_kind_of_device_error() -> None:
    """Item 21: a warning per record when each device error's message differs."""
    plugin_ = FailsPerRecord()
    kprof.register_backend(plugin_, "fails")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with kprof.profile(backends=["fails"]) as p, plugin_.using(InstantQueue("q")):
            for _ in range(20):
                with kprof.range("r"):
                    pass
    assert len(p.device_ranges) == 20 and all(r.error for r in p.device_ranges)
    said = [w for w in caught if "elapsed_time raised RuntimeError" in str(w.message)]
    assert len(said) == 1  # was 20


def test_a_profile_exited_on_another_thread_stops_being_active_here(tdq: Any) -> None:
    """Item 21: exited on another thread, the profile stayed active on the entering thread
    (its context cannot be reset from there): later launches went to it and were dropped,
    and a new profile there nested under the ended one."""
    q = tdq()
    prof = kprof.profile()
    with q:
        p = prof.__enter__()
        q.launch("inside")
        t = threading.Thread(target=prof.__exit__, args=(None, None, None))
        t.start()
        t.join()
        # (Capture was removed with the last profile: launches here cost nothing.) The first
        # kprof call here notices the profile ended.
        kprof.mark("after the end")
        assert kprof.plugin.active() is None
        with kprof.profile() as again:
            q.launch("next")
    assert [k.name for k in p.kernels] == ["inside"]
    assert [k.name for k in again.kernels] == ["next"]
    q.finish()
    assert not plugin.live
