"""The OpenCL backend on a real device (PoCL's CPU device in CI): capture, timing, attribution."""

from __future__ import annotations

import io
import threading
import uuid
import warnings
from collections import Counter
from typing import Any

import numpy as np
import pytest

import kprof

cl = pytest.importorskip("pyopencl")
cla = pytest.importorskip("pyopencl.array")

from plainqueue import plain_queue  # noqa: E402

import kprof_opencl  # noqa: E402
from kprof_opencl import capture as ocl_capture  # noqa: E402
from kprof_opencl import observed  # noqa: E402
from kprof_opencl.queues import is_pocl_cpu  # noqa: E402

QUEUED, SUBMIT, START, END = (
    cl.profiling_info.QUEUED,
    cl.profiling_info.SUBMIT,
    cl.profiling_info.START,
    cl.profiling_info.END,
)
COMPLETE = cl.command_execution_status.COMPLETE

SOURCE = """
__kernel void scale(__global float *x) { x[get_global_id(0)] *= 2.0f; }
__kernel void spin(__global float *x, int n) {
    size_t i = get_global_id(0);
    float v = x[i];
    for (int k = 0; k < n; ++k) v = v * 0.999f + 0.5f;
    x[i] = v;
}
"""


def _device() -> Any:
    dev = kprof_opencl.default_device()
    if dev is None:
        pytest.skip("OpenCL finds no device here (pip install pocl-binary-distribution)")
    return dev


@pytest.fixture(scope="module")
def queue() -> Any:
    return kprof_opencl.profiling_queue(_device())


@pytest.fixture(scope="module")
def program(queue: Any) -> Any:
    prg = cl.Program(queue.context, SOURCE).build()
    x = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, 4 * 64)
    # First launches compile (PoCL does it on the device side): keep that out of most tests.
    prg.scale(queue, (64,), None, x)
    spin = cl.Kernel(prg, "spin")
    spin.set_scalar_arg_dtypes([None, np.int32])
    spin(queue, (64,), None, x, np.int32(1))
    queue.finish()
    return prg


def profile() -> kprof.profile:
    return kprof.profile(backends=["opencl"])


def own_duration(ev: Any) -> int:
    return int(ev.get_profiling_info(END) - ev.get_profiling_info(START))


def test_kernels_are_named_counted_and_timed_by_their_own_events(queue: Any, program: Any) -> None:
    x = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, 4 * 256)
    scale = cl.Kernel(program, "scale")
    events = []
    with profile() as p:
        for _ in range(5):
            events.append(
                scale(queue, (256,), None, x)
            )  # Kernel.__call__ → _cl.enqueue_nd_range_kernel
        for _ in range(2):  # what loopy-generated code calls
            events.append(cl.enqueue_nd_range_kernel(queue, scale, (256,), None))
    rows = [r for r in p.kernels if r.kind == "kernel"]
    assert [r.name for r in rows] == ["scale"] * 7
    assert [r.duration_ns for r in rows] == [own_duration(ev) for ev in events]
    assert all(not r.host_timed and r.error is None for r in rows)
    assert {r.queue for r in rows} == {queue._kprof_label}
    assert {r.device for r in rows} == {queue.device.name.strip()}
    # The host side: one launch row per call, bracketing the native enqueue only.
    assert len(p.launches) == 7


def test_copies_are_named_and_sized(queue: Any) -> None:
    ctx = queue.context
    host = np.arange(1000, dtype=np.float32)
    back = np.empty_like(host)
    a = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, host.nbytes)
    b = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, host.nbytes)
    events = []
    with profile() as p:
        events.append(cl.enqueue_copy(queue, a, host))  # host → device
        events.append(cl.enqueue_copy(queue, b, a, byte_count=400))  # device → device
        events.append(cl.enqueue_copy(queue, b, a))  # device → device, whole buffer
        events.append(cl.enqueue_fill_buffer(queue, b, np.float32(0), 0, 800))
        events.append(cl.enqueue_copy(queue, back, a))  # device → host (blocking)
        events.append(
            cl.enqueue_copy(
                queue, a, host, buffer_origin=(0, 0), host_origin=(0, 0), region=(64, 3)
            )
        )  # rectangular host → device
    got = [(r.name, r.nbytes, r.kind) for r in p.kernels]
    assert got == [
        ("[copy host to device]", 4000, "copy"),
        ("[copy device to device]", 400, "copy"),
        ("[copy device to device]", 4000, "copy"),
        ("[fill device memory]", 800, "copy"),
        ("[copy device to host]", 4000, "copy"),
        ("[copy host to device]", 64 * 3, "copy"),
    ]
    assert [r.duration_ns for r in p.kernels] == [own_duration(ev) for ev in events]
    np.testing.assert_array_equal(back, host)
    summary = p.summary()
    assert summary.device_row("[copy device to device]").calls == 2


