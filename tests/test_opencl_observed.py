"""Approximate times of commands on queues without profiling (kprof_opencl/observed.py): the
driver's completion callbacks where compiled, the polling watcher's stamps otherwise. Clocks
are injected or ordered: no assertion on how long anything took."""

from __future__ import annotations

import time
from typing import Any

import pytest

from kprof_opencl import hook, observed
from kprof_opencl.observed import Observed, _QueueState, _stamp_seen

cl = pytest.importorskip("pyopencl")

import kprof_opencl  # noqa: E402


def _tok(launched: int) -> Observed:
    return Observed(object(), launched)


def test_commands_seen_complete_in_one_poll_share_the_window() -> None:
    # Three commands on an in-order queue, launched at 100, 110 and 500; the previous
    # completion was at 200; one poll at 1200 sees all three done.
    state = _QueueState(in_order=True)
    state.last_end = 200
    toks = [_tok(100), _tok(110), _tok(500)]
    _stamp_seen(state, [(t, 0) for t in toks], 1200)
    assert [(t.begin, t.end) for t in toks] == [(200, 533), (533, 866), (866, 1200)]
    assert state.last_end == 1200 and all(t.status == 0 and t.event is None for t in toks)


def test_a_late_launch_starts_its_share_at_its_launch() -> None:
    state = _QueueState(in_order=True)
    toks = [_tok(0), _tok(900)]
    _stamp_seen(state, [(toks[0], 0), (toks[1], -5)], 1000)
    assert [(t.begin, t.end, t.status) for t in toks] == [(0, 500, 0), (900, 1000, -5)]


def test_out_of_order_commands_each_span_launch_to_the_poll() -> None:
    state = _QueueState(in_order=False)
    toks = [_tok(10), _tok(20)]
    _stamp_seen(state, [(t, 0) for t in toks], 100)
    assert [(t.begin, t.end) for t in toks] == [(10, 100), (20, 100)]


class FakeStamp:
    def __init__(self) -> None:
        self.value: tuple[int, int, int] | None = None

    def read(self) -> tuple[int, int, int] | None:
        return self.value


def test_stamped_commands_settle_oldest_first_with_the_fallback_start() -> None:
    first, second = _tok(100), _tok(150)
    first.stamp, second.stamp = FakeStamp(), FakeStamp()
    second.prev = first
    second.stamp.value = (0, 0, 900)  # no start from the driver: after the previous one
    assert second.get_info(0x11D3) == 1  # the previous command is not done: neither is this
    first.stamp.value = (0, 120, 400)  # started at 120 by the driver's CL_RUNNING call
    assert second.get_info(0x11D3) == 0
    assert (first.begin, first.end, second.begin, second.end) == (120, 400, 400, 900)
    assert second.prev is None and first.stamp is None  # nothing kept once settled


def test_a_failed_stamped_command_reports_its_status() -> None:
    tok = _tok(0)
    tok.stamp = FakeStamp()
    tok.stamp.value = (-14, 0, 50)
    assert tok.get_info(0x11D3) == -14
    with pytest.raises(RuntimeError, match="failed with OpenCL status -14"):
        tok.get_profiling_info(0x1282)


@pytest.fixture
def stamping() -> Any:
    mod = hook.module()
    if mod is None:
        pytest.skip("the compiled hook is not in use (KPROF_PURE_PYTHON=1 or not built)")
    return mod


def test_the_driver_stamps_a_command_when_it_runs(stamping: Any) -> None:
    dev = kprof_opencl.default_device()
    if dev is None:
        pytest.skip("no OpenCL device")
    ctx = cl.Context([dev])
    q = cl.CommandQueue(ctx)
    gate = cl.UserEvent(ctx)
    marker = cl.enqueue_marker(q, wait_for=[gate])
    stamp = stamping.stamp(marker.int_ptr)
    assert stamp.read() is None  # held back by the user event: not complete
    gate.set_status(cl.command_execution_status.COMPLETE)
    marker.wait()
    # The spec lets the driver call back on its own thread after the wait returns: wait for
    # the callback itself (it must come; the deadline only turns a hang into a failure).
    deadline = time.monotonic() + 60
    while (got := stamp.read()) is None and time.monotonic() < deadline:
        time.sleep(0.001)
    assert got is not None, "the driver never called back"
    status, begin, end = got
    assert status == 0 and end > 0 and (begin == 0 or begin <= end)


def test_tracked_tokens_use_the_driver_where_compiled(stamping: Any) -> None:
    dev = kprof_opencl.default_device()
    ctx = cl.Context([dev])
    q = cl.CommandQueue(ctx)
    a, b = cl.enqueue_marker(q), cl.enqueue_marker(q)
    ta, tb = observed.watcher.track(a, q, 0), observed.watcher.track(b, q, 0)
    q.finish()
    assert ta.stamp is not None and tb.prev is ta  # nothing polled; the order is kept
    assert observed.method().startswith("the driver's completion callbacks")
