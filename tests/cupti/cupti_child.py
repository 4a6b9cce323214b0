"""Scenarios of kprof's CUPTI path, run in a child process whose CUPTI is the test double.

Usage: ``python cupti_child.py LIBDIR SCENARIO...``. The child loads the double's
``libcuda.so.1`` and ``libcupti.so.<N>`` first (by full path, RTLD_GLOBAL). It runs the
real ``CudaPlugin`` (its CUPTI path, ``kprof_cuda.activity``, which finds the double as the
libcupti already loaded in the process) on the fake CuPy of
``test_cuda_fake.py`` for what is not CUPTI (events, device names), registered as ``cuda``.
Each scenario asserts; the child prints one JSON line ``{scenario: "ok" | traceback}``.

A child, not the test process: a process holds one CUPTI, and the double's ``libcuda.so.1``
must not be what CuPy finds in the main test process.
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import io
import json
import os
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

LIBDIR = Path(sys.argv[1])
_driver = ctypes.CDLL(str(LIBDIR / "libcuda.so.1"), mode=ctypes.RTLD_GLOBAL)
_cupti_path = glob.glob(str(LIBDIR / "libcupti.so.*"))[0]
lib = ctypes.CDLL(_cupti_path, mode=ctypes.RTLD_GLOBAL)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for test_cuda_fake

import kprof  # noqa: E402
from kprof import plugin as kp  # noqa: E402
from kprof_core.data.records import COPY, KERNEL, RANGE  # noqa: E402
from kprof_core.host.discovery import ENV_DISABLE_AUTOLOAD, registry  # noqa: E402
from kprof_core.recording import activity as core_activity  # noqa: E402
from kprof_cuda import activity as cuda_activity  # noqa: E402
from kprof_cuda import cupti_abi as abi  # noqa: E402
from kprof_cuda import cupti_layout  # noqa: E402
from kprof_cuda.plugin import CudaPlugin  # noqa: E402

os.environ[ENV_DISABLE_AUTOLOAD] = "1"

import test_cuda_fake as tcf  # noqa: E402

u32, u64, i32, i64 = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int32, ctypes.c_int64
lib.cuptidouble_api.restype = u32
lib.cuptidouble_api.argtypes = [ctypes.c_int, u32, u64, u64]
lib.cuptidouble_kernel.argtypes = [u32, ctypes.c_char_p, u32, u32, u32] + [i32] * 6 + [u64, u64]
lib.cuptidouble_memcpy.argtypes = [u32, ctypes.c_int, u64, u32, u32, u32, u64, u64]
lib.cuptidouble_memset.argtypes = [u32, u32, u64, u32, u32, u32, u64, u64]
lib.cuptidouble_now.restype = u64
lib.cuptidouble_busy_until.restype = u64
lib.cuptidouble_device_busy_until.restype = u64
lib.cuptidouble_device_busy_until.argtypes = [u32]
lib.cuptidouble_set_clock_offset.argtypes = [i64]
lib.cuptidouble_set_busy.argtypes = [ctypes.c_int]
lib.cuptidouble_enabled.argtypes = [ctypes.c_int]
lib.cuptidouble_enable_calls.argtypes = [ctypes.c_int]
lib.cuptidouble_api_enabled.argtypes = [ctypes.c_int, u32]
lib.cuptidouble_suppressed.restype = ctypes.c_long
lib.cuptidouble_delivered_buffers.restype = ctypes.c_long
lib.cuptidouble_ext_depth.argtypes = [ctypes.c_int]
lib.cuptidouble_stream_id.restype = u32
lib.cuptidouble_stream_id.argtypes = [u64]

lib.cuptidouble_api_as.restype = u32
lib.cuptidouble_fail_next.argtypes = [ctypes.c_int]
lib.cuptidouble_api_as.argtypes = [u32, ctypes.c_int, u32, u64, u64]
lib.cuptidouble_new_correlation.restype = u32
lib.cuptidouble_set_version.argtypes = [u32]
lib.cuptidouble_refused.restype = ctypes.c_long
lib.cuptidouble_other.argtypes = [ctypes.c_int, u32]
lib.cuptidouble_has_timestamp_callback.restype = ctypes.c_int
lib.cuptidouble_forced_flushes.restype = ctypes.c_long
lib.cuptidouble_flushes.restype = ctypes.c_long
lib.cuptiActivityFlushAll.argtypes = [u32]
lib.cuptidouble_other_client_records.restype = ctypes.c_long
lib.cuptidouble_other_client_not_its_own.restype = ctypes.c_long
lib.cuptidouble_memory.argtypes = [u32, ctypes.c_int, ctypes.c_int, u64, u64, u32, u32, u32, u64]

# Values from CUPTI's public headers (cupti_activity.h, cupti_driver_cbid.h,
# cupti_runtime_cbid.h, cupti_result.h); test_cupti_abi checks kprof's against them.
DRIVER, RUNTIME = 0, 1
KERNEL_KIND = abi.KIND["CONCURRENT_KERNEL"]
LAUNCH = 307  # CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel
GRAPH = 514  # CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch
BATCH_COPY = 776  # CUPTI_DRIVER_TRACE_CBID_cuMemcpyBatchAsync
RT_LAUNCH = 211  # CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000
MEMCPY = 279  # CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2
MEMSET = 216  # CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async
GET_DEVICE = 16  # CUPTI_DRIVER_TRACE_CBID_cuCtxGetDevice
EXT = abi.EXT_KIND_CUSTOM2
DTOH = 2  # CUPTI_ACTIVITY_MEMCPY_KIND_DTOH
MANGLED = b"_Z5scaleIfEvPT_S0_i"  # void scale<float>(float*, float, int)
MULTIPLE_SUBSCRIBERS = 39  # CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
MEMORY2 = abi.KIND["MEMORY2"]
RT_MALLOC, RT_FREE, RT_MALLOC_HOST = 20, 22, 25  # cudaMalloc_v3020, cudaFree_v3020, cudaMallocHost
MEM_ALLOC = 243  # CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2
ALLOCATION, RELEASE = 1, 2  # CUpti_ActivityMemoryOperationType
DEVICE_MEMORY, PINNED_MEMORY = 3, 2  # CUpti_ActivityMemoryKind


def launch(
    name: bytes = MANGLED,
    stream: int = 13,
    duration: int = 10_000,
    grid: tuple[int, ...] = (4, 2, 1),
    block: tuple[int, ...] = (256, 1, 1),
    device: int = 0,
    emit: bool = True,
) -> tuple[int, int]:
    """A cuLaunchKernel on the calling thread and, unless ``emit`` is False, its kernel record
    (begins 5 µs after the call). Returns (correlation id, kernel begin) on the double's clock."""
    t = lib.cuptidouble_now()
    corr = lib.cuptidouble_api(DRIVER, LAUNCH, t, t + 2000)
    if emit:
        lib.cuptidouble_kernel(
            corr, name, device, 1, stream, *grid, *block, t + 5000, t + 5000 + duration
        )
    return corr, t + 5000


def memory_call(
    cbid: int,
    operation: int | None,
    address: int = 0,
    nbytes: int = 0,
    runtime: int = RUNTIME,
    kind: int = DEVICE_MEMORY,
) -> int:
    """An allocating or freeing call on the calling thread and, unless ``operation`` is None
    (a call that made nothing: cudaFree(0), a failed cudaMalloc), its MEMORY2 record, 1 µs
    into the call. Returns the record's time on the double's clock."""
    t = lib.cuptidouble_now()
    corr = lib.cuptidouble_api(runtime, cbid, t, t + 2000)  # memory_call's call
    if operation is not None:
        lib.cuptidouble_memory(corr, operation, kind, address, nbytes, 0, 1, 0, t + 1000)
    return int(t + 1000)