def test_image_copies_are_sized_in_bytes(queue: Any) -> None:
    if not queue.device.image_support:
        pytest.skip("the device has no image support")
    fmt = cl.ImageFormat(cl.channel_order.RGBA, cl.channel_type.FLOAT)
    make = getattr(cl, "create_image", cl.Image)
    img = make(queue.context, cl.mem_flags.READ_WRITE, fmt, shape=(8, 4))
    pixels = np.ones((4, 8, 4), dtype=np.float32)
    out = np.empty_like(pixels)
    with profile() as p:
        cl.enqueue_copy(queue, img, pixels, origin=(0, 0), region=(8, 4))
        cl.enqueue_copy(queue, out, img, origin=(0, 0), region=(8, 4))
    assert [(r.name, r.nbytes) for r in p.kernels] == [
        ("[copy host to device]", 8 * 4 * 16),
        ("[copy device to host]", 8 * 4 * 16),
    ]


def test_shared_virtual_memory_copies_and_fills_are_captured(queue: Any) -> None:
    if not getattr(queue.device, "svm_capabilities", 0):
        pytest.skip("the device has no shared virtual memory")
    host = np.arange(256, dtype=np.float32)
    svm = cl.SVMAllocation(queue.context, host.nbytes, 0, 0)
    with profile() as p:
        cl.enqueue_copy(queue, svm, host)  # → _cl._enqueue_svm_memcpy
        cl.enqueue_copy(queue, svm, host, byte_count=100)
        cl.enqueue_svm_memfill(queue, svm, np.float32(1))  # → _cl._enqueue_svm_memfill
        queue.finish()
    assert [(r.name, r.nbytes) for r in p.kernels] == [
        ("[copy shared virtual memory]", host.nbytes),
        ("[copy shared virtual memory]", 100),
        ("[fill device memory]", host.nbytes),
    ]


def test_pyopencl_array_operations_are_captured(queue: Any) -> None:
    host = np.arange(2048, dtype=np.float32)
    with profile() as p:
        a = cla.to_device(queue, host)  # enqueue_copy → _cl._enqueue_write_buffer
        b = a * 3 + 1  # elementwise kernels → Kernel.__call__
        c = b.copy()  # _cl._enqueue_copy_buffer
        d = cla.zeros(queue, 100, np.float32)  # enqueue_fill → _cl._enqueue_fill_buffer
        got = c.get()  # _cl._enqueue_read_buffer
    np.testing.assert_allclose(got, host * 3 + 1)
    assert not d.get().any()
    kinds = Counter((r.kind, r.name) for r in p.kernels if r.kind == "copy")
    assert kinds[("copy", "[copy host to device]")] == 1
    assert kinds[("copy", "[copy device to device]")] == 1
    assert kinds[("copy", "[copy device to host]")] == 1
    assert kinds[("copy", "[fill device memory]")] == 1
    kernels = [r for r in p.kernels if r.kind == "kernel"]
    assert len(kernels) >= 1  # the elementwise operation(s)
    assert all(r.name and not r.name.startswith("<") for r in kernels)
    assert all(not r.host_timed and r.error is None for r in p.kernels)


