"""OpenCL device memory through the dispatch-table hook (compiled path): transparent to the
program (``pyopencl.Buffer`` stays PyOpenCL's class), and it sees buffers made from C too.
The pure Python path cannot hook (no compiled part): it falls back to the subclass, whose
difference is asserted here so that the fallback stays known."""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
from collections.abc import Iterator
from typing import Any

import pytest

import kprof
from kprof_core.low_level import native

cl = pytest.importorskip("pyopencl")
np = pytest.importorskip("numpy")


@pytest.fixture(scope="module")
def ctx() -> Any:
    import kprof_opencl

    dev = kprof_opencl.default_device()
    if dev is None:
        pytest.fail("OpenCL finds no device here (pip install pocl-binary-distribution)")
    return cl.Context([dev])


def _hook() -> Any:
    from kprof_opencl import hook

    mod = hook.module()
    if mod is None or not any(p.table is not None for p in hook.survey()):
        pytest.skip("the dispatch-table hook cannot be installed here")
    return mod


@pytest.fixture(params=[True, False], ids=["compiled", "pure"])
def path(request: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[bool]:
    monkeypatch.setenv("KPROF_OPENCL_MEMORY", "1")
    native.use_compiled(request.param)
    try:
        yield request.param
    finally:
        native.use_compiled(True)


def _dev(ctx: Any) -> str:
    return "OpenCL " + " + ".join(d.name.strip() for d in ctx.devices)


def test_buffers_stay_pyopencl_own_class(ctx: Any, path: bool) -> None:
    """PyOpenCL's test_wrapper.py::test_int_ptr and ``isinstance`` of a buffer made before
    the profile hold inside a profile with memory on (hook); the subclass breaks both."""
    if path:
        _hook()
    before = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 64)
    with kprof.profile(backends="opencl") as p:
        b = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 256)
        same = type(cl.Buffer.from_int_ptr(b.int_ptr)) is type(b)
        kept = isinstance(before, cl.Buffer)
        b.release()
    assert (same, kept) == ((True, True) if path else (False, False))
    assert [(e.kind, e.nbytes) for e in p.memory.events] == [("alloc", 256), ("free", 256)]
    before.release()


def test_before_the_profile_sub_buffers_and_pools(ctx: Any, path: bool) -> None:
    """A buffer made before the profile and freed inside it is neither an allocation nor a
    free of it (its end was never registered); a sub-buffer is its parent's memory, counted
    once; the parent's end is when the driver destroys it (after its sub-buffer's)."""
    before = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 64)
    dev = _dev(ctx)
    with kprof.profile(backends="opencl") as p:
        before.release()
        parent = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 4096)
        sub = parent.get_sub_region(1024, 1024)
        other = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 512)
        del sub
        gc.collect()
        parent.release()
    m = p.memory
    assert [(e.kind, e.nbytes) for e in m.events] == [
        ("alloc", 4096),
        ("alloc", 512),
        ("free", 4096),
    ]
    assert m.peak == {dev: 4608} and m.unmatched_frees == 0
    assert [(e.nbytes, e.address) for e in m.live_at_end] == [(512, other.int_ptr)]
    other.release()


def test_buffers_made_from_c_are_seen(ctx: Any, path: bool) -> None:
    """A buffer made and released through the system's loader (as a C library would):
    seen by the hook, never by the subclass."""
    if path:
        _hook()
    found = ctypes.util.find_library("OpenCL")
    if found is None:
        pytest.skip("no system libOpenCL to call as a C library would")
    lib = ctypes.CDLL(found)
    lib.clCreateBuffer.restype = ctypes.c_void_p
    lib.clCreateBuffer.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint64,
        ctypes.c_size_t,
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_int32),
    ]
    lib.clReleaseMemObject.argtypes = [ctypes.c_void_p]
    err = ctypes.c_int32(0)
    with kprof.profile(backends="opencl") as p:
        mem = lib.clCreateBuffer(ctx.int_ptr, cl.mem_flags.READ_WRITE, 3000, None, err)
        assert err.value == 0 and mem
        assert lib.clReleaseMemObject(mem) == 0
    got = [(e.kind, e.nbytes, e.address) for e in p.memory.events]
    assert got == ([("alloc", 3000, mem), ("free", 3000, mem)] if path else [])


