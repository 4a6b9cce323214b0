"""kprof.profile() end to end on the test device: device timing, the host fallback, options,
attribution, scope isolation, capture install/removal, and the token pool."""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from kprof_testbackend import device, plugin
from kprof_testbackend.instant import InstantClock, InstantQueue

import kprof
from kprof_core.recording.recorder import Recorder
from kprof_core.renderers.common import FOOTNOTE

pytestmark = pytest.mark.usefixtures("testbackends")


@pytest.fixture
def instant() -> Iterator[InstantClock]:
    clock = InstantClock()
    kprof.register_backend(clock, "instant")
    yield clock


def test_device_path_times_work_on_the_device(tdq: Any) -> None:
    q = tdq()
    with kprof.profile() as p, q:
        for _ in range(3):
            q.launch("k", 300)
        q.launch("j", 100)
    ks = p.kernels
    assert [k.name for k in ks] == ["k", "k", "k", "j"]
    for k in ks:
        assert (k.backend, k.device, k.queue, k.thread, k.kind) == (
            "testdev",
            "testdev 0",
            f"queue {q.index}",
            "MainThread",
            "kernel",
        )
        assert not k.host_timed and k.error is None
        assert k.start_ns >= k.launch_start_ns  # no work starts before its launch
    assert all(k.duration_ns >= 300_000 for k in ks[:3])
    assert ks[3].duration_ns >= 100_000
    for a, b in itertools.pairwise(ks):  # one in-order queue: no overlap
        assert b.start_ns >= a.end_ns
    # The test device's clock is the host's: placed exactly, no shift needed.
    [clock] = p.clocks.values()
    assert (clock.method, clock.error_ns, clock.shift_ns) == ("host clock (test device)", 0, 0)
    assert p.kernel_times("k") == [k.duration_ns for k in ks[:3]]
    assert p.backends == ["testdev", "testnots"]


def test_fallback_times_on_the_host_and_says_so(tdq: Any) -> None:
    pq = tdq(plain=True)
    with kprof.profile() as p, pq:
        pq.launch("plain", 300)
    [k] = p.kernels
    assert (k.backend, k.host_timed, k.queue) == ("testnots", True, "queue 1")
    assert k.duration_ns >= 300_000  # the launch was synchronized
    text = str(p)
    assert " plain *" in text
    assert FOOTNOTE.startswith(" * timed on the host, synchronizing after each launch")
    assert text.splitlines()[-1] == FOOTNOTE


def test_device_false_keeps_host_records_only(tdq: Any) -> None:
    q = tdq()
    with kprof.profile(device=False) as p, q, kprof.range("step"):
        q.launch("k", 10)
        q.launch("k", 10)
        kprof.kernel(lambda: None, name="wrapped")()
    assert p.kernels == [] and p.device_ranges == []
    assert q.markers_recorded == 0  # no timestamps were taken
    assert [r.name for r in p.ranges] == ["step"]
    assert sorted(r.name for r in p.launches) == ["k", "k", "wrapped"]
    s = p.summary()
    assert s.device == []
    assert s.host_row("k").calls == 2 and s.host_row("step").calls == 1
    assert "No device-side activity was recorded." in str(p)
    assert p.counts == (1, 0)


def test_synchronize_waits_for_each_launch(tdq: Any) -> None:
    q = tdq()
    with kprof.profile(synchronize=True) as p, q:
        q.launch("a", 2000)
        q.launch("b", 10)
    a, b = p.kernels
    assert not a.host_timed  # still timed on the device
    assert a.end_ns <= b.launch_start_ns  # a had finished before b was launched
    with kprof.profile() as p, q:
        q.launch("a", 20_000)
        q.launch("b", 10)
    a, b = p.kernels
    assert b.launch_start_ns < a.end_ns  # without it, the host runs ahead


