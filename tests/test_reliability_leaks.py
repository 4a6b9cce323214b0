"""Leaks: a thousand profiles in a row leave live tokens, patched functions and memory where
they started."""

from __future__ import annotations

import gc
import tracemalloc
from typing import Any

import pytest
from kprof_testbackend import device, plugin

import kprof
from kprof_core import profiler

pytestmark = pytest.mark.usefixtures("testbackends")


def test_a_thousand_profiles_in_a_row(tdq: Any) -> None:
    q, pq = tdq(), tdq(plain=True)
    originals = (device.Queue.launch, device.PlainQueue.launch)

    def one() -> None:
        with kprof.profile() as p:
            with q, kprof.range("r"):
                q.launch("k")
                q.launch("k")
            with pq:
                pq.launch("p")
        assert len(p.kernels) == 3

    for _ in range(50):  # warm up: pools, interned strings, caches
        one()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        created = device.stats["markers_created"]
        for _ in range(1000):
            one()
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    grown = sum(s.size_diff for s in after.compare_to(before, "filename"))
    assert grown < 32 * 1024, after.compare_to(before, "lineno")[:5]
    assert not plugin.live
    assert device.stats["markers_created"] == created  # every token came back to the pool
    assert (device.Queue.launch, device.PlainQueue.launch) == originals
    assert device.Queue.launch is originals[0] and device.PlainQueue.launch is originals[1]
    assert not profiler.capture_installed()


class FreshQueues:
    """A backend with a current queue and no queue_info: kprof's default names the queues."""

    queue: Any = None

    @kprof.plugin.hookimpl
    def current_queue(self, backend: kprof.plugin.Backend) -> Any:
        return self.queue


def test_default_queue_names_do_not_accumulate() -> None:
    plugin = FreshQueues()
    backend = kprof.register_backend(plugin, "fresh")

    class Q:
        pass

    with kprof.profile(backends=["fresh"]) as p:
        for q in (Q(), Q(), Q()):
            plugin.queue = q
            kprof.kernel(lambda: None, name="k")()
    assert sorted(k.queue for k in p.kernels) == ["queue 1", "queue 2", "queue 3"]
    for _ in range(1000):
        plugin.queue = Q()
        with kprof.profile(backends=["fresh"]):
            kprof.kernel(lambda: None, name="k")()
    plugin.queue = None
    del q  # the loop variable still holds the last queue
    gc.collect()
    assert len(backend.state["kprof.queue_numbers"]) == 0


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "pure"])
def test_ended_windows_free_their_recorders_without_the_collector(tdq: Any, compiled: bool) -> None:
    """Each window's recorder is freed when its window ends, by reference counting alone: no
    cycle (the compiled launch path held the recorder's bound methods) keeps ended windows'
    recorders and their tables for the collector, which in a long run met the next windows
    (issue 22: its peak memory over one window's)."""
    import weakref

    from kprof_core.low_level import native
    from kprof_core.recording.recorder import _live

    if compiled and native.compiled() is None:
        pytest.skip("the compiled recorder is not built")
    q = tdq()
    native.use_compiled(compiled)
    gc.collect()
    before = set(map(id, _live))
    seen: list[Any] = []  # the windows' recorders, weakly

    def note(seen: list[Any], before: set[int]) -> None:  # no local outlives the call
        for r in _live:
            if id(r) not in before and not any(w() is r for w in seen):
                seen.append(weakref.ref(r))

    gc.disable()
    try:
        windows: list[int] = []
        sched = kprof.schedule(wait=1, active=3, repeat=3)
        on_window = lambda w: windows.append(len(w.kernels))  # noqa: E731
        with kprof.profile(backends=["testdev"], schedule=sched, on_window=on_window):
            for _ in range(12):
                for _ in range(400):  # past a harvest's threshold: the launch path harvests
                    q.launch("k")
                q.finish()
                note(seen, before)
                kprof.step()
        alive = [r() for r in seen if r() is not None]
    finally:
        gc.enable()
        native.use_compiled(True)
    assert windows == [1200, 1200, 1200] and len(seen) == 3  # a recorder per window
    assert alive == [], [type(x).__name__ for r in alive for x in gc.get_referrers(r)]