def test_buffers_made_with_properties_are_seen(ctx: Any, path: bool) -> None:
    """OpenCL 3.0's clCreateBufferWithProperties (what C code written for 3.0 calls) is counted
    as clCreateBuffer is, through the hook."""
    if path:
        _hook()
    found = ctypes.util.find_library("OpenCL")
    if found is None:
        pytest.skip("no system libOpenCL to call as a C library would")
    lib = ctypes.CDLL(found)
    if not hasattr(lib, "clCreateBufferWithProperties"):
        pytest.skip("the system's OpenCL loader predates OpenCL 3.0")
    if not ctx.devices[0].platform.version.startswith("OpenCL 3."):
        pytest.skip("the platform predates OpenCL 3.0")
    lib.clCreateBufferWithProperties.restype = ctypes.c_void_p
    lib.clCreateBufferWithProperties.argtypes = [
        ctypes.c_void_p,
        ctypes.c_void_p,  # const cl_mem_properties *: none
        ctypes.c_uint64,
        ctypes.c_size_t,
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_int32),
    ]
    lib.clReleaseMemObject.argtypes = [ctypes.c_void_p]
    err = ctypes.c_int32(0)
    with kprof.profile(backends="opencl") as p:
        mem = lib.clCreateBufferWithProperties(
            ctx.int_ptr, None, cl.mem_flags.READ_WRITE, 5000, None, err
        )
        assert err.value == 0 and mem
        assert lib.clReleaseMemObject(mem) == 0
    got = [(e.kind, e.nbytes, e.address) for e in p.memory.events]
    assert got == ([("alloc", 5000, mem), ("free", 5000, mem)] if path else [])


def test_images_are_counted_by_their_driver_size(ctx: Any, path: bool) -> None:
    """An image (clCreateImage) is an allocation of the size its driver reports, through the
    hook; the Python path (``pyopencl.Buffer`` replaced) does not see images."""
    if path:
        _hook()
    if not ctx.devices[0].image_support:
        pytest.skip("the device has no images")
    fmt = cl.ImageFormat(cl.channel_order.RGBA, cl.channel_type.FLOAT)
    with kprof.profile(backends="opencl") as p:
        img = cl.create_image(ctx, cl.mem_flags.READ_ONLY, fmt, shape=(16, 8))
        img.release()
    got = [(e.kind, e.nbytes) for e in p.memory.events]
    assert got == ([("alloc", 16 * 8 * 16), ("free", 16 * 8 * 16)] if path else [])


def test_a_memory_pool_is_counted_by_its_driver_blocks(ctx: Any, path: bool) -> None:
    """``pyopencl.tools.MemoryPool`` is counted as the driver sees it: the blocks it asks the
    driver for (each of its size bin), not the pieces it hands out; a piece given back to the
    pool and handed out again is neither a free nor an allocation."""
    if path:
        _hook()
    import pyopencl.tools as clt

    queue = cl.CommandQueue(ctx)
    pool = clt.MemoryPool(clt.ImmediateAllocator(queue))
    try:
        with kprof.profile(backends="opencl") as p:
            a = pool.allocate(1000)
            b = pool.allocate(1000)
            a.release()  # back to the pool, which keeps the block
            c = pool.allocate(1000)  # the same block again
            b.release()
            c.release()
        got = [(e.kind, e.nbytes) for e in p.memory.events]
        if path:
            assert [k for k, _n in got] == ["alloc", "alloc"], got
            assert got[0][1] == got[1][1] >= 1000, got  # the bin's size, not the piece's
        else:  # the pool allocates in PyOpenCL's C++, past the replaced pyopencl.Buffer
            assert got == []
    finally:
        pool.free_held()


