"""Concurrency: many threads under one profile, profiles in parallel threads, nested profiles,
and a thread that outlives its profile."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest
from kprof_testbackend import device, plugin

import kprof

pytestmark = pytest.mark.usefixtures("testbackends")

THREADS, LAUNCHES = 8, 10_000


def test_eight_threads_under_one_profile(tdq: Any) -> None:
    queues = [tdq() for _ in range(THREADS)]
    start = threading.Barrier(THREADS, timeout=30)

    def work(q: device.Queue) -> None:
        start.wait()
        with q:
            for _ in range(LAUNCHES):
                q.launch("k")

    with kprof.profile() as p:
        threads = [
            threading.Thread(target=kprof.propagate(work), args=(q,), name=f"w{i}")
            for i, q in enumerate(queues)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    ks = p.kernels
    assert len(ks) == THREADS * LAUNCHES
    assert Counter((k.thread, k.queue) for k in ks) == {
        (f"w{i}", f"queue {q.index}"): LAUNCHES for i, q in enumerate(queues)
    }
    assert all(k.error is None for k in ks)
    assert not plugin.live


def test_two_profiles_in_two_threads_see_only_their_own_work(tdq: Any) -> None:
    queues = [tdq(), tdq()]
    both_in = threading.Barrier(2, timeout=30)
    results: dict[int, kprof.Profile] = {}

    def work(i: int) -> None:
        q = queues[i]
        with kprof.profile() as p:
            both_in.wait()  # both profiles are active from here on
            with q, kprof.range(f"r{i}"):
                for _ in range(500):
                    q.launch(f"k{i}")
            both_in.wait()
        results[i] = p

    threads = [threading.Thread(target=work, args=(i,), name=f"t{i}") for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(2):
        p = results[i]
        assert Counter((k.name, k.thread, k.queue) for k in p.kernels) == {
            (f"k{i}", f"t{i}", f"queue {queues[i].index}"): 500
        }
        assert [r.name for r in p.ranges] == [f"r{i}"]
    assert not plugin.live


def test_nested_profiles_each_get_their_records(tdq: Any) -> None:
    q, q2 = tdq(), tdq()
    with kprof.profile() as outer, q:
        q.launch("o1", 10)
        with kprof.profile() as inner, kprof.range("inner range"):
            q.launch("i1", 10)
            with q2:
                q2.launch("i2", 10)
        q.launch("o2", 10)
    assert [k.name for k in inner.kernels] == ["i1", "i2"]
    assert sorted(k.name for k in outer.kernels) == ["i1", "i2", "o1", "o2"]
    assert [r.name for r in inner.ranges] == [r.name for r in outer.ranges] == ["inner range"]
    # The outer profile's copies of the inner records are the same records.
    by_name = {k.name: k for k in outer.kernels}
    for k in inner.kernels:
        o = by_name[k.name]
        assert (o.queue, o.thread, o.duration_ns, o.error) == (
            k.queue,
            k.thread,
            k.duration_ns,
            None,
        )
        assert o.start_ns + outer.start_ns == k.start_ns + inner.start_ns
    assert not plugin.live


def test_a_thread_that_outlives_its_profile(tdq: Any) -> None:
    """Work reported after the profile ended is dropped, and its tokens are given back."""
    q = tdq()
    inside, ended = threading.Event(), threading.Event()

    def work() -> None:
        with q:
            q.launch("in time")
            inside.set()
            ended.wait(10)
            for _ in range(100):
                q.launch("late")

    with kprof.profile() as outer:  # keeps capture installed after the inner profile ends
        with kprof.profile() as inner:
            rec = kprof.plugin.active()
            t = threading.Thread(target=kprof.propagate(work))
            t.start()
            inside.wait(10)
        ended.set()
        t.join()
    assert [k.name for k in inner.kernels] == ["in time"]
    assert [k.name for k in outer.kernels] == ["in time"]
    assert rec is not None and rec.late_dropped == 100
    assert not plugin.live
    assert device.Queue.launch is _ORIGINAL


_ORIGINAL = device.Queue.launch