def wait_for_double(device: int) -> None:
    """cudaDeviceSynchronize on the double: until that simulated device finished."""
    while lib.cuptidouble_now() < lib.cuptidouble_device_busy_until(device):
        time.sleep(0.0005)


class Env:
    """The ``cuda`` backend: the real CudaPlugin with its CUPTI path, on the fake CuPy."""

    def __init__(self) -> None:
        registry.reset()
        lib.cuptidouble_reset()
        self.fake = tcf.FakeCuda(1)
        self.fake.on_synchronize = wait_for_double
        self.mod = tcf.fake_cupy_module(self.fake)
        sys.modules[tcf.MODULE] = self.mod
        self.plugin = CudaPlugin(
            api=lambda: self.fake, module=tcf.MODULE, describe=tcf._available, nvtx=lambda: None
        )
        self.backend = kprof.register_backend(self.plugin, "cuda")

    def close(self) -> None:
        registry.reset()
        self.fake.close()
        sys.modules.pop(tcf.MODULE, None)


def rows(p: kprof.Profile) -> list[dict[str, Any]]:
    t = p.table
    return [
        {
            "name": p.names[t.name[i]],
            "kind": t.kind[i],
            "thread": p.threads[t.thread[i]].name,
            "queue": p.queues[t.queue[i]].label,
            "device": p.queues[t.queue[i]].device,
            "start": t.start[i],
            "duration": t.duration[i],
            "nbytes": t.nbytes[i],
            "launch_start": t.launch_start[i],
            "launch_end": t.launch_end[i],
            "detail": p.details.get(i),
        }
        for i in range(len(t))
    ]


# -- scenarios ------------------------------------------------------------------------------------


def records_become_rows(env: Env) -> None:
    """Kernel, copy and memset records of the profile: names, kinds, bytes, device times,
    thread and queue; placed on perf_counter_ns through cuptiGetTimestamp."""
    offset = 7_000_000_000_000  # the double's clock runs this far ahead of perf_counter_ns
    lib.cuptidouble_set_clock_offset(offset)
    with kprof.profile() as p:
        _corr, begin = launch()
        t = lib.cuptidouble_now()
        c2 = lib.cuptidouble_api(DRIVER, MEMCPY, t, t + 1000)
        lib.cuptidouble_memcpy(c2, DTOH, 4096, 0, 1, 13, t + 20_000, t + 23_000)
        c3 = lib.cuptidouble_api(DRIVER, MEMSET, t, t + 1000)
        lib.cuptidouble_memset(c3, 0, 1024, 0, 1, 13, t + 30_000, t + 30_500)
        # A call that enqueues no work: its correlation entry is dropped, not kept.
        lib.cuptidouble_api(DRIVER, GET_DEVICE, t, t + 100)
    r = rows(p)
    assert [x["name"] for x in r] == [
        "void scale<float>(float*, float, int)",
        "[copy device to host]",
        "[memset]",
    ], r
    assert [x["kind"] for x in r] == [KERNEL, COPY, COPY]
    assert [x["duration"] for x in r] == [10_000, 3_000, 500]
    assert [x["nbytes"] for x in r] == [-1, 4096, 1024]
    assert {x["thread"] for x in r} == {threading.current_thread().name}
    assert {x["queue"] for x in r} == {"stream 1"} and {x["device"] for x in r} == {
        "CUDA 0 (Fake GPU)"
    }
    assert r[0]["detail"] == "grid (4, 2, 1) block (256, 1, 1), device 0, CUPTI stream 13"
    (clock,) = p.clocks.values()
    if lib.cuptidouble_has_timestamp_callback():
        # The compiled reader gives CUPTI its timestamps (CLOCK_MONOTONIC, perf_counter_ns's
        # clock): the double takes them from it, its test offset no longer applies, and
        # placement is exact.
        assert cuda_activity._reader.compiled
        assert "timestamp callback" in clock.method and clock.error_ns == 0, clock
        offset = 0
    else:
        # The pure reader registers no callback (Python per timestamp) and says why.
        assert not cuda_activity._reader.compiled
        assert "cuptiGetTimestamp" in clock.method and clock.error_ns is not None
        assert "registers no timestamp callback" in clock.method, clock.method
    # Placement: the double's clock minus its offset is CLOCK_MONOTONIC, which is what
    # perf_counter_ns reads: exact within the calibration's error bound.
    assert abs(r[0]["start"] - (begin - offset)) <= clock.error_ns, (r[0]["start"], begin - offset)
    assert abs(r[0]["launch_start"] - (begin - 5000 - offset)) <= clock.error_ns
    assert r[0]["launch_end"] - r[0]["launch_start"] == 2000
    assert p.start_ns - clock.error_ns <= r[0]["launch_start"] <= p.end_ns + clock.error_ns
    assert cuda_activity._reader.stats()["launches"] == 0  # every launch got its record
    # The trace says how CUPTI's clock was placed, and each kernel's launch configuration.
    from kprof_core.renderers.chrome import write_chrome_trace

    buf = io.StringIO()
    write_chrome_trace(buf, [p])
    trace = json.loads(buf.getvalue())
    said = "timestamp callback" if offset == 0 else "cuptiGetTimestamp sampled"
    assert any(said in c for c in trace["otherData"]["profiles"][0]["clocks"]), trace["otherData"]
    assert any(
        e.get("name") == "process_labels" and said in e["args"]["labels"]
        for e in trace["traceEvents"]
    )
    [ev] = [
        e
        for e in trace["traceEvents"]
        if e.get("name") == "void scale<float>(float*, float, int)"
        and e.get("ph") == "X"
        and e.get("cat") != "launch"
    ]
    assert ev["args"]["detail"].startswith("grid (4, 2, 1) block (256, 1, 1)")


def cuptis_default_clock_is_the_wall_clock(env: Env) -> None:
    """CUPTI's default clock on Linux is CLOCK_REALTIME (the docs of
    cuptiActivityRegisterTimestampCallback): about 1.8e18 ns since 1970, beyond the ±2**59 ns
    kprof keeps of a plugin's values. Without kprof's timestamp callback (the pure reader)
    the rows keep their times: handed relative to a base, placed back with it."""
    offset = time.time_ns() - time.monotonic_ns()  # the double's clock is then the wall clock
    assert offset > 2**59
    lib.cuptidouble_set_clock_offset(offset)
    with kprof.profile() as p:
        _corr, begin = launch(duration=10_000)
    r = rows(p)
    assert [(x["duration"], x["detail"] is not None) for x in r] == [(10_000, True)], r
    (clock,) = p.clocks.values()
    if lib.cuptidouble_has_timestamp_callback():
        offset = 0  # the compiled reader's records are on the host clock already
    assert abs(r[0]["start"] - (begin - offset)) <= clock.error_ns, (r[0]["start"], begin - offset)
    assert r[0]["launch_end"] - r[0]["launch_start"] == 2000