def test_nothing_is_left_installed(ctx: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """After the profile the table holds the ICD's own entries, and an end the driver reports
    later (a buffer made inside, freed after) is dropped in C, never queued."""
    mod = _hook()
    monkeypatch.setenv("KPROF_OPENCL_MEMORY", "1")
    from kprof_opencl import hook

    table = next(p.table for p in hook.survey() if p.table is not None)
    slots = mod.slots()
    read = ctypes.cast(table, ctypes.POINTER(ctypes.c_void_p))
    names = ("clCreateBuffer", "clSVMAlloc", "clSVMFree", "clEnqueueSVMFree")
    entries = {n: read[slots[n]] for n in names}
    with kprof.profile(backends="opencl"):
        assert read[slots["clCreateBuffer"]] != entries["clCreateBuffer"]
        b = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 128)
    assert {n: read[slots[n]] for n in names} == entries
    b.release()
    assert mod.mem_stats() == {"dropped": 0, "pending": 0, "on": 0}


def test_a_profile_start_surveys_the_platforms_once(
    ctx: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The launch hook's survey serves the memory hook installed right after it: one survey
    (85 µs here, a fifth of an empty profile) per profile start, not two."""
    from kprof_opencl import hook

    _hook()
    with kprof.profile(backends="opencl"):  # the first also describes the backend (a survey)
        pass
    calls: list[int] = []
    survey = hook.survey

    def counted() -> Any:
        calls.append(1)
        return survey()

    monkeypatch.setattr(hook, "survey", counted)
    with kprof.profile(backends="opencl") as p:
        b = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 128)
        b.release()
    assert len(calls) == 1
    assert [(e.kind, e.nbytes) for e in p.memory.events] == [("alloc", 128), ("free", 128)]


def test_a_buffer_destroyed_after_its_release_is_freed_not_live(
    ctx: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A buffer the program releases while something else still holds it, as the driver holds
    one while commands using it are in flight, is destroyed a moment later on another thread:
    the profile's end waits for that (issue 35: 18 runs in 30 of a script ending with work in
    flight said "Live at end 8 MiB, Frees 0"). Made deterministic: the holder lets go on its
    own thread at the end's first wait, and the test fails if the end never waits."""
    _hook()
    monkeypatch.setenv("KPROF_OPENCL_MEMORY", "1")
    import threading

    from kprof_opencl import memory_hook

    holders: list[Any] = []

    def let_go() -> None:
        while holders:
            t = threading.Thread(target=holders.pop().release)
            t.start()
            t.join()

    monkeypatch.setattr(memory_hook, "_pause", let_go)
    for _ in range(50):
        with kprof.profile(backends="opencl") as p:
            a = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 4096)
            holders.append(cl.Buffer.from_int_ptr(a.int_ptr, retain=True))  # the "driver"
            del a  # the program's release: the buffer lives on in the holder
        kinds = [e.kind for e in p.memory.events]
        assert kinds == ["alloc", "free"], kinds
        assert sum(p.memory.live_bytes_at_end.values()) == 0
    assert not holders


def test_a_buffer_still_held_at_the_end_is_live_after_a_bounded_wait(
    ctx: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Released by the program but kept by someone else past the wait: live at the end, as it
    is; the wait is bounded (here by an injected clock that jumps past the bound)."""
    _hook()
    monkeypatch.setenv("KPROF_OPENCL_MEMORY", "1")
    from kprof_opencl import memory_hook

    now = [0.0]
    monkeypatch.setattr(memory_hook, "_clock", lambda: now[0])

    def jump() -> None:
        now[0] += memory_hook.END_GRACE_S / 4

    monkeypatch.setattr(memory_hook, "_pause", jump)
    with kprof.profile(backends="opencl") as p:
        a = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 4096)
        kept = cl.Buffer.from_int_ptr(a.int_ptr, retain=True)
        del a
    assert [e.kind for e in p.memory.events] == ["alloc"]
    assert sum(p.memory.live_bytes_at_end.values()) == 4096
    assert now[0] == pytest.approx(memory_hook.END_GRACE_S)  # waited the bound, no longer
    kept.release()
