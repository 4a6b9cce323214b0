"""The OpenCL plugin's hooks, one by one, on a real device (PoCL's CPU device in CI)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from typing import Any

import numpy as np
import pytest

import kprof
from kprof_opencl import plugin

cl = pytest.importorskip("pyopencl")

from plainqueue import plain_queue  # noqa: E402

import kprof_opencl  # noqa: E402
from kprof_opencl import clock  # noqa: E402
from kprof_opencl.queues import is_pocl_cpu  # noqa: E402

START, END, QUEUED = cl.profiling_info.START, cl.profiling_info.END, cl.profiling_info.QUEUED


@pytest.fixture(scope="module")
def backend() -> kprof.plugin.Backend:
    return kprof.get_backend("opencl")


@pytest.fixture(scope="module")
def queue() -> Any:
    dev = kprof_opencl.default_device()
    if dev is None:
        pytest.skip("OpenCL finds no device here (pip install pocl-binary-distribution)")
    return kprof_opencl.profiling_queue(dev)


@pytest.fixture(scope="module")
def spin(queue: Any) -> Any:
    prg = cl.Program(
        queue.context,
        """
        __kernel void spin(__global float *x, int n) {
            size_t i = get_global_id(0);
            float v = x[i];
            for (int k = 0; k < n; ++k) v = v * 0.999f + 0.5f;
            x[i] = v;
        }""",
    ).build()
    k = cl.Kernel(prg, "spin")
    k.set_scalar_arg_dtypes([None, np.int32])
    x = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, 4 * 1024)
    k(queue, (1024,), None, x, np.int32(1))
    queue.finish()

    def launch(q: Any = queue, n: int = 1) -> Any:
        return k(q, (1024,), None, x, np.int32(n))

    return launch


def test_importing_the_plugin_does_not_import_pyopencl() -> None:
    code = textwrap.dedent("""
        import sys
        import kprof_opencl, kprof_opencl.plugin, kprof_opencl.capture, kprof_opencl.clock
        import kprof
        assert "pyopencl" not in sys.modules, "pyopencl was imported"
        b = kprof.get_backend("opencl")
        assert b.current_queue(b) is None
        assert b.record_timestamp(b) is None
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_describe_lists_pyopencl_and_its_devices(backend: kprof.plugin.Backend, queue: Any) -> None:
    info = plugin.describe_backend(backend)
    assert info.status == "available"
    assert info.library == "pyopencl" and info.library_version == cl.VERSION_TEXT
    assert info.timestamps
    if is_pocl_cpu(queue.device):
        assert any(d.startswith("PoCL pthread") or d.startswith("PoCL cpu") for d in info.devices)