def test_launches_do_not_synchronize_the_host(queue: Any, program: Any) -> None:
    x = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, 4 * 4096)
    spin = cl.Kernel(program, "spin")
    spin.set_scalar_arg_dtypes([None, np.int32])
    n = 40
    with profile() as p:
        events = [spin(queue, (4096,), None, x, np.int32(2000)) for _ in range(n)]
        # Right after the loop, work is still queued: nobody waited for it per launch.
        incomplete = sum(ev.command_execution_status != COMPLETE for ev in events)
    assert incomplete > 0
    assert len(p.kernels) == n
    assert [r.duration_ns for r in p.kernels] == [own_duration(ev) for ev in events]


def test_first_launch_compilation_is_not_device_time(queue: Any) -> None:
    # A source PoCL has never seen, so its kernel cache cannot hide the compilation.
    src = f"__kernel void fresh(__global float *x) {{ x[get_global_id(0)] += {uuid.uuid4().int % 997}.0f; }}"
    fresh = cl.Kernel(cl.Program(queue.context, src).build(), "fresh")
    x = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, 4 * 64)
    with profile() as p:
        first = fresh(queue, (64,), None, x)
        second = fresh(queue, (64,), None, x)
    queue.finish()
    compile_gap = first.get_profiling_info(START) - first.get_profiling_info(SUBMIT)
    steady_gap = second.get_profiling_info(START) - second.get_profiling_info(SUBMIT)
    d_first, d_second = (r.duration_ns for r in p.kernels)
    assert d_first == own_duration(first) and d_second == own_duration(second)
    if is_pocl_cpu(queue.device):
        # PoCL compiles for the device between submit and start: not in START..END.
        assert compile_gap > 10 * d_first
        assert compile_gap > 10 * steady_gap


def test_queue_without_profiling_is_observed_without_waiting_and_says_so_once(
    queue: Any, program: Any
) -> None:
    plain = plain_queue(queue.context, queue.device)  # made before kprof: no profiling
    x = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, 4 * 64)
    host = np.zeros(64, dtype=np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with profile() as p:
            for _ in range(3):
                program.scale(plain, (64,), None, x)
            cl.enqueue_copy(plain, host, x)
    ours = [w for w in caught if issubclass(w.category, kprof_opencl.ProfilingDisabledWarning)]
    assert len(ours) == 1
    said = str(ours[0].message)
    assert f"the OpenCL {p.kernels[0].queue} on " in said
    assert "import kprof before creating queues" in said
    assert ours[0].filename == __file__  # it points at the user's launch, not at kprof
    rows = p.kernels
    assert [(r.name, r.host_timed, r.approximate) for r in rows] == [("scale", False, True)] * 3 + [
        ("[copy device to host]", False, True)
    ]
    assert all(r.error is None for r in rows)
    # In queue order: each began after its launch and after the previous one ended.
    for prev, r in zip([None, *rows], rows):
        assert r.start_ns >= r.launch_start_ns and r.duration_ns >= 0
        if prev is not None:
            assert r.start_ns >= prev.end_ns
    text = p.report()
    assert "scale ~" in text and "~ approximate" in text and "*" not in text
    # The report says how these 4 commands were observed, and only that way.
    (note,) = [n for n in p.meta["notes"] if "without profiling" in n]
    if observed.method().startswith("the driver's"):
        assert "4 by the driver's completion callbacks" in note and "polling" not in note
    else:
        assert "4 by kprof's watcher thread polling" in note and "callbacks" not in note
    assert "! " + note in text
    with profile() as exact:  # nothing observed: no note
        program.scale(queue, (64,), None, x)
    assert not [n for n in exact.meta.get("notes", []) if "without profiling" in n]
    assert text.startswith(
        f"Profiled {kprof.format_time(p.span_ns)}, recording 0 ranges, 3 kernels and 1 copy."
    )
    data = p.to_json()
    assert data is not None and [r["approximate"] for r in data["device"]] == [True] * 4
    trace = io.StringIO()
    p.export_chrome_trace(trace)
    assert trace.getvalue().count('"approximate":true') == 4


def test_a_range_on_a_queue_without_profiling_is_observed_around_its_work(
    queue: Any, program: Any
) -> None:
    plain = plain_queue(queue.context, queue.device)
    x = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, 4 * 64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", kprof_opencl.ProfilingDisabledWarning)
        with profile() as p, kprof_opencl.use_queue(plain), kprof.range("step"):
            for _ in range(3):
                program.scale(plain, (64,), None, x)
    (step,) = p.device_ranges
    work = [r for r in p.kernels if r.kind == "kernel"]
    assert len(work) == 3
    assert step.approximate and not step.host_timed and step.error is None
    assert step.start_ns <= work[0].start_ns and step.end_ns >= work[-1].end_ns
    assert "step ~" in p.report()


def test_synchronize_true_keeps_host_timing_on_a_queue_without_profiling(
    queue: Any, program: Any
) -> None:
    plain = plain_queue(queue.context, queue.device)
    x = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, 4 * 64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", kprof_opencl.ProfilingDisabledWarning)
        with kprof.profile(backends=["opencl"], synchronize=True) as p:
            program.scale(plain, (64,), None, x)
    assert [(r.host_timed, r.approximate) for r in p.kernels] == [(True, False)]
    assert "synchronizing after each launch" in p.report()


def _gated_launch(queue: Any, program: Any, **options: Any) -> tuple[Any, list[bool]]:
    """Launch a kernel that waits on a UserEvent inside a profile; the gate is set on the next
    line, as a program would (a safety timer sets it if kprof blocks the launch meanwhile)."""
    x = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, 4 * 64)
    gate = cl.UserEvent(queue.context)
    opened_by_timer: list[bool] = []

    def safety() -> None:
        opened_by_timer.append(True)
        gate.set_status(COMPLETE)

    timer = threading.Timer(20, safety)
    timer.start()
    try:
        with profile_with(**options) as p:
            program.scale(queue, (64,), None, x, wait_for=[gate])
            returned_before_the_gate = not opened_by_timer
            gate.set_status(COMPLETE)
            program.scale(queue, (64,), None, x)
    finally:
        timer.cancel()
    return p, [returned_before_the_gate]