def two_profiles_on_two_threads(env: Env) -> None:
    """Each profile gets exactly the kernels its own thread launched."""
    out: dict[int, Any] = {}
    barrier = threading.Barrier(2)

    def work(i: int) -> None:
        with kprof.profile() as p:
            barrier.wait()
            for j in range(200):
                launch(f"k{i}_{j}".encode(), stream=13 + i)
            barrier.wait()
        out[i] = p

    threads = [threading.Thread(target=work, args=(i,), name=f"worker{i}") for i in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for i in range(2):
        r = rows(out[i])
        got = [x["name"] for x in r]
        assert got == [f"k{i}_{j}" for j in range(200)], (
            i,
            len(got),
            got[:5],
            sorted(got) == sorted(f"k{i}_{j}" for j in range(200)),
        )
        assert {x["thread"] for x in r} == {f"worker{i}"}


def outside_the_profile_is_not_recorded(env: Env) -> None:
    """A thread outside every profile, and launches after the end, are not kprof's; the
    activity kinds are on only while a profile runs."""
    kernel_kind = KERNEL_KIND
    assert lib.cuptidouble_enabled(kernel_kind) == 0
    with kprof.profile() as p:
        assert lib.cuptidouble_enabled(kernel_kind) == 1
        # API records only of the calls that enqueue work, enabled one by one.
        assert lib.cuptidouble_enabled(abi.KIND["DRIVER"]) == 0
        assert lib.cuptidouble_enabled(abi.KIND["RUNTIME"]) == 0
        assert lib.cuptidouble_api_enabled(DRIVER, LAUNCH) == 1
        assert lib.cuptidouble_api_enabled(RUNTIME, RT_LAUNCH) == 1
        assert lib.cuptidouble_api_enabled(DRIVER, GET_DEVICE) == 0
        th = threading.Thread(target=lambda: launch(b"other_thread"))
        th.start()
        th.join()
        launch(b"mine")
    assert lib.cuptidouble_enabled(kernel_kind) == 0
    assert lib.cuptidouble_api_enabled(DRIVER, LAUNCH) == 0
    assert lib.cuptidouble_ext_depth(EXT) == 0  # every push was popped
    assert [x["name"] for x in rows(p)] == ["mine"]
    assert env.plugin.activity is not None and env.plugin.activity.foreign == 1
    suppressed = lib.cuptidouble_suppressed()
    launch(b"after")
    assert lib.cuptidouble_suppressed() == suppressed + 2  # API and kernel record: kinds off


def propagated_thread(env: Env) -> None:
    with kprof.profile() as p:
        th = threading.Thread(target=kprof.propagate(lambda: launch(b"in_helper")), name="helper")
        th.start()
        th.join()
    assert [(x["name"], x["thread"]) for x in rows(p)] == [("in_helper", "helper")]


def nested_profiles(env: Env) -> None:
    with kprof.profile() as outer:
        launch(b"before")
        with kprof.profile() as inner:
            launch(b"inside")
        launch(b"after")
    assert [x["name"] for x in rows(inner)] == ["inside"]
    assert sorted(x["name"] for x in rows(outer)) == ["after", "before", "inside"]
    assert lib.cuptidouble_enable_calls(KERNEL_KIND) == 1  # enabled once


def buffers_drained_while_running(env: Env) -> None:
    """Small buffers fill and CUPTI's thread hands them over while the profile runs: rows
    are harvested before the end, and pending entries stay bounded."""
    cuda_activity.BUFFER_SIZE = 4096  # a few dozen records per buffer
    # Hundreds of buffers: this loop launches faster than CUPTI's thread gets the GIL to hand
    # them over, so the usual cap would (rightly) drop records; that is the next scenario.
    cuda_activity.MAX_BUFFERS = 100_000
    try:
        with kprof.profile() as p:
            rec = kp.active()
            assert rec is not None
            for i in range(5000):
                launch(f"k{i % 3}".encode(), duration=100)
            deadline = time.monotonic() + 30
            while len(rec.rows.tables.table) < 2048 and time.monotonic() < deadline:
                time.sleep(0.01)  # CUPTI's thread delivers; kprof harvests as they come
            harvested_before_end = len(rec.rows.tables.table)
            delivered = lib.cuptidouble_delivered_buffers()
        assert delivered > 50, delivered
        assert harvested_before_end >= 2048, harvested_before_end
        assert rec.pending_high_water <= rec.harvest_every + 200, rec.pending_high_water
        assert len(p.kernels) == 5000
    finally:
        cuda_activity.BUFFER_SIZE = 1 << 20
        cuda_activity.MAX_BUFFERS = 64


def records_dropped_without_buffers_are_said(env: Env) -> None:
    """No buffer to be had (all MAX_BUFFERS in use): CUPTI drops records; kprof counts them
    and says so at the profile's end."""
    cuda_activity.MAX_BUFFERS = 0
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with kprof.profile() as p:
                for _ in range(3):
                    launch()
    finally:
        cuda_activity.MAX_BUFFERS = 64
    assert rows(p) == []
    act = env.plugin.activity
    assert act is not None and act.dropped_by_cupti == 9  # 3 x (external correlation, API, kernel)
    msgs = [str(w.message) for w in caught if "CUPTI dropped" in str(w.message)]
    assert len(msgs) == 1 and msgs[0].startswith("kprof: 9 CUPTI activity record(s) were lost"), (
        msgs
    )
    assert p.dropped["cuda"][0] == 9 and "CUPTI dropped 9" in p.dropped["cuda"][1], p.dropped


def runtime_api_records(env: Env) -> None:
    """Work enqueued through a runtime-API call is attributed by its RUNTIME record (kprof
    enables the runtime's launch, copy and memset APIs one by one)."""
    with kprof.profile() as p:
        t = lib.cuptidouble_now()
        corr = lib.cuptidouble_api(RUNTIME, RT_LAUNCH, t, t + 1000)
        lib.cuptidouble_kernel(
            corr, b"from_runtime", 0, 1, 13, 1, 1, 1, 32, 1, 1, t + 2000, t + 3000
        )
        assert lib.cuptidouble_api_enabled(RUNTIME, RT_LAUNCH) == 1
    assert [x["name"] for x in rows(p)] == ["from_runtime"]


def graph_launch_records(env: Env) -> None:
    """Several kernels share a graph launch's correlation id: all are recorded."""
    with kprof.profile() as p:
        t = lib.cuptidouble_now()
        corr = lib.cuptidouble_api(DRIVER, GRAPH, t, t + 1000)
        for j in range(3):
            lib.cuptidouble_kernel(
                corr,
                f"node{j}".encode(),
                0,
                1,
                13,
                1,
                1,
                1,
                32,
                1,
                1,
                t + 2000 + j * 1000,
                t + 2500 + j * 1000,
            )
    assert [x["name"] for x in rows(p)] == ["node0", "node1", "node2"]
    assert cuda_activity._reader.stats()["launches"] == 0


def a_batched_copy_is_every_copy_it_made(env: Env) -> None:
    """cuMemcpyBatchAsync makes a copy record per copy, all with its correlation id, and they
    may come in several buffers: each copy is a row, on both readers (they once disagreed:
    one row and two foreign, or three only when one buffer held all)."""
    foreign = cuda_activity._reader.stats()["foreign"]
    with kprof.profile(backends=["cuda"]) as p:
        t = lib.cuptidouble_now()
        corr = lib.cuptidouble_api(DRIVER, BATCH_COPY, t, t + 1000)
        for j, nbytes in enumerate((256, 512, 1024)):
            lib.cuptidouble_memcpy(
                corr, DTOH, nbytes, 0, 1, 13, t + 2000 + j * 1000, t + 2500 + j * 1000
            )
            if j == 0:  # the first copy's buffer is handed over and read on its own
                lib.cuptidouble_complete_buffer()
                lib.cuptiActivityFlushAll(0)
                assert env.plugin.activity is not None
                env.plugin.activity.drain.take()
    assert [(x["kind"], x["nbytes"]) for x in rows(p)] == [
        (COPY, 256),
        (COPY, 512),
        (COPY, 1024),
    ], rows(p)
    stats = cuda_activity._reader.stats()
    assert stats["launches"] == 0 and stats["foreign"] == foreign, stats


def past_the_launch_limit_the_oldest_are_forgotten(env: Env) -> None:
    """Launches whose records never come pile up; past the readers' limit the oldest eighth
    are forgotten, on both readers: the newest launches still get their rows (the compiled
    reader once refused new launches there instead, and lost their rows)."""
    try:
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            with kprof.profile(backends=["cuda"], timeout=0.2) as p:
                reader = cuda_activity._reader
                assert reader is not None
                before = reader.stats().get("forgotten", 0)
                reader.max_launches = 64
                reader.apply_limits()
                launched = [launch(emit=False) for _ in range(100)]
                lib.cuptidouble_complete_buffer()
                lib.cuptiActivityFlushAll(0)
                assert env.plugin.activity is not None
                env.plugin.activity.drain.take()
                assert reader.stats()["launches"] <= 64, reader.stats()
                for (corr, begin), name in ((launched[-1], b"newest"), (launched[0], b"oldest")):
                    lib.cuptidouble_kernel(corr, name, 0, 1, 13, 1, 1, 1, 1, 1, 1, begin, begin + 9)
    finally:
        if cuda_activity._reader is not None:
            cuda_activity._reader.max_launches = cupti_layout.MAX_LAUNCHES
            cuda_activity._reader.apply_limits()
    assert [x["name"] for x in rows(p)] == ["newest"], rows(p)
    assert reader.stats()["forgotten"] > before, reader.stats()


def every_graph_node_is_waited_for(env: Env) -> None:
    """A graph launch's node records share its correlation id, and CUPTI does not say how many
    there are: its first rows prove nothing. Here CuPy is not imported (the end knows no device
    to wait for) and the graph's nodes ran on two devices; the first nodes' records came in a
    buffer CUPTI handed over, the last one is still running on device 1 when the profile ends
    (CUPTI keeps its buffer). The end waits for the devices the graph's rows ran on, each of
    them (the double's devices finish apart), then flushes: every node is a row."""
    saved = sys.modules.pop(tcf.MODULE)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            # Named: without CuPy imported, profile() would start CUDA only at its import.
            with kprof.profile(backends=["cuda"]) as p:
                t = lib.cuptidouble_now()
                corr = lib.cuptidouble_api(DRIVER, GRAPH, t, t + 1000)
                for name, dev, begin, end in (
                    (b"node0", 0, 2000, 3000),
                    (b"node1", 1, 2000, 4000),
                    (b"node2", 1, 5000, 120_000_000),  # 120 ms on device 1
                ):
                    lib.cuptidouble_kernel(
                        corr, name, dev, 1, 13, 1, 1, 1, 32, 1, 1, t + begin, t + end
                    )
                    if name == b"node1":
                        lib.cuptidouble_complete_buffer()  # a full buffer: handed over
                        lib.cuptiActivityFlushAll(0)
    finally:
        sys.modules[tcf.MODULE] = saved
    assert [x["name"] for x in rows(p)] == ["node0", "node1", "node2"], rows(p)
    assert sorted(env.fake.synchronized) == [0, 1], env.fake.synchronized
    bad = [w for w in caught if "arrived after" in str(w.message)]
    assert not bad, bad
    assert cuda_activity._reader.stats()["launches"] == 0


def late_records_dropped_counted_said(env: Env) -> None:
    """A launch whose record had not come by the timeout is said; when it comes after the
    profile ended (CUPTI still on for another profile) it is dropped, counted and said."""
    keep = threading.Event()
    started = threading.Event()

    def other() -> None:
        with kprof.profile():
            started.set()
            keep.wait()

    th = threading.Thread(target=other, daemon=True)
    th.start()
    started.wait()
    try:
        late_before = core_activity.stats()["late"]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            # The slow kernel keeps its device busy past the timeout: the end's wait for the
            # device does not return (a device idle with the launch still missing would mean
            # the launch made no work, and the end would stop waiting at once).
            busy = threading.Event()
            waits = env.fake.on_synchronize
            env.fake.on_synchronize = lambda device: busy.wait(5)
            try:
                with kprof.profile(timeout=0.2) as p:
                    corr, begin = launch(b"slow", emit=False)
            finally:
                busy.set()
                env.fake.on_synchronize = waits
            assert rows(p) == []
            assert any("had no device record after 0.2 s" in str(w.message) for w in caught), caught
            lib.cuptidouble_kernel(corr, b"slow", 0, 1, 13, 1, 1, 1, 1, 1, 1, begin, begin + 10)
            lib.cuptiActivityFlushAll(0)
            # kprof takes rows on its own schedule (its drain thread); take them now.
            assert env.plugin.activity is not None
            env.plugin.activity.drain.take()
        assert core_activity.stats()["late"] == late_before + 1
        assert any("arrived after their profile had ended" in str(w.message) for w in caught), (
            caught
        )
    finally:
        keep.set()
        th.join()


def subscriber_taken_falls_back_to_events(env: Env) -> None:
    """Another tool holds CUPTI: one warning with the reason, copies timed by events (the
    ndarray patches are installed), and kprof backends says so."""
    lib.cuptidouble_set_busy(MULTIPLE_SUBSCRIBERS)
    get = env.mod.ndarray.get
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with kprof.profile() as p:
            assert env.mod.ndarray.get is not get  # events path: CuPy's copies are patched
            env.mod.ndarray(4096).get()
        with kprof.profile():
            pass
    msgs = [str(w.message) for w in caught if "CUPTI" in str(w.message)]
    assert len(msgs) == 1 and "in use by another tool" in msgs[0], msgs
    assert "MULTIPLE_SUBSCRIBERS" in msgs[0]
    assert [x["name"] for x in rows(p)] == ["[copy device to host]"]
    info = env.backend.info(refresh=True)
    assert info.capture == "CUDA events" and "in use by another tool" in (info.capture_detail or "")
    lib.cuptidouble_set_busy(0)


def no_double_counting_with_cupti(env: Env) -> None:
    """With CUPTI on, CuPy's copies are not patched (CUPTI reports them: one row each), and a
    kprof_cuda.kernel call is a range around the kernels CUPTI reports."""
    import kprof_cuda

    get = env.mod.ndarray.get
    wrapped = kprof_cuda.kernel(lambda: launch(b"_Z4axpyv"), name="axpy call")
    with kprof.profile() as p:
        assert env.mod.ndarray.get is get
        info = env.backend.info(refresh=True)
        assert info.capture == "CUPTI activity records", info
        wrapped()
        # kprof backends, table and --json, say which path records CUDA work now.
        from kprof_core.cli.main import main as kprof_main

        for argv in (["backends"], ["backends", "--json"]):
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                kprof_main(argv)
            if "--json" in argv:
                [row] = json.loads(out.getvalue())
                assert row["capture"] == "CUPTI activity records", row
                assert row["capture_detail"].startswith("libcupti API "), row
                assert "already loaded in the process" in row["capture_detail"], row
            else:
                assert "cuda captures with CUPTI activity records: libcupti" in out.getvalue()
    r = rows(p)
    assert sorted((x["name"], x["kind"]) for x in r) == [
        ("axpy call", RANGE),
        ("axpy()", KERNEL),
    ], r


def streams_share_rows_with_events(env: Env) -> None:
    """A CuPy stream used by a range and by CUPTI records is one queue row."""
    s = env.fake.stream()
    sid = lib.cuptidouble_stream_id(s.ptr)
    with kprof.profile() as p:
        with env.fake.use(s):
            with kprof.range("work"):
                launch(b"k", stream=sid)
    r = rows(p)
    assert {x["queue"] for x in r} == {"stream 1"} and len(r) == 2, r


def ranges_span_their_work_without_events(env: Env) -> None:
    """With CUPTI on, a range puts no CUDA event: its device row on a stream spans the
    records of the work launched inside it there (a nested range's included), with the bytes
    and flops the user said; a range without work has no device row."""
    s = env.fake.stream()
    sid = lib.cuptidouble_stream_id(s.ptr)
    with kprof.profile() as p:
        with env.fake.use(s):
            with kprof.range("outer", flops=100, bytes=64):
                launch(b"k1", stream=sid, duration=10_000)
                with kprof.range("inner"):
                    launch(b"k2", stream=sid, duration=20_000)
            with kprof.range("empty"):
                pass
    assert env.plugin.stats().created == 0, env.plugin.stats()  # no event was made
    r = {x["name"]: x for x in rows(p)}
    assert sorted(r) == ["inner", "k1", "k2", "outer"], r
    k1, k2, outer, inner = r["k1"], r["k2"], r["outer"], r["inner"]
    assert (outer["kind"], inner["kind"]) == (RANGE, RANGE)
    assert outer["start"] == k1["start"]
    assert outer["start"] + outer["duration"] == k2["start"] + k2["duration"]
    assert (inner["start"], inner["duration"]) == (k2["start"], k2["duration"])
    assert outer["queue"] == inner["queue"] == k1["queue"] == "stream 1"
    assert outer["nbytes"] == 64
    assert p.table.flops[p.table.name.index(p.names.index("outer"))] == 100
    assert [x.name for x in p.ranges] == ["inner", "outer", "empty"]
    # The summary's device time of a range is its work's, as before; its span is the row's.
    by_name = {row.name: row for row in p.summary().device_ranges}
    assert by_name["outer"].total_ns == 30_000 and by_name["inner"].total_ns == 20_000
    assert by_name["outer"].span_ns == outer["duration"], by_name["outer"]
    assert "empty" not in by_name


def order_independent_join(env: Env) -> None:
    """A work record decoded before its launch's correlation and API records (they came in a
    later buffer) is still attributed to its profile, with its launch times."""
    with kprof.profile() as p:
        t = lib.cuptidouble_now()
        corr = lib.cuptidouble_new_correlation()
        lib.cuptidouble_kernel(corr, b"early", 0, 1, 13, 1, 1, 1, 32, 1, 1, t + 5000, t + 6000)
        lib.cuptidouble_complete_buffer()
        lib.cuptiActivityFlushAll(0)  # the kernel's buffer is decoded: its launch is unknown
        assert env.plugin.activity is not None
        env.plugin.activity.drain.take()
        assert cuda_activity._reader.stats()["pending"] == 1
        lib.cuptidouble_api_as(corr, DRIVER, LAUNCH, t, t + 2000)
        launch(b"in_order")
    r = rows(p)
    assert sorted(x["name"] for x in r) == ["early", "in_order"], r
    [early] = [x for x in r if x["name"] == "early"]
    assert early["launch_end"] - early["launch_start"] == 2000
    assert early["thread"] == threading.current_thread().name
    stats = cuda_activity._reader.stats()
    assert stats["pending"] == 0 and stats["launches"] == 0, stats


def dropped_records_never_make_the_end_wait(env: Env) -> None:
    """Kernel records CUPTI dropped (no buffer) can never come: the end does not wait for
    them (flushes counted, not time), the report says how many were dropped and why, and no
    warning blames the device."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with kprof.profile(timeout=60) as p:
            for _ in range(3):
                launch(emit=False)  # the launches' API records are in the current buffer
            lib.cuptidouble_complete_buffer()
            lib.cuptiActivityFlushAll(0)
            cuda_activity._reader.max_buffers = 0  # from now on every buffer is refused
            cuda_activity._reader.apply_limits()
            cuda_activity.MAX_BUFFERS = 0
            flushes = lib.cuptidouble_flushes()
            corrs = [lib.cuptidouble_new_correlation() - 3 + i for i in range(3)]
            for c in corrs:  # their kernel records: dropped for want of a buffer
                lib.cuptidouble_kernel(c, b"lost", 0, 1, 13, 1, 1, 1, 1, 1, 1, 10, 20)
    cuda_activity.MAX_BUFFERS = 64
    assert rows(p) == []
    # A flush, the devices waited for (no work of theirs still running), one more, the last end's.
    assert lib.cuptidouble_flushes() - flushes <= 4, lib.cuptidouble_flushes() - flushes
    msgs = [str(w.message) for w in caught]
    assert not any("device may be hung" in m for m in msgs), msgs
    said = [m for m in msgs if "have no device record" in m]
    assert len(said) == 1 and "3 activity record(s) were dropped" in said[0], msgs
    assert "CUPTI dropped 3 for want of a buffer" in said[0], said
    assert p.dropped["cuda"][0] == 3, p.dropped


def a_buffer_that_cannot_be_allocated_is_not_held_against_later_ones(env: Env) -> None:
    """A buffer whose allocation fails is handed to CUPTI as none (its records dropped and
    counted) and is not counted among the buffers CUPTI holds: once memory is there again,
    CUPTI gets buffers, however many allocations failed before (more than the bound)."""
    cuda_activity.MAX_BUFFERS = 2
    cuda_activity.BUFFER_SIZE = 1 << 62  # no allocation of this size can succeed
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the dropped records are said (tested elsewhere)
            with kprof.profile() as p:
                for _ in range(3):
                    launch()
            assert rows(p) == []
            cuda_activity.BUFFER_SIZE = 1 << 20
            with kprof.profile() as p:
                launch()
    finally:
        cuda_activity.MAX_BUFFERS = 64
        cuda_activity.BUFFER_SIZE = 1 << 20
    assert [x["name"] for x in rows(p)] == ["void scale<float>(float*, float, int)"], rows(p)


def a_fork_inside_a_profile_leaves_cupti_alone_in_the_child(env: Env) -> None:
    """A child made by os.fork() inside a profile, while other threads hold the reader's
    locks: the child ends its profile at once, makes no CUPTI call (CUDA cannot be used
    there), and says so in one line; the parent's profile is whole."""
    act = env.plugin.activity
    assert act is not None
    reader = cuda_activity._reader
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        locks = [act.drain._take_lock, act.sites._lock]
        if not reader.compiled:
            locks.append(reader._lock)
        with contextlib.ExitStack() as stack:
            for lock in locks:
                stack.enter_context(lock)
            holding.set()
            release.wait(30)

    pid = -1
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with kprof.profile() as p:
            launch()
            holder = threading.Thread(target=hold)
            holder.start()
            assert holding.wait(10)
            if reader.compiled:  # the C reader's own lock, held without the GIL meanwhile
                threading.Thread(target=reader.mod._hold_lock, args=(2.0,)).start()
                while not reader.mod._lock_held():
                    time.sleep(0.001)
            # What the profile's end asks of CUPTI: flushes, and the scope's pop.
            calls = (lib.cuptidouble_flushes(), lib.cuptidouble_ext_depth(abi.EXT_KIND_CUSTOM2))
            pid = os.fork()
            if pid == 0:
                launch()  # the child's: CUPTI is not asked for it
            else:
                release.set()  # the parent's end takes the same locks
                holder.join()
        if pid == 0:
            said = [str(w.message) for w in caught if "child made by fork()" in str(w.message)]
            now = (lib.cuptidouble_flushes(), lib.cuptidouble_ext_depth(abi.EXT_KIND_CUSTOM2))
            ok = now == calls and len(said) == 1 and p.kernels == []
            os._exit(0 if ok else 3)
    deadline = time.monotonic() + 30
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    if done[0] == 0:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        raise AssertionError("the child's profile end hung")
    assert os.waitstatus_to_exitcode(done[1]) == 0, done
    assert [x["name"] for x in rows(p)] == ["void scale<float>(float*, float, int)"], rows(p)


def calls_of_an_older_cupti_are_still_enabled_one_by_one(env: Env) -> None:
    """kprof's lists name the newest CUDA's calls; an older CUPTI refuses the ones it does not
    have. The others are still enabled one by one (not every API call of the process), the
    refused ones counted; only a CUPTI that refuses every call of a kind gets the whole kinds."""
    sizes = lib.cuptidouble_cbid_size(DRIVER), lib.cuptidouble_cbid_size(RUNTIME)
    lib.cuptidouble_set_cbid_sizes(700, 450)  # an older CUPTI: fewer calls of each kind
    try:
        with kprof.profile() as p:
            launch()
            assert lib.cuptidouble_api_enabled(DRIVER, LAUNCH) == 1
            assert lib.cuptidouble_enabled(abi.KIND["DRIVER"]) == 0
            assert lib.cuptidouble_enabled(abi.KIND["RUNTIME"]) == 0
        assert [x["name"] for x in rows(p)] == ["void scale<float>(float*, float, int)"]
        act = env.plugin.activity
        assert act is not None
        newer = sum(1 for i in abi.WORK_DRIVER if i >= 700)
        newer += sum(1 for i in abi.WORK_RUNTIME if i >= 450)
        assert act.stats()["apis_refused"] == newer > 0, act.stats()
        assert not any("one by one" in n for n in p.meta.get("notes", [])), p.meta
        lib.cuptidouble_set_cbid_sizes(0, 0)  # no call can be enabled one by one
        with kprof.profile() as p:
            launch()
            t = lib.cuptidouble_now()
            for _ in range(3):  # calls that enqueue nothing: records all the same now
                lib.cuptidouble_api(DRIVER, GET_DEVICE, t, t + 100)
            assert lib.cuptidouble_enabled(abi.KIND["DRIVER"]) == 1
            detail = kprof.get_backend("cuda").info(refresh=True).capture_detail or ""
        assert [x["name"] for x in rows(p)] == ["void scale<float>(float*, float, int)"]
        # Said, with what it cost: 3 records for the launch (its API, external correlation and
        # kernel records), 2 more for each call of nothing (API, external correlation).
        notes = [n for n in p.meta.get("notes", []) if "cannot enable CUDA calls one by one" in n]
        assert len(notes) == 1 and "(9.0 records per kernel, copy or memset)" in notes[0], notes
        assert "every CUDA call recorded" in detail, detail
    finally:
        lib.cuptidouble_set_cbid_sizes(*sizes)


def a_newer_cupti_than_any_checked_is_said(env: Env) -> None:
    """A CUPTI newer than the newest headers kprof's offsets were checked against is read all
    the same, and the report's notes and kprof backends say so; a checked one says nothing."""
    with kprof.profile() as p:
        launch()
    assert not any("newer than any" in n for n in p.meta.get("notes", [])), p.meta
    version = ctypes.c_uint32(0)
    lib.cuptiGetVersion(ctypes.byref(version))
    lib.cuptidouble_set_version(abi.NEWEST_CHECKED_API + 100)
    try:
        with kprof.profile() as p:
            launch()
            detail = kprof.get_backend("cuda").info(refresh=True).capture_detail or ""
    finally:
        lib.cuptidouble_set_version(version.value)
    assert [x["name"] for x in rows(p)] == ["void scale<float>(float*, float, int)"]
    said = f"API {abi.NEWEST_CHECKED_API + 100} is newer than any kprof's record layout"
    assert sum(said in n for n in p.meta.get("notes", [])) == 1, p.meta
    assert said in detail, detail


def buffer_policy_by_api_version(env: Env) -> None:
    """Kineto's policy: CUPTI before API 27 is never refused a buffer (refusing crashed it);
    past the bound, completed buffers are discarded and counted instead. From 27 on, a buffer
    past the bound is refused and CUPTI's drops are counted."""
    cuda_activity.MAX_BUFFERS = 0
    try:
        lib.cuptidouble_set_version(26)
        before = cuda_activity._reader.stats() if cuda_activity._reader else {}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with kprof.profile() as p:
                for _ in range(3):
                    launch()
        assert lib.cuptidouble_refused() == 0  # never refused
        after = cuda_activity._reader.stats()
        if cuda_activity._reader.compiled:
            # Decoded on CUPTI's thread as they complete: no buffer waits, none discarded.
            assert len(rows(p)) == 3
        else:
            # Every completed buffer past the bound (0 waiting) discarded and counted.
            discarded = after["discarded_records"] - before.get("discarded_records", 0)
            assert rows(p) == [] and discarded == 9, (rows(p), discarded)
            assert p.dropped["cuda"][0] == 9 and "discarded 9" in p.dropped["cuda"][1]
            assert any("kprof discarded 9" in str(w.message) for w in caught)
        lib.cuptidouble_set_version(28)
        with kprof.profile() as p:
            launch()
        assert lib.cuptidouble_refused() > 0 and rows(p) == []
        assert p.dropped["cuda"][0] == 3, p.dropped
    finally:
        cuda_activity.MAX_BUFFERS = 64
    # A later capture is not told of those losses again, even by a new plugin instance over
    # the process's reader (its first capture once counted every record kprof had ever
    # discarded as lost while it ran).
    env.close()
    fresh = Env()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with kprof.profile() as p:
                launch()
    finally:
        fresh.close()
    assert len(rows(p)) == 1 and not p.dropped, p.dropped
    assert not any("were lost" in str(w.message) for w in caught), [str(w.message) for w in caught]


def forced_flush_at_the_last_end(env: Env) -> None:
    """The end of the last profile flushes with CUPTI_ACTIVITY_FLAG_FLUSH_FORCED, so CUPTI
    holds none of kprof's buffers (nor records) for the next profile; an inner profile's end
    does not force."""
    with kprof.profile():
        with kprof.profile():
            launch()
        assert lib.cuptidouble_forced_flushes() == 0
        launch()
        assert lib.cuptidouble_holds_buffer() == 1
    assert lib.cuptidouble_forced_flushes() >= 1
    assert lib.cuptidouble_holds_buffer() == 0


def unknown_kinds_skipped_and_counted(env: Env) -> None:
    """Records of kinds kprof does not read (a newer CUPTI's, of a size kprof never
    compiled) are stepped over with CUPTI's own record size, skipped and counted."""
    before = cuda_activity._reader.stats()["unknown_kinds"] if cuda_activity._reader else 0
    with kprof.profile() as p:
        launch(b"a")
        lib.cuptidouble_other(60, 200)
        lib.cuptidouble_other(61, 24)
        launch(b"b")
    assert [x["name"] for x in rows(p)] == ["a", "b"]
    assert cuda_activity._reader.stats()["unknown_kinds"] - before == 2


def contexts_do_not_collide(env: Env) -> None:
    """Streams of two contexts with the same CUPTI stream id are two queues."""
    with kprof.profile() as p:
        t = lib.cuptidouble_now()
        for ctx in (1, 2):
            corr = lib.cuptidouble_api(DRIVER, LAUNCH, t, t + 100)
            lib.cuptidouble_kernel(
                corr, f"ctx{ctx}".encode(), 0, ctx, 13, 1, 1, 1, 1, 1, 1, t + 200, t + 300
            )
    r = rows(p)
    assert len({x["queue"] for x in r}) == 2, r


def kernels_running_at_the_end_are_waited_for(env: Env) -> None:
    """A kernel still running when its profile ends: CUPTI keeps the buffer holding its record
    (and the launch's API record before it) until it completes, so "nothing is waiting"
    proves nothing; the end waits for the device, then has the row (found on an H200)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with kprof.profile() as p:
            launch(b"long", duration=80_000_000)  # 80 ms on the device
            launch(b"longer", stream=14, duration=120_000_000)
    assert sorted(x["name"] for x in rows(p)) == ["long", "longer"], rows(p)
    assert env.fake.synchronized == [0]
    bad = [
        w for w in caught if "device record" in str(w.message) or "arrived after" in str(w.message)
    ]
    assert not bad, bad
    # Outside every profile nothing is waited for, and an idle device costs no wait.
    with kprof.profile() as p:
        pass
    assert rows(p) == []


def earlier_drops_never_cut_short_the_wait_for_running_kernels(env: Env) -> None:
    """Records CUPTI dropped earlier in the capture (in an outer profile) are no reason to
    stop waiting for kernels still running at an inner profile's end: the end compared the
    drops since the capture started with the launches still missing, before waiting for the
    device, and kept 0 of 5 rows."""
    with kprof.profile():
        for _ in range(3):
            launch(emit=False)
        lib.cuptidouble_complete_buffer()
        lib.cuptiActivityFlushAll(0)
        reader = cuda_activity._reader
        reader.max_buffers = 0  # every buffer refused: the next records are dropped
        reader.apply_limits()
        corrs = [lib.cuptidouble_new_correlation() - 3 + i for i in range(3)]
        for c in corrs:
            for _ in range(20):  # 60 kernel records, dropped
                lib.cuptidouble_kernel(c, b"lost", 0, 1, 13, 1, 1, 1, 1, 1, 1, 10, 20)
        reader.max_buffers = cuda_activity.MAX_BUFFERS
        reader.apply_limits()
        with kprof.profile() as inner:
            # Five launches whose API records CUPTI has handed over, their kernels running
            # (60 ms each) when the profile ends: their records come once they complete.
            launched = [launch(emit=False) for _ in range(5)]
            lib.cuptidouble_complete_buffer()
            lib.cuptiActivityFlushAll(0)
            for corr, begin in launched:
                lib.cuptidouble_kernel(
                    corr, b"running", 0, 1, 13, 1, 1, 1, 1, 1, 1, begin, begin + 60_000_000
                )
    assert [x["name"] for x in rows(inner)] == ["running"] * 5, rows(inner)


def a_failed_launch_is_never_waited_for(env: Env) -> None:
    """A launch whose call failed enqueued nothing: its API record says so (returnValue) and
    no kernel record ever comes. The end waited for it the whole timeout and blamed the
    device; it now leaves it out at once, and the launches that ran have their rows."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with kprof.profile(timeout=5) as p:
            launch(b"before")
            lib.cuptidouble_fail_next(1)  # CUDA_ERROR_INVALID_VALUE
            launch(emit=False)
            launch(b"after")
            flushes = lib.cuptidouble_flushes()
    assert sorted(x["name"] for x in rows(p)) == ["after", "before"], rows(p)
    msgs = [str(w.message) for w in caught]
    assert not any("device may be hung" in m or "no device record" in m for m in msgs), msgs
    # Flushes counted, not time: an end's few (about five), not a poll until the timeout
    # (hundreds) for the failed launch's record.
    assert lib.cuptidouble_flushes() - flushes <= 10, lib.cuptidouble_flushes() - flushes


def a_launch_that_made_no_work_is_not_waited_for(env: Env) -> None:
    """A launch into a stream being captured into a CUDA graph (or an empty graph launch)
    succeeds and enqueues nothing: no kernel record ever comes. The end waited for it the
    whole timeout and blamed the device; once the devices finished and flushes find the same
    launches still without a record, it says so in one line and stops."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with kprof.profile(timeout=5) as p:
            launch(b"before")
            launch(emit=False)  # captured: a successful call, no work
            t = lib.cuptidouble_now()
            lib.cuptidouble_api(DRIVER, GRAPH, t, t + 1000)  # an empty graph: no node
            launch(b"after")
            flushes = lib.cuptidouble_flushes()
    assert sorted(x["name"] for x in rows(p)) == ["after", "before"], rows(p)
    msgs = [str(w.message) for w in caught]
    assert not any("device may be hung" in m for m in msgs), msgs
    said = "2 CUDA launch(es) of the profile made no device record"
    assert sum(said in m for m in msgs) == 1, msgs
    assert env.fake.synchronized, "the end waited for the device before it gave up on them"
    # Flushes counted, not time: about a quarter second of them once the device is idle (at
    # most 5 ms apart), not a poll until the 5 s timeout (about a thousand).
    assert lib.cuptidouble_flushes() - flushes <= 300, lib.cuptidouble_flushes() - flushes


def another_cupti_client_between_two_profiles(env: Env) -> None:
    """torch.profiler's Kineto registers its own buffer and timestamp callbacks at each trace,
    and CUPTI keeps one set per process. A kprof profile after such a trace registers kprof's
    again at its start: its rows come (every later profile was silently empty, its end
    waiting out the timeout), placed on the host's clock (the other tool's clock was still
    labelled CLOCK_MONOTONIC)."""
    with kprof.profile() as p:
        launch(b"first")
    assert [x["name"] for x in rows(p)] == ["first"], rows(p)
    assert lib.cuptidouble_other_client_start() == 0  # a trace of the other tool's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with kprof.profile(timeout=1) as p:
            launch(b"second")
    assert [x["name"] for x in rows(p)] == ["second"], ([str(w.message) for w in caught], rows(p))
    (clock,) = p.clocks.values()
    if cuda_activity._reader.compiled:  # kprof's timestamp callback is CUPTI's again
        assert "timestamp callback" in clock.method and clock.error_ns == 0, clock
    assert p.start_ns - clock.error_ns <= rows(p)[0]["start"] <= p.end_ns + clock.error_ns


def a_buffer_of_another_client_is_read_never_freed(env: Env) -> None:
    """A buffer the other tool lent CUPTI is completed through kprof's callbacks once kprof's
    replaced its own, with kprof's profile's records in it. kprof reads it and neither frees
    nor reuses it (the compiled reader freed it: another allocator's memory, a crash where
    the other tool frees it too; the double's arena makes a free abort at once)."""
    lib.cuptidouble_other_client_start()
    for kind in (KERNEL_KIND, abi.KIND["DRIVER"]):  # the other tool's trace runs
        lib.cuptiActivityEnable(kind)
    # A call of theirs, in a buffer of the other tool's arena still being filled (its API
    # record only: the double would take a kernel's end on the other tool's clock as work
    # still running on kprof's).
    launch(b"theirs", emit=False)
    with kprof.profile() as p:
        launch(b"mine")  # the same buffer: kprof's callbacks complete it
    assert [x["name"] for x in rows(p)] == ["mine"], (rows(p), cuda_activity._reader.stats())
    assert cuda_activity._reader.stats()["foreign_buffers"] >= 1, cuda_activity._reader.stats()
    assert lib.cuptidouble_other_client_not_its_own() == 0  # nor did it get kprof's


def memory_records_become_allocations(env: Env) -> None:
    """MEMORY2 records (with the API records of their calls, for their scope) become the
    profile's memory: exact sizes, addresses, devices, times on perf_counter_ns, peaks and
    live-at-end. CUPTI wins over CuPy's pool hook: it is not entered, and a pool block made
    meanwhile is not counted twice. A call that made nothing never makes the end wait."""
    offset = 5_000_000_000_000
    lib.cuptidouble_set_clock_offset(offset)
    dev, host = "CUDA 0 (Fake GPU)", "CUDA pinned host memory"
    a, b, c = 0x7000_0000_0000, 0x7000_0010_0000, 0x6000_0000_0000
    with warnings.catch_warnings(record=True) as caught, kprof.profile() as p:
        warnings.simplefilter("always")
        assert lib.cuptidouble_enabled(MEMORY2) == 1
        assert lib.cuptidouble_api_enabled(RUNTIME, RT_MALLOC) == 1
        assert lib.cuptidouble_api_enabled(DRIVER, MEM_ALLOC) == 1
        assert tcf.FakeMemoryHook.hooks() == {}  # CUPTI wins: CuPy's hook not entered
        t_a = memory_call(RT_MALLOC, ALLOCATION, a, 4096)
        launch()
        memory_call(MEM_ALLOC, ALLOCATION, b, 1000, runtime=DRIVER)
        memory_call(RT_FREE, RELEASE, a, 4096)
        memory_call(RT_MALLOC_HOST, ALLOCATION, c, 256, kind=PINNED_MEMORY)
        memory_call(RT_FREE, None)  # cudaFree(0): no record; the end must not wait for one
        block = env.mod.ndarray(100)  # a pool block: inside an allocation CUPTI saw
    # The end did not wait for a record of cudaFree(0) (it would have, until the timeout,
    # and said so: "had no device record").
    assert not [w for w in caught if "no device record" in str(w.message)], caught
    assert lib.cuptidouble_enabled(MEMORY2) == 0  # off with the profile
    assert lib.cuptidouble_api_enabled(RUNTIME, RT_MALLOC) == 0
    m = p.memory
    assert [(e.kind, e.device, e.nbytes, e.address) for e in m.events] == [
        ("alloc", dev, 4096, a),
        ("alloc", dev, 1000, b),
        ("free", dev, 4096, a),
        ("alloc", host, 256, c),
    ], m.events
    assert m.peak == {dev: 5096, host: 256} and m.unmatched_frees == 0
    assert [(x.device, x.nbytes, x.address) for x in m.live_at_end] == [
        (dev, 1000, b),
        (host, 256, c),
    ]
    (clock,) = p.clocks.values()
    if lib.cuptidouble_has_timestamp_callback():
        offset = 0  # the compiled reader's records are on the host clock already
    first = m.events[0].time_ns + p.start_ns
    assert abs(first - (t_a - offset)) <= clock.error_ns, (first, t_a - offset)
    assert [r["name"] for r in rows(p)] == ["void scale<float>(float*, float, int)"]
    del block


def memory_outside_the_profile_is_not_recorded(env: Env) -> None:
    """Allocations before the profile (MEMORY2 off: none written), and on a thread the
    profile does not follow (no scope: foreign), are not the profile's."""
    memory_call(RT_MALLOC, ALLOCATION, 0x1000, 64)
    assert lib.cuptidouble_suppressed() > 0
    with kprof.profile(sites=True) as p:
        t = threading.Thread(target=memory_call, args=(RT_MALLOC, ALLOCATION, 0x2000, 128))
        t.start()
        t.join()
        memory_call(RT_MALLOC, ALLOCATION, 0x3000, 512)
    # With sites on, CUPTI's allocation has the allocating call's site, caught by the callback
    # API on the calling thread (its record reaches kprof on the drain thread or at the end).
    line = next(
        n
        for n, text in enumerate(Path(__file__).read_text().splitlines(), 1)
        if text.endswith("# memory_call's call")
    )
    assert [(e.kind, e.nbytes, e.address, e.site) for e in p.memory.events] == [
        ("alloc", 512, 0x3000, f"cupti_child.py:{line} memory_call")
    ], p.memory.events


SCENARIOS: dict[str, Callable[[Env], None]] = {
    f.__name__: f
    for f in (
        records_become_rows,
        cuptis_default_clock_is_the_wall_clock,
        two_profiles_on_two_threads,
        outside_the_profile_is_not_recorded,
        propagated_thread,
        nested_profiles,
        buffers_drained_while_running,
        records_dropped_without_buffers_are_said,
        runtime_api_records,
        graph_launch_records,
        a_batched_copy_is_every_copy_it_made,
        past_the_launch_limit_the_oldest_are_forgotten,
        every_graph_node_is_waited_for,
        late_records_dropped_counted_said,
        subscriber_taken_falls_back_to_events,
        no_double_counting_with_cupti,
        ranges_span_their_work_without_events,
        streams_share_rows_with_events,
        order_independent_join,
        dropped_records_never_make_the_end_wait,
        a_buffer_that_cannot_be_allocated_is_not_held_against_later_ones,
        a_fork_inside_a_profile_leaves_cupti_alone_in_the_child,
        calls_of_an_older_cupti_are_still_enabled_one_by_one,
        a_newer_cupti_than_any_checked_is_said,
        buffer_policy_by_api_version,
        forced_flush_at_the_last_end,
        unknown_kinds_skipped_and_counted,
        contexts_do_not_collide,
        kernels_running_at_the_end_are_waited_for,
        earlier_drops_never_cut_short_the_wait_for_running_kernels,
        a_failed_launch_is_never_waited_for,
        a_launch_that_made_no_work_is_not_waited_for,
        memory_records_become_allocations,
        memory_outside_the_profile_is_not_recorded,
        another_cupti_client_between_two_profiles,
        a_buffer_of_another_client_is_read_never_freed,
    )
}


def main(names: list[str]) -> None:
    results: dict[str, str] = {}
    for name in names:
        env = Env()
        try:
            SCENARIOS[name](env)
            results[name] = "ok"
        except Exception:
            results[name] = traceback.format_exc()
        finally:
            env.close()
    # Which reader ran the scenarios (the parent checks it ran the one it asked for).
    reader = cuda_activity._reader
    results["_reader"] = "none" if reader is None else "compiled" if reader.compiled else "pure"
    print(json.dumps(results))


if __name__ == "__main__":
    main(sys.argv[2:] or list(SCENARIOS))