def test_range_and_kernel_wrapper(tdq: Any) -> None:
    q = tdq()

    @kprof.range("decorated")
    def step() -> None:
        q.launch("inner", 50)

    with kprof.profile() as p, q:
        with kprof.range("outer"):
            step()
            q.launch("inner", 50)
        kprof.kernel(lambda: q.launch("uncaptured", 20), name="wrapped")()
        kprof.mark("here")
    assert [r.name for r in p.ranges] == ["decorated", "outer"]
    outer = next(r for r in p.device_ranges if r.name == "outer")
    inners = [k for k in p.kernels if k.name == "inner"]
    assert len(inners) == 2 and outer.queue == f"queue {q.index}"
    # The range's device time spans the work enqueued inside it.
    assert outer.start_ns <= inners[0].start_ns and inners[1].end_ns <= outer.end_ns
    wrapped = next(k for k in p.kernels if k.name == "wrapped")
    assert wrapped.duration_ns >= 20_000 and not wrapped.host_timed
    assert [m.name for m in p.markers] == ["here"]


def test_ranges_never_shift_the_device(instant: InstantClock) -> None:
    """A range's device start is taken after its host start's lower bound: with an exact
    clock, placement needs no shift (a shift would move every record of the device)."""
    q = InstantQueue("iq")
    with kprof.profile(backends=["instant"]) as p, instant.using(q):
        for _ in range(50):
            with kprof.range("r"):
                pass
            kprof.kernel(lambda: None, name="k")()
    [clock] = p.clocks.values()
    assert clock.shift_ns == 0 and clock.method == "host clock (instant)"
    assert len(p.device_ranges) == 50 and len(p.kernels) == 50
    assert not instant.live


def test_profile_as_a_decorator(tdq: Any) -> None:
    q = tdq()

    @kprof.profile()
    def work(n: int) -> str:
        with q:
            for _ in range(n):
                q.launch("k")
        return "result"

    assert work(3) == "result"
    assert [k.name for k in work.last_profile.kernels] == ["k"] * 3  # type: ignore[attr-defined]
    assert work(1) == "result"  # a new profile per call
    assert len(work.last_profile.kernels) == 1  # type: ignore[attr-defined]


def test_summary_data(tdq: Any) -> None:
    q = tdq()
    with kprof.profile() as p, q:
        for _ in range(4):
            q.launch("k", 100)
        with kprof.range("r"):
            pass
    row = p.summary().device_row("k")
    durs = p.kernel_times("k")
    assert row.calls == 4 and row.total_ns == sum(durs)
    assert (row.min_ns, row.max_ns) == (min(durs), max(durs))
    assert p.summary().host_row("r").calls == 1
    with pytest.raises(KeyError, match="names"):
        p.summary().device_row("nope")


# -- scope ---------------------------------------------------------------------------------------


def test_asyncio_tasks_created_inside_are_recorded(tdq: Any) -> None:
    qa, qb = tdq(), tdq()

    async def work(q: device.Queue, name: str) -> None:
        with q:
            q.launch(name)
        await asyncio.sleep(0)
        with q:
            q.launch(name)

    async def main() -> None:
        await asyncio.gather(
            asyncio.create_task(work(qa, "a"), name="ta"),
            asyncio.create_task(work(qb, "b"), name="tb"),
        )

    with kprof.profile() as p:
        asyncio.run(main())
    assert Counter((k.name, k.thread, k.queue) for k in p.kernels) == {
        ("a", "MainThread, task ta", f"queue {qa.index}"): 2,
        ("b", "MainThread, task tb", f"queue {qb.index}"): 2,
    }


def test_threads_are_recorded_only_through_propagate(tdq: Any) -> None:
    qp, qn = tdq(), tdq()

    def work(q: device.Queue, name: str) -> None:
        with q:
            q.launch(name, 10)

    with kprof.profile() as p:
        t1 = threading.Thread(target=kprof.propagate(work), args=(qp, "p"), name="propagated")
        t2 = threading.Thread(target=work, args=(qn, "n"), name="plain")
        t1.start()
        t2.start()
        t1.join()
        t2.join()
    assert [(k.name, k.thread, k.queue) for k in p.kernels] == [
        ("p", "propagated", f"queue {qp.index}")
    ]
    assert qn.markers_recorded == 0  # the plain thread took no timestamps