def profile_with(**options: Any) -> kprof.profile:
    return kprof.profile(backends=["opencl"], **options)


def test_a_launch_gated_on_a_user_event_returns_on_a_queue_without_profiling(
    queue: Any, program: Any
) -> None:
    plain = plain_queue(queue.context, queue.device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", kprof_opencl.ProfilingDisabledWarning)
        p, (returned,) = _gated_launch(plain, program)
    assert returned
    assert [(r.name, r.approximate, r.error) for r in p.kernels] == [("scale", True, None)] * 2


def test_a_launch_gated_on_a_user_event_returns_on_a_profiling_queue(
    queue: Any, program: Any
) -> None:
    p, (returned,) = _gated_launch(queue, program)
    assert returned
    assert [(r.name, r.approximate, r.error) for r in p.kernels] == [("scale", False, None)] * 2


def test_synchronize_waits_at_most_the_timeout_for_a_gated_launch(queue: Any, program: Any) -> None:
    plain = plain_queue(queue.context, queue.device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        p, (returned,) = _gated_launch(plain, program, synchronize=True, timeout=0.3)
    assert returned  # after 0.3 s, not when the safety timer opened the gate
    assert any("gave up waiting" in str(w.message) for w in caught)
    assert [r.host_timed for r in p.kernels] == [True, True]


def kernels_hooked() -> bool:
    """Whether the running profile's capture left PyOpenCL's kernel entry to the hook."""
    from kprof_core.host.discovery import registry

    return bool(registry.get("opencl").state.get("kernels_hooked"))


def test_patches_are_restored_exactly_after_an_exception(queue: Any, program: Any) -> None:
    targets = ocl_capture.patch_targets()
    names = {name for _, name in targets}
    assert {
        "enqueue_nd_range_kernel",
        "_enqueue_read_buffer",
        "_enqueue_write_buffer",
        "_enqueue_copy_buffer",
        "_enqueue_fill_buffer",
    } <= names
    assert any(owner is cl for owner, name in targets if name == "enqueue_nd_range_kernel")
    before = [(owner, name, getattr(owner, name)) for owner, name in targets]
    with pytest.raises(ZeroDivisionError), profile():
        # Where the dispatch-table hook records every kernel launch, the kernel entry is left.
        left = {"enqueue_nd_range_kernel"} if kernels_hooked() else set()
        for owner, name, original in before:
            if name in left:
                assert getattr(owner, name) is original, f"{owner.__name__}.{name} is patched"
                continue
            assert getattr(owner, name) is not original, f"{owner.__name__}.{name} is not patched"
        program.scale(queue, (64,), None, cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, 256))
        1 / 0  # noqa: B018
    for owner, name, original in before:
        assert getattr(owner, name) is original, f"{owner.__name__}.{name} was not restored"


def test_work_outside_the_profile_is_untouched(queue: Any, program: Any) -> None:
    x = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, 4 * 1024)
    spin = cl.Kernel(program, "spin")
    spin.set_scalar_arg_dtypes([None, np.int32])
    before = [spin(queue, (1024,), None, x, np.int32(3000)) for _ in range(5)]  # still running
    other: list[Any] = []
    with profile() as p:
        # A thread that did not inherit the profile's context is not recorded either.
        t = threading.Thread(target=lambda: other.append(program.scale(queue, (1024,), None, x)))
        t.start()
        t.join()
        mine = program.scale(queue, (1024,), None, x)
    assert [r.name for r in p.kernels] == ["scale"]
    assert p.kernels[0].duration_ns == own_duration(mine)
    assert all(ev.command_execution_status == COMPLETE for ev in before)


