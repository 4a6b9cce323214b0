"""The printed trace (``profile(trace=True)``): rows, nesting, markers, host-timed and
unresolved records, and the clock-alignment line, on the simulated test device."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from tracecheck import add_device_range, synthetic

import kprof
from kprof_core.renderers.console import trace_rows


def _facts(p: kprof.Profile) -> list[tuple[str, str, int]]:
    return [(on, name, depth) for _s, _d, on, name, depth in trace_rows(p)]


def test_rows_nesting_and_order_on_two_queues_and_two_threads(
    testbackends: Any, tdq: Callable[..., Any]
) -> None:
    q1, q2 = tdq(), tdq()

    def worker() -> None:
        with q2, kprof.range("worker"):
            q2.launch("k2", 200)

    with kprof.profile(trace=True) as p:
        with q1:
            with kprof.range("step"):
                with kprof.range("inner"):
                    q1.launch("k1", 300)
                    kprof.mark("here")
                t = threading.Thread(target=kprof.propagate(worker))
                t.start()
                t.join()
                q1.launch("k3", 100)

    rows = trace_rows(p)
    starts = [r[0] for r in rows]
    assert starts == sorted(starts), "the trace is chronological"
    facts = _facts(p)
    n1, n2 = f"queue {q1.index}", f"queue {q2.index}"
    dev1, dev2 = f"testdev 0, {n1}, thread 1", f"testdev 0, {n2}, thread 2"
    assert sorted(facts) == sorted(
        [
            ("thread 1", "step", 0),
            ("thread 1", "inner", 1),
            ("thread 1", "k1", 2),
            ("thread 1", "◆ here", 2),
            ("thread 1", "k3", 1),
            ("thread 2", "worker", 0),
            ("thread 2", "k2", 1),
            (dev1, "step", 0),
            (dev1, "inner", 1),
            (dev1, "k1", 2),
            (dev1, "k3", 1),
            (dev2, "worker", 0),
            (dev2, "k2", 1),
        ]
    )
    # Per row, the order is the order of events there: enclosing entries come first.
    assert [f[1] for f in facts if f[0] == dev1] == ["step", "inner", "k1", "k3"]
    assert [f[1] for f in facts if f[0] == "thread 1"] == ["step", "inner", "k1", "◆ here", "k3"]
    marker = next(r for r in rows if r[3] == "◆ here")
    assert marker[1] is None, "a marker has no duration"
    # Every device entry starts at or after its launch (the trace shows placed device time).
    launch = {name: s for s, _d, on, name, _z in rows if on.startswith("thread")}
    for s, _d, on, name, _z in rows:
        if on.startswith("testdev") and name.startswith("k"):
            assert s >= launch[name]

    text = p.report()
    assert "Trace:" in text
    assert f"  {dev1}  {'    '}k1" in text  # two levels of indentation
    assert "  ◆ here" in text
    assert "Device clocks placed on the host timeline:" in text
    assert "testdev 0: host clock (test device) (error ≤ 0 ns)" in text


def test_asyncio_tasks_on_one_thread_get_rows_of_their_own(testbackends: Any) -> None:
    async def task(name: str, gate: asyncio.Event, other: asyncio.Event) -> None:
        with kprof.range(name):
            other.set()
            await gate.wait()  # the two ranges interleave on one thread

    async def main() -> None:
        a, b = asyncio.Event(), asyncio.Event()
        await asyncio.gather(
            asyncio.create_task(task("ra", a, b), name="A"),
            asyncio.create_task(task("rb", b, a), name="B"),
        )

    with kprof.profile(device=False) as p:
        asyncio.run(main())
    facts = _facts(p)
    assert ("thread 1, task A", "ra", 0) in facts
    assert ("thread 1, task B", "rb", 0) in facts


def test_host_timed_records_are_starred_and_unresolved_ones_keep_only_their_launch(
    testbackends: Any, tdq: Callable[..., Any]
) -> None:
    plain, q = tdq(plain=True), tdq()
    q.hang.clear()  # the "hang" kernel never finishes within the profile's timeout
    with kprof.profile(trace=True, timeout=0.2) as p:
        with plain:
            plain.launch("slow", 100)
        with q:
            q.launch("hang", 0)
    q.hang.set()
    facts = _facts(p)
    [(on, _name, depth)] = [f for f in facts if f[1] == "slow *"]
    assert on.startswith("testnots") and on.endswith(", thread 1") and depth == 0
    assert ("thread 1", "slow", 0) in facts
    assert ("thread 1", "hang", 0) in facts
    assert not [f for f in facts if f[1] == "hang" and f[0] != "thread 1"], (
        "an unresolved record has no device row"
    )
    assert len(p.unresolved) == 1


def test_overlapping_work_on_one_row_goes_to_an_overflow_row() -> None:
    # Kernels that overlap on one queue (an out-of-order queue) can't nest: the second one is
    # shown on an overflow row rather than indented as if it were inside the first.
    p = synthetic(2, threads=1)
    t = p.table
    t.start[0], t.duration[0] = t.launch_start[1] + 10, 1000
    t.start[1], t.duration[1] = t.launch_start[1] + 500, 1000
    rows = [(on, name, depth) for _s, _d, on, name, depth in trace_rows(p) if on != "thread 1"]
    assert [r[2] for r in rows] == [0, 0]
    assert rows[0][0] == "testdev synth 0, queue 1, thread 1"
    assert rows[1][0] == "testdev synth 0, queue 1, thread 1 (overlap 1)"


def test_the_trace_of_nothing_is_just_its_header(testbackends: Any) -> None:
    with kprof.profile(trace=True) as p:
        pass
    assert trace_rows(p) == []
    assert "Trace:" in p.report()


def test_a_range_starting_with_its_first_kernel_encloses_it() -> None:
    # A device range is recorded when it ends, after its kernels, and on a coarse device clock
    # it can start at the very nanosecond its first kernel does: it still comes first.
    p = synthetic(1, threads=1)
    t = p.table
    s0, d0 = t.start[0], t.duration[0] or 1
    t.duration[0] = d0
    add_device_range(p, "r", 0, 0, s0, s0 + d0)  # recorded after the kernel, same start
    row = t.row(0)
    t.append(*row[:6], s0 + d0, 5, *row[8:])  # a second kernel, after the range
    rows = [(name, depth) for _s, _d, on, name, depth in trace_rows(p) if on != "thread 1"]
    k = p.names[t.name[0]]
    assert rows == [("r", 0), (k, 1), (k, 0)]
    # The same when the table is not in start order at all (it is then sorted).
    t.start[2] = s0 - 100
    t.launch_start[2] = t.launch_end[2] = s0 - 200
    rows = [(name, depth) for _s, _d, on, name, depth in trace_rows(p) if on != "thread 1"]
    assert rows == [(k, 0), ("r", 0), (k, 1)]
