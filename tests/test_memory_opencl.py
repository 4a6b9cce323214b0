"""Device memory on PoCL, real (issue 23): PyOpenCL buffers and ``pyopencl.array``
allocations made and released in a profile give exact peaks and live-at-end."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest

import kprof
from kprof_core.low_level import native

cl = pytest.importorskip("pyopencl")
cla = pytest.importorskip("pyopencl.array")
np = pytest.importorskip("numpy")


@pytest.fixture(scope="module")
def ctx() -> Any:
    import kprof_opencl

    dev = kprof_opencl.default_device()
    if dev is None:
        pytest.fail("OpenCL finds no device here (pip install pocl-binary-distribution)")
    return cl.Context([dev])


@pytest.fixture(params=[True, False], ids=["compiled", "pure"])
def path(request: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("KPROF_OPENCL_MEMORY", "1")  # off by default (see the last test)
    native.use_compiled(request.param)
    try:
        yield
    finally:
        native.use_compiled(True)


def test_buffers_and_arrays_made_and_released(ctx: Any, path: None) -> None:
    mf = cl.mem_flags
    q = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
    dev = "OpenCL " + " + ".join(d.name.strip() for d in ctx.devices)
    before = cl.Buffer(ctx, mf.READ_WRITE, 64)  # made before: its release is not counted
    with kprof.profile(backends="opencl") as p:
        a = cl.Buffer(ctx, mf.READ_WRITE, 1000)
        x = cla.zeros(q, 1024, np.float32)  # 4096 bytes through pyopencl.Buffer
        h = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=np.zeros(10, np.float32))
        a.release()
        del x
        gc.collect()  # the array's buffer is freed when the object goes
        before.release()
        q.finish()
    m = p.memory
    assert [(e.kind, e.nbytes) for e in m.events] == [
        ("alloc", 1000),
        ("alloc", 4096),
        ("alloc", 40),
        ("free", 1000),
        ("free", 4096),
    ]
    assert m.labels == [dev] and m.peak == {dev: 5136} and m.unmatched_frees == 0
    assert [(e.device, e.nbytes, e.address) for e in m.live_at_end] == [(dev, 40, h.int_ptr)]
    assert isinstance(h, cl.Buffer) and cl.Buffer is cl._cl.Buffer  # put back after
    h.release()  # after the profile: nothing recorded, nothing raised


def test_a_buffer_released_twice_counts_once(ctx: Any, path: None) -> None:
    with kprof.profile(backends="opencl") as p:
        b = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 256)
        b.release()
        del b
        gc.collect()
    assert [(e.kind, e.nbytes) for e in p.memory.events] == [("alloc", 256), ("free", 256)]


def test_buffers_are_not_watched_unless_asked(ctx: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """By default a profile leaves ``pyopencl.Buffer`` alone: a buffer made before it is still
    an instance inside it (``pyopencl.capture_call`` asks), and no memory is reported."""
    monkeypatch.delenv("KPROF_OPENCL_MEMORY", raising=False)
    before = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 64)
    base = cl.Buffer
    with kprof.profile(backends=["opencl"]) as p:
        assert cl.Buffer is base and isinstance(before, cl.Buffer)
        inside = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 128)
        inside.release()
    assert p.memory.events == [] and p.memory.peak == {}
    monkeypatch.setenv("KPROF_OPENCL_MEMORY", "1")
    with kprof.profile(backends=["opencl"]) as p:
        assert cl.Buffer is not base and not isinstance(before, cl.Buffer)  # the cost of asking
        cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 128).release()
    assert [e.kind for e in p.memory.events] == ["alloc", "free"]
    before.release()


def _svm_device(ctx: Any) -> None:
    caps = getattr(ctx.devices[0], "svm_capabilities", 0)
    if not hasattr(cl, "SVMAllocation") or not caps:
        pytest.skip("this OpenCL device (or PyOpenCL's headers) has no shared virtual memory")


def test_svm_allocations_made_and_released(ctx: Any, path: None) -> None:
    _svm_device(ctx)
    dev = "OpenCL " + " + ".join(d.name.strip() for d in ctx.devices)
    q = cl.CommandQueue(ctx)
    rw = cl.svm_mem_flags.READ_WRITE
    with kprof.profile(backends="opencl") as p:
        a = cl.SVMAllocation(ctx, 4000, 0, rw)
        a_ptr = a.svm_ptr  # 0 once released
        x = cl.svm_empty(ctx, rw, (256,), np.float32)  # 1024 bytes, an ndarray over SVM
        b = cl.SVMAllocation(ctx, 96, 0, rw)
        a.release()
        b.enqueue_release(q)
        del x
        gc.collect()  # the array's allocation is freed when the array goes
        kept = cl.csvm_empty(ctx, (8,), np.float64)  # 64 bytes, live at the end
        q.finish()
    m = p.memory
    assert [(e.kind, e.nbytes) for e in m.events] == [
        ("alloc", 4000),
        ("alloc", 1024),
        ("alloc", 96),
        ("free", 4000),
        ("free", 96),
        ("free", 1024),
        ("alloc", 64),
    ]
    assert m.events[0].address == a_ptr and m.labels == [dev]
    assert m.peak == {dev: 5120} and m.unmatched_frees == 0
    assert [(e.nbytes, e.address) for e in m.live_at_end] == [(64, kept.base.svm_ptr)]
    assert cl.SVMAllocation is cl._cl.SVMAllocation  # put back after
    del kept


def test_opencl_allocations_keep_their_sites(ctx: Any, path: None) -> None:
    """``profile(sites=True)``: a buffer's and an SVM allocation's site is the user's line."""
    _svm_device(ctx)
    with kprof.profile(backends="opencl", sites=True) as p:
        buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 128)  # site: buffer
        svm = cl.svm_empty(ctx, cl.svm_mem_flags.READ_WRITE, 16, np.uint8)  # site: svm
    with open(__file__) as f:
        lines = [
            i + 1 for i, ln in enumerate(f) if ln.endswith(("# site: buffer\n", "# site: svm\n"))
        ]
    name = "test_opencl_allocations_keep_their_sites"
    assert [(e.nbytes, e.site) for e in p.memory.events] == [
        (128, f"test_memory_opencl.py:{lines[0]} {name}"),
        (16, f"test_memory_opencl.py:{lines[1]} {name}"),
    ]
    buf.release()
    del svm
