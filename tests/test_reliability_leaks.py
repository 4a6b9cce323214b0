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
