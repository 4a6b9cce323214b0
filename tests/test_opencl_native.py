"""The OpenCL plugin's compiled parts and their Python twins: the batch reader
(``device_times_batch``) gives each event's own profiling info, up to the first event not
complete (a failed command, status < 0, ends the batch the same way: the harvest then reports
it through device_times; not exercised here, as failing commands through user events crashed
PoCL 3.0-rc2 once in a full run); the compiled kernel-launch wrapper records exactly what the
Python one does, and hands it every case but the common one."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import kprof
from kprof_core.low_level import native

cl = pytest.importorskip("pyopencl")

from plainqueue import plain_queue  # noqa: E402

import kprof_opencl  # noqa: E402
from kprof_opencl import reader  # noqa: E402

START, END = cl.profiling_info.START, cl.profiling_info.END
COMPILED = native.compiled() is not None
PATHS = [pytest.param(True, id="compiled"), pytest.param(False, id="pyopencl")]


@pytest.fixture(scope="module")
def setup() -> Any:
    dev = kprof_opencl.default_device()
    if dev is None:
        pytest.skip("OpenCL finds no device here (pip install pocl-binary-distribution)")
    q = kprof_opencl.profiling_queue(dev)
    prg = cl.Program(
        q.context, "__kernel void inc(__global float *x){ x[get_global_id(0)] += 1.0f; }"
    ).build()
    buf = cl.Buffer(q.context, cl.mem_flags.READ_WRITE, 4 * 64)
    inc = cl.Kernel(prg, "inc")
    inc(q, (64,), None, buf)
    q.finish()
    return q, inc, buf


@pytest.fixture(params=PATHS)
def compiled(request: pytest.FixtureRequest) -> Any:
    if request.param and not COMPILED:
        pytest.skip("the compiled recorder is not built here")
    native.use_compiled(request.param)
    yield request.param
    native.use_compiled(True)


def columns(got: Any) -> tuple[list[int], list[int]]:
    from array import array

    return list(array("q", got[0])), list(array("q", got[1]))


def test_the_reader_in_use_is_the_one_asked_for(compiled: bool) -> None:
    assert (reader.compiled_reader() is not None) == compiled
    assert reader.why() == ("compiled" if compiled else "PyOpenCL methods")


def test_batch_times_are_the_events_own(setup: Any, compiled: bool) -> None:
    q, inc, buf = setup
    evs = tuple(inc(q, (64,), None, buf) for _ in range(300))
    markers = tuple(cl.enqueue_marker(q) for _ in range(2))
    q.finish()
    begins, ends = columns(reader.device_times_batch(evs, evs))
    assert begins == [e.get_profiling_info(START) for e in evs]
    assert ends == [e.get_profiling_info(END) for e in evs]
    # A range: START of one token, END of another.
    begins, ends = columns(reader.device_times_batch(markers[:1], markers[1:]))
    assert (begins, ends) == (
        [markers[0].get_profiling_info(START)],
        [markers[1].get_profiling_info(END)],
    )
    assert columns(reader.device_times_batch((), ())) == ([], [])


def test_the_batch_stops_at_the_first_event_not_complete(setup: Any, compiled: bool) -> None:
    q, inc, buf = setup
    gate = cl.UserEvent(q.context)
    done = tuple(inc(q, (64,), None, buf) for _ in range(5))
    q.finish()
    held = tuple(inc(q, (64,), None, buf, wait_for=[gate]) for _ in range(3))
    evs = done + held + done
    try:
        begins, ends = columns(reader.device_times_batch(evs, evs))
        assert len(begins) == len(ends) == 5
        assert ends == [e.get_profiling_info(END) for e in done]
    finally:
        gate.set_status(cl.command_execution_status.COMPLETE)
        q.finish()
    assert len(columns(reader.device_times_batch(evs, evs))[0]) == len(evs)


def test_without_the_opencl_library_pyopencl_is_read(
    monkeypatch: pytest.MonkeyPatch, setup: Any
) -> None:
    q, inc, buf = setup
    monkeypatch.setattr(reader, "_compiled", None)
    monkeypatch.setattr(reader, "opencl_library", lambda: None)
    if COMPILED:
        assert reader.compiled_reader() is None
        assert reader.why() == "PyOpenCL methods (no OpenCL library found)"
    evs = tuple(inc(q, (64,), None, buf) for _ in range(4))
    q.finish()
    assert columns(reader.device_times_batch(evs, evs))[1] == [
        e.get_profiling_info(END) for e in evs
    ]
    monkeypatch.setattr(reader, "_compiled", None)  # found again by the next test


def test_profiles_on_both_paths_equal_the_events(setup: Any, compiled: bool) -> None:
    q, inc, buf = setup
    with kprof.profile(backends=["opencl"]) as p:
        evs = [inc(q, (64,), None, buf) for _ in range(3000)]  # several harvests
        x = np.zeros(64, np.float32)
        cl.enqueue_copy(q, x, buf)
    assert [k.duration_ns for k in p.kernels if k.kind == "kernel"] == [
        e.get_profiling_info(END) - e.get_profiling_info(START) for e in evs
    ]
    copies = [k for k in p.kernels if k.kind == "copy"]
    assert len(copies) == 1 and copies[0].nbytes == x.nbytes and copies[0].error is None
    assert all(k.launch_start_ns <= k.start_ns for k in p.kernels)


# -- the kernel-launch wrapper ------------------------------------------------------------------


def test_the_wrapper_in_use_and_its_exact_restore(setup: Any, compiled: bool) -> None:
    from kprof_core.host.discovery import registry

    native_fn = cl._cl.enqueue_nd_range_kernel
    with kprof.profile(backends=["opencl"]):
        wrapper = cl._cl.enqueue_nd_range_kernel
        if registry.get("opencl").state["kernels_hooked"]:
            # The dispatch-table hook records every kernel launch: the entry is left as it is.
            assert compiled and wrapper is native_fn
            return
        assert wrapper is not native_fn and wrapper.__wrapped__ is native_fn
        assert wrapper.__name__ == "enqueue_nd_range_kernel"
        assert (type(wrapper).__name__ == "Launcher") == compiled
    assert cl._cl.enqueue_nd_range_kernel is native_fn
    if compiled:
        # It was handed the compiled recorder's launch through kprof.plugin, and calls it.
        import kprof_opencl._clnative as clnative

        capsules = kprof.plugin.launch_capsules()
        assert capsules is not None and "_launch_capi" in repr(capsules[0])
        assert clnative.linked()


def test_an_error_of_the_native_launch_propagates_and_records_nothing(
    setup: Any, compiled: bool
) -> None:
    q, inc, buf = setup
    with kprof.profile(backends=["opencl"]) as p:
        inc(q, (64,), None, buf)
        with pytest.raises(cl.Error) as raised:
            cl.enqueue_nd_range_kernel(q, inc, (64,), (7,))  # 64 is no multiple of 7
        inc(q, (64,), None, buf)
    assert raised.value.code == cl.status_code.INVALID_WORK_GROUP_SIZE
    assert [k.name for k in p.kernels] == ["inc", "inc"]


def test_every_case_of_the_wrapper_records_the_same(setup: Any, compiled: bool) -> None:
    """A kernel not named yet, keyword arguments, a queue without profiling, a thread: the
    compiled wrapper hands these to the Python one; the records are the same either way."""
    q, _inc, buf = setup
    plain = plain_queue(q.context, q.device)
    prg = cl.Program(
        q.context, "__kernel void fresh(__global float *x){ x[get_global_id(0)] *= 0.5f; }"
    ).build()
    fresh = cl.Kernel(prg, "fresh")  # no cached name: its first launch takes the Python path
    fresh.set_args(buf)
    with kprof.profile(backends=["opencl"]) as p:
        evs = [cl.enqueue_nd_range_kernel(q, fresh, (64,), None) for _ in range(3)]
        evs.append(cl.enqueue_nd_range_kernel(q, fresh, (64,), None, wait_for=None))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the queue has no profiling (tested elsewhere)
            cl.enqueue_nd_range_kernel(plain, fresh, (64,), None)
    # The queue without profiling: observed on the host as its work completes (approximate).
    got = [(k.name, k.approximate, k.error) for k in p.kernels]
    assert got == [("fresh", False, None)] * 4 + [("fresh", True, None)]
    assert [k.duration_ns for k in p.kernels[:4]] == [
        e.get_profiling_info(END) - e.get_profiling_info(START) for e in evs
    ]