def test_two_queues_on_two_threads_are_separate_rows(queue: Any, program: Any) -> None:
    second = kprof_opencl.profiling_queue(queue)
    assert second.context == queue.context
    barrier = threading.Barrier(2)

    def work(q: Any, n: int) -> None:
        x = cl.Buffer(q.context, cl.mem_flags.READ_WRITE, 4 * 128)
        scale = cl.Kernel(program, "scale")
        barrier.wait()
        for _ in range(n):
            scale(q, (128,), None, x)
        q.finish()

    with profile() as p:
        threads = [
            threading.Thread(target=kprof.propagate(work), args=(q, n), name=f"worker-{n}")
            for q, n in ((queue, 3), (second, 5))
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    rows = Counter((r.queue, r.thread) for r in p.kernels)
    assert rows == {(queue._kprof_label, "worker-3"): 3, (second._kprof_label, "worker-5"): 5}
    assert queue._kprof_label != second._kprof_label
    assert len({r.device for r in p.kernels}) == 1


def test_each_thread_current_queue_is_the_one_it_last_launched_on(queue: Any, program: Any) -> None:
    # The compiled launcher writes the thread's current queue straight into its dict of the
    # thread-local, cached per thread state: each thread must still see only its own.
    second = kprof_opencl.profiling_queue(queue)
    x = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, 4 * 128)
    scale = cl.Kernel(program, "scale")  # one kernel object: its name cached after a launch
    with profile():  # the queues' flags and the kernel's name cached: the compiled case
        scale(queue, (128,), None, x)
        scale(second, (128,), None, x)
    queue.finish()
    second.finish()
    assert ocl_capture.queue_profiles(second)
    seen: dict[str, list[Any]] = {}
    go = [threading.Event() for _ in range(3)]

    def work(name: str, q: Any, step: threading.Event, done: threading.Event) -> None:
        mine = seen.setdefault(name, [kprof_opencl.current_queue()])
        scale(q, (128,), None, x)
        mine.append(kprof_opencl.current_queue())
        done.set()
        step.wait()  # the other thread launches meanwhile, on another queue
        mine.append(kprof_opencl.current_queue())

    with profile() as p:
        scale(queue, (128,), None, x)
        assert kprof_opencl.current_queue() is queue
        a = threading.Thread(target=kprof.propagate(work), args=("a", second, go[0], go[1]))
        b = threading.Thread(target=kprof.propagate(work), args=("b", queue, go[2], go[2]))
        a.start()
        go[1].wait()
        b.start()
        b.join()
        go[0].set()
        a.join()
        assert kprof_opencl.current_queue() is queue
        scale(second, (128,), None, x)
        assert kprof_opencl.current_queue() is second
        with kprof_opencl.use_queue(queue):
            assert kprof_opencl.current_queue() is queue
        assert kprof_opencl.current_queue() is second
        queue.finish()
        second.finish()
    assert seen == {"a": [None, second, second], "b": [None, queue, queue]}
    assert len(p.kernels) == 4 and not p.unresolved