def test_an_unrelated_thread_records_nothing_and_takes_no_timestamps(tdq: Any) -> None:
    mine, theirs = tdq(), tdq()
    go, done = threading.Event(), threading.Event()

    def unrelated() -> None:  # started before the profile, runs while it is active
        go.wait()
        with theirs:
            for _ in range(100):
                theirs.launch("theirs")
        done.set()

    t = threading.Thread(target=unrelated)
    t.start()
    live_before = len(plugin.live)
    with kprof.profile() as p:
        assert device.Queue.launch is not capture_original()  # capture is installed
        go.set()
        done.wait(10)
        with mine:
            mine.launch("mine")
    t.join()
    assert [k.name for k in p.kernels] == ["mine"]
    assert theirs.markers_recorded == 0 and mine.markers_recorded == 2
    assert len(plugin.live) == live_before


def capture_original() -> Any:
    return _ORIGINAL_LAUNCH


_ORIGINAL_LAUNCH = device.Queue.launch


def test_an_exception_propagates_and_records_are_kept(tdq: Any) -> None:
    q = tdq()
    err = ValueError("boom")
    with pytest.raises(ValueError) as ei:
        with kprof.profile() as p, q, kprof.range("r"):
            q.launch("before", 10)
            raise err
    assert ei.value is err and ei.value.__context__ is None
    assert [k.name for k in p.kernels] == ["before"]
    assert [r.name for r in p.ranges] == ["r"]
    assert "before" in str(p)


# -- capture and tokens ---------------------------------------------------------------------------


def test_capture_installed_on_first_enter_removed_on_last_exit(tdq: Any) -> None:
    q = tdq()
    original, plain_original = device.Queue.launch, device.PlainQueue.launch
    # Outside a profile the library's own functions are in place, not kprof's wrappers.
    assert (original.__qualname__, plain_original.__qualname__) == (
        "Queue.launch",
        "PlainQueue.launch",
    )
    with kprof.profile() as outer:
        installed = device.Queue.launch
        assert installed is not original and device.PlainQueue.launch is not plain_original
        with kprof.profile():
            assert device.Queue.launch is installed  # not installed twice
        assert device.Queue.launch is installed  # the inner exit did not remove it
        with q:
            q.launch("k")
    assert device.Queue.launch is original and device.PlainQueue.launch is plain_original
    assert len(outer.kernels) == 1


def test_each_backend_is_captured_while_a_profile_uses_it(tdq: Any) -> None:
    q = tdq()
    original = device.Queue.launch
    with kprof.profile(backends=["testnots"]) as outer:
        assert device.Queue.launch is original  # testdev is not used: not patched
        with q:
            q.launch("ignored")  # not captured: the profile did not ask for testdev
        with kprof.profile(backends=["testdev"]) as inner, q:
            q.launch("k", 10)
        assert device.Queue.launch is original
    assert [k.name for k in inner.kernels] == ["k"]
    assert [k.name for k in outer.kernels] == ["k"]  # the outer one has the inner's records


def test_tokens_come_from_the_pool_and_go_back(tdq: Any) -> None:
    q = tdq()
    for _ in range(2):  # the first run fills the pool; the second must create no marker
        created = device.stats["markers_created"]
        with kprof.profile() as p, q:
            for _ in range(300):
                q.launch("k")
        assert len(p.kernels) == 300
        assert not plugin.live
    assert device.stats["markers_created"] == created


def test_harvesting_bounds_live_tokens(tdq: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Recorder, "harvest_every", 16)
    monkeypatch.setattr(Recorder, "max_pending", 64)
    peak = 0
    take = plugin._take

    def counting_take() -> device.Marker:
        nonlocal peak
        m = take()
        peak = max(peak, len(plugin.live))
        return m

    monkeypatch.setattr(plugin, "_take", counting_take)
    q = tdq()
    with kprof.profile() as p, q:
        rec = kprof.plugin.active()
        for _ in range(1500):
            q.launch("k", 20)  # the device is slower than the host: work piles up
    assert len(p.kernels) == 1500 and not plugin.live
    assert rec is not None and Recorder.max_pending <= rec.pending_high_water
    assert rec.pending_high_water <= Recorder.max_pending + 1
    # Two tokens per pending launch, two for the launch in progress, one reference.
    assert peak <= 2 * (Recorder.max_pending + 1) + 3