def test_describe_without_pyopencl_says_not_installed(
    backend: kprof.plugin.Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pyopencl", None)  # makes `import pyopencl` fail
    info = plugin.describe_backend(backend)
    assert info.status == "not installed"
    assert "kprof[opencl]" in (info.detail or "")


def test_describe_without_platforms_says_no_device(
    backend: kprof.plugin.Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_platforms() -> list[Any]:
        raise cl.LogicError("clGetPlatformIDs failed: PLATFORM_NOT_FOUND_KHR")

    monkeypatch.setattr(cl, "get_platforms", no_platforms)
    info = plugin.describe_backend(backend)
    assert info.status == "no device"
    assert "PLATFORM_NOT_FOUND_KHR" in (info.detail or "")


def test_record_timestamp_needs_a_current_profiling_queue(
    backend: kprof.plugin.Backend, queue: Any
) -> None:
    with kprof_opencl.use_queue(None):  # this thread has no current queue
        assert plugin.record_timestamp(backend) is None
        assert plugin.current_queue(backend) is None
    plain = plain_queue(queue.context, queue.device)
    with pytest.warns(kprof_opencl.ProfilingDisabledWarning), kprof_opencl.use_queue(plain):
        assert plugin.record_timestamp(backend) is None
    before = plugin.current_queue(backend)
    with kprof_opencl.use_queue(queue):
        assert plugin.current_queue(backend) is queue
        ev = plugin.record_timestamp(backend)
        assert isinstance(ev, cl.Event)
        assert ev.command_type == cl.command_type.MARKER
    assert plugin.current_queue(backend) is before  # restored on exit
    ev.wait()


def test_the_range_hooks_compiled_twins_answer_as_the_hooks(
    backend: kprof.plugin.Backend, queue: Any
) -> None:
    """kprof's compiled range calls ``kprof_compiled`` (C) instead of the Python hooks: the
    same answers in every case (none where the compiled parts are not loaded)."""
    from kprof_core.low_level import native

    cq = getattr(plugin.current_queue, "kprof_compiled", None)
    rt = getattr(plugin.record_timestamp, "kprof_compiled", None)
    if native.compiled() is None:
        assert cq is None and rt is None
        pytest.skip("pure Python: the hooks have no compiled twins")
    assert cq is not None and rt is not None
    with kprof_opencl.use_queue(None):
        assert cq(backend) is None and rt(backend) is None
    plain = plain_queue(queue.context, queue.device)
    with pytest.warns(kprof_opencl.ProfilingDisabledWarning), kprof_opencl.use_queue(plain):
        assert rt(backend) is None  # no profiling: the Python hook's answer (outside a profile)
    with kprof_opencl.use_queue(queue):
        assert cq(backend) is queue
        ev = rt(backend)
        assert type(ev) is cl.Event and ev.command_type == cl.command_type.MARKER
    ev.wait()


def test_markers_bracket_the_work_between_them(
    backend: kprof.plugin.Backend, queue: Any, spin: Any
) -> None:
    with kprof_opencl.use_queue(queue):
        a = plugin.record_timestamp(backend)
        work = spin(n=200)
        b = plugin.record_timestamp(backend)
    queue.finish()
    assert plugin.timestamp_done(backend, b) is True
    span = plugin.elapsed_time(backend, a, b)
    assert span == b.get_profiling_info(END) - a.get_profiling_info(START)
    assert span >= work.get_profiling_info(END) - work.get_profiling_info(START)


def test_a_launch_event_as_both_tokens_is_its_duration(
    backend: kprof.plugin.Backend, queue: Any, spin: Any
) -> None:
    slow = spin(n=20000)
    assert plugin.timestamp_done(backend, slow) is False  # still running: no profiling info yet
    queue.finish()
    assert plugin.timestamp_done(backend, slow) is True
    d = plugin.elapsed_time(backend, slow, slow)
    assert isinstance(d, int) and d == slow.get_profiling_info(END) - slow.get_profiling_info(START)
    assert d > 0


def test_elapsed_time_of_an_unfinished_event_says_why(
    backend: kprof.plugin.Backend, queue: Any, spin: Any
) -> None:
    slow = spin(n=20000)
    with pytest.raises(RuntimeError, match="status"):
        plugin.elapsed_time(backend, slow, slow)
    queue.finish()


def test_queues_are_numbered_in_order_of_first_sight(
    backend: kprof.plugin.Backend, queue: Any
) -> None:
    q1 = kprof_opencl.profiling_queue(queue)
    q2 = kprof_opencl.profiling_queue(queue)
    i2 = plugin.queue_info(backend, q2)
    i1 = plugin.queue_info(backend, q1)
    n2, n1 = (int(i.label.split()[-1]) for i in (i2, i1))
    assert n1 == n2 + 1
    assert plugin.queue_info(backend, q2).label == i2.label  # stable
    assert i1.device == queue.device.name.strip()
    assert i1.device_key == i2.device_key == plugin.queue_info(backend, queue).device_key


def test_synchronize_finishes_the_queue(
    backend: kprof.plugin.Backend, queue: Any, spin: Any
) -> None:
    ev = spin(n=20000)
    plugin.synchronize(backend, queue)
    assert ev.command_execution_status == cl.command_execution_status.COMPLETE


def test_align_clock_checks_the_launch_window(
    backend: kprof.plugin.Backend, queue: Any, spin: Any
) -> None:
    if not is_pocl_cpu(queue.device):
        pytest.skip("CLOCK_MONOTONIC_RAW alignment is PoCL's")
    h0 = time.perf_counter_ns()
    ev = spin()
    h1 = time.perf_counter_ns()
    ev.wait()
    a = plugin.align_clock(backend, ev, (h0, h1))
    assert a is not None and "CLOCK_MONOTONIC_RAW" in a.method
    queued_on_host = a.host_ns - (ev.get_profiling_info(START) - ev.get_profiling_info(QUEUED))
    assert h0 - a.error_ns <= queued_on_host <= h1 + a.error_ns
    # A window the event was not queued in: no correlation can be claimed.
    assert clock.align(ev, (h1 + 10_000_000, h1 + 20_000_000), None) is None


class _FakeEvent:
    """A stand-in for an OpenCL event whose status the test sets (1 RUNNING, 0 COMPLETE)."""

    def __init__(self, status: int = 1) -> None:
        self.status = status

    def get_info(self, param: int) -> int:
        return self.status


def _wait_stamped(*tokens: Any) -> None:
    deadline = time.monotonic() + 30
    while any(t.end < 0 for t in tokens):
        assert time.monotonic() < deadline, "the watcher never stamped the tokens"
        time.sleep(0.001)


def test_the_watcher_stamps_in_queue_order_after_each_launch_and_the_previous_end(
    backend: kprof.plugin.Backend,
) -> None:
    from kprof_opencl.observed import Watcher

    class InOrder:
        properties = 0

    w, q = Watcher(), InOrder()
    first, second = _FakeEvent(), _FakeEvent()
    t1 = w.track(first, q, launched=10)
    t2 = w.track(second, q, launched=20)
    second.status = 0  # done first, but in order it waits for the first
    time.sleep(0.01)
    assert (t1.end, t2.end) == (-1, -1)
    assert not backend.timestamp_done(backend, t2)
    first.status = 0
    _wait_stamped(t1, t2)
    assert backend.timestamp_done(backend, t1) and backend.timestamp_done(backend, t2)
    b1, e1 = backend.device_times(backend, t1, t1)
    b2, e2 = backend.device_times(backend, t2, t2)
    assert b1 == 10 and e1 > b1
    assert b2 == max(20, e1) and e2 >= b2
    assert t1.event is None and t2.event is None  # events are let go once stamped


def test_an_observed_command_that_failed_says_so(backend: kprof.plugin.Backend) -> None:
    from kprof_opencl.observed import Watcher

    class InOrder:
        properties = 0

    tok = Watcher().track(_FakeEvent(-5), InOrder(), launched=0)
    _wait_stamped(tok)
    assert backend.timestamp_done(backend, tok)  # errors count as done
    with pytest.raises(RuntimeError, match="status -5"):
        backend.device_times(backend, tok, tok)


def test_on_an_out_of_order_queue_work_is_bounded_by_its_launch_alone(
    backend: kprof.plugin.Backend,
) -> None:
    from kprof_opencl.observed import Watcher

    class OutOfOrder:
        properties = 1  # CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE

    w, q = Watcher(), OutOfOrder()
    first, second = _FakeEvent(0), _FakeEvent()
    t1 = w.track(first, q, launched=10)
    t2 = w.track(second, q, launched=20)
    _wait_stamped(t1)
    second.status = 0
    _wait_stamped(t2)
    assert (t1.begin, t2.begin) == (10, 20)
    # Idle queues are forgotten by the watcher, and listed again by their next launch.
    third = w.track(_FakeEvent(0), q, launched=30)
    _wait_stamped(third)
    assert third.begin == 30