def test_launches_after_the_recorder_rebinds_its_launch_path_reach_its_new_list(
    queue: Any, program: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The compiled launcher skips looking up `rec.launch` while the recorder and the count of
    # launch paths made stand: a recorder that starts over (a fork's child does, with a new
    # pending list and launch path) must get the launches that follow.
    from kprof_core.recording.recorder import Recorder

    monkeypatch.setattr(Recorder, "harvest_every", 10**9)
    monkeypatch.setattr(Recorder, "max_pending", 10**9)
    x = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, 4 * 128)
    scale = cl.Kernel(program, "scale")
    with profile():  # the queue's flag and the kernel's name cached: the compiled case
        scale(queue, (128,), None, x)
    queue.finish()
    with profile() as p:
        for _ in range(2):
            scale(queue, (128,), None, x)
        rec = kprof.plugin.active()
        assert rec is not None and rec._pending() == 2
        rec._after_fork_in_child(kprof.plugin.now())  # what a fork's child does: start over
        for _ in range(3):
            scale(queue, (128,), None, x)
        assert rec._pending() == 3 and len(rec._incoming) in (1, 3)  # a batch, or 3 entries
        queue.finish()
    assert len(p.kernels) == 3 and not p.unresolved


def test_range_is_timed_on_the_current_queue(queue: Any, program: Any) -> None:
    x = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, 4 * 256)
    with kprof_opencl.use_queue(queue), profile() as p:
        assert kprof_opencl.current_queue() is queue
        with kprof.range("step"):
            program.scale(queue, (256,), None, x)
            program.scale(queue, (256,), None, x)
    (dr,) = p.device_ranges
    k1, k2 = p.kernels
    assert dr.name == "step" and not dr.host_timed and dr.error is None
    # Markers around the range bracket the kernels enqueued inside it, on the device.
    assert dr.start_ns <= k1.start_ns and k2.end_ns <= dr.end_ns


def test_pocl_clock_alignment_places_work_after_its_launch(queue: Any, program: Any) -> None:
    if not is_pocl_cpu(queue.device):
        pytest.skip("CLOCK_MONOTONIC_RAW alignment is PoCL's")
    x = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, 4 * 256)
    with profile() as p:
        for _ in range(10):
            program.scale(queue, (256,), None, x)
    (clk,) = p.clocks.values()
    assert "CLOCK_MONOTONIC_RAW" in clk.method
    assert clk.error_ns is not None and clk.error_ns < 1_000_000
    assert clk.shift_ns <= clk.error_ns  # the mapping itself put no work before its launch
    for r in p.kernels:
        assert r.start_ns >= r.launch_start_ns
    starts = [r.start_ns for r in p.kernels]
    assert starts == sorted(starts)


def test_demo_workload_records_mul2_add_and_step() -> None:
    from kprof_core.cli.demo import run_demo

    _device()
    p = run_demo(backend="opencl", steps=3, size=4096)
    s = p.summary()
    assert s.device_row("mul2").calls == 3 and s.device_row("add").calls == 3
    assert s.host_row("step").calls == 3
    assert not any(r.host_timed for r in p.kernels)
    assert [r.name for r in p.device_ranges] == ["step"] * 3


def test_an_unknown_native_signature_gets_the_generic_wrapper(queue: Any, program: Any) -> None:
    native = cl._cl.enqueue_nd_range_kernel

    def other_native(*args: Any, **kwargs: Any) -> Any:  # no signature in its docstring
        return native(*args, **kwargs)

    wrapper = ocl_capture.kernel_wrapper(other_native, kprof.get_backend("opencl"))
    assert wrapper.__name__ == "enqueue_nd_range_kernel_any"
    scale = cl.Kernel(program, "scale")
    x = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, 4 * 64)  # kept alive: set_args doesn't
    scale.set_args(x)
    assert wrapper(queue, scale, (64,), None).wait() is None  # outside a profile: straight through
    with profile() as p:
        ev = wrapper(queue, scale, (64,), None, wait_for=None)
    assert [(r.name, r.duration_ns) for r in p.kernels] == [("scale", own_duration(ev))]
