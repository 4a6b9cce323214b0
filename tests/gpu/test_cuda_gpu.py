"""The CUDA backend on a real NVIDIA GPU (run by ``scripts/gpu_check.sh``; skipped without one).

Checks device times against ``cupyx.profiler.benchmark``, that launches do not synchronize,
that threads on their own streams are placed side by side, that the event pool creates no
event per launch once warm, ranges, copies and the clock alignment; and measures the host
cost per launch. Where CUPTI can be used (libcupti found, no other tool holding it),
the CUPTI path too: CuPy's own kernels (``a * 2 + b``, ``cupy.sum``, ``x @ y``) one by one,
their device times against events, three threads on three streams, and the cost per launch
with CUPTI on and off. Every test passes on either path; each says which it checked. Figures go to the JSON file named by ``KPROF_GPU_FIGURES`` (if set).

Works from a plain checkout (``PYTHONPATH=.``): when the ``cuda`` entry point is not
installed, the plugin module is registered directly.
"""

from __future__ import annotations

import itertools
import json
import os
import platform
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import kprof
import kprof_cuda
from kprof_cuda.clock import METHOD

cupy = pytest.importorskip("cupy")
numpy = pytest.importorskip("numpy")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not cupy.cuda.is_available(), reason="needs a CUDA GPU"),
]

FIGURES: dict[str, Any] = {}

SPIN = r"""
extern "C" __global__ void spin_ns(unsigned long long ns) {
    // Busy-wait on the GPU's nanosecond clock: a kernel of a known duration, whatever the SM
    // clock frequency does.
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}
"""
EMPTY = r"""extern "C" __global__ void empty_k() {}"""

MS = 1_000_000


@pytest.fixture(scope="module", autouse=True)
def figures() -> Iterator[dict[str, Any]]:
    dev = cupy.cuda.Device()
    props = cupy.cuda.runtime.getDeviceProperties(dev.id)
    rt = cupy.cuda.runtime.runtimeGetVersion()
    drv = cupy.cuda.runtime.driverGetVersion()
    FIGURES["environment"] = {
        "device": props["name"].decode(),
        "devices": cupy.cuda.runtime.getDeviceCount(),
        "cupy": cupy.__version__,
        "cuda_runtime": f"{rt // 1000}.{rt % 1000 // 10}",
        "cuda_driver": f"{drv // 1000}.{drv % 1000 // 10}",
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d"),
    }
    yield FIGURES
    path = os.environ.get("KPROF_GPU_FIGURES")
    if path:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(FIGURES, f, indent=2)


@pytest.fixture(scope="module")
def cuda() -> kprof.plugin.Backend:
    """The ``cuda`` backend, registered from the source tree when not installed."""
    try:
        b = kprof.get_backend("cuda")
    except kprof.KprofError:
        import kprof_cuda.plugin

        b = kprof.register_backend(kprof_cuda.plugin.plugin, "cuda")
    info = b.info(refresh=True)
    assert info.status == "available", info
    FIGURES["environment"]["kprof_backend"] = {"devices": list(info.devices), "detail": info.detail}
    return b


@pytest.fixture(scope="module")
def spin() -> Any:
    k = cupy.RawKernel(SPIN, "spin_ns")
    k((1,), (1,), (numpy.uint64(1000),))  # compile and load now
    cupy.cuda.Device().synchronize()
    return k


@pytest.fixture(scope="module")
def empty() -> Any:
    k = cupy.RawKernel(EMPTY, "empty_k")
    k((1,), (1,), ())
    cupy.cuda.Device().synchronize()
    return k


def profile() -> kprof.profile:
    return kprof.profile(backends=["cuda"])


def cupti_path() -> bool:
    """Whether the cuda backend records kernels through CUPTI here (else: events)."""
    from kprof_cuda.plugin import plugin

    return plugin.activity is not None and plugin.activity.probe() is None


needs_cupti = pytest.mark.skipif(
    "not cupti_path()",
    reason="CUPTI cannot be used here (libcupti not found, or CUPTI taken): events path only",
)


def spin_args(ns: int) -> tuple[tuple[int], tuple[int], tuple[Any]]:
    return (1,), (1,), (numpy.uint64(ns),)


# -- device times ---------------------------------------------------------------------------------


def test_kernel_time_matches_cupyx_benchmark(cuda: kprof.plugin.Backend, spin: Any) -> None:
    from cupyx.profiler import benchmark

    args = spin_args(2 * MS)
    n = 30
    res = benchmark(spin, args, n_repeat=n, n_warmup=3, name="spin_ns")
    bench_ns = statistics.median(res.gpu_times[0]) * 1e9
    k = kprof_cuda.kernel(spin)
    with profile() as p:
        for _ in range(n):
            k(*args)
    rows = [x for x in p.kernels if x.name == "spin_ns"]
    assert len(rows) == n and all(x.error is None and not x.host_timed for x in rows)
    ours = statistics.median(x.duration_ns for x in rows)
    rel = (ours - bench_ns) / bench_ns
    FIGURES["kernel_vs_benchmark"] = {
        "kernel": "spin_ns (2 ms on %globaltimer), 1 thread",
        "runs": n,
        "kprof_median_ns": ours,
        "cupyx_benchmark_median_ns": round(bench_ns),
        "relative_difference": round(rel, 5),
        "kprof_min_ns": min(x.duration_ns for x in rows),
        "kprof_max_ns": max(x.duration_ns for x in rows),
    }
    assert abs(rel) < 0.02
    assert abs(ours - 2 * MS) < 0.02 * 2 * MS  # and both agree with the kernel's own clock


def test_launches_do_not_synchronize(cuda: kprof.plugin.Backend, spin: Any) -> None:
    n, each = 50, 2 * MS
    k = kprof_cuda.kernel(spin)
    args = spin_args(each)
    stream = cupy.cuda.get_current_stream()
    with profile() as p:
        t0 = time.perf_counter_ns()
        for _ in range(n):
            k(*args)
        host_ns = time.perf_counter_ns() - t0
        stream_done = stream.done
        probe = cuda.record_timestamp(cuda)  # a token behind the kernels just launched
        last_done = cuda.timestamp_done(cuda, probe)
        cuda.release_timestamp(cuda, probe)
        in_use = kprof_cuda.pool_stats().in_use
    rows = [x for x in p.kernels if x.name == "spin_ns"]
    FIGURES["no_synchronization"] = {
        "launches": n,
        "kernel_ns": each,
        "device_total_ns": n * each,
        "host_loop_ns": host_ns,
        "stream_done_after_loop": stream_done,
        "last_token_done_after_loop": last_done,
        "events_in_use_after_loop": in_use,
    }
    assert not stream_done and not last_done  # the host got ahead of the device
    assert host_ns < n * each  # far less, in practice: the loop did not wait for kernels
    assert len(rows) == n and all(x.error is None for x in rows)
    assert all(abs(x.duration_ns - each) < 0.02 * each for x in rows)


def test_range_device_time(cuda: kprof.plugin.Backend, spin: Any) -> None:
    with profile() as p:
        with kprof.range("three spins"):
            for _ in range(3):
                spin(*spin_args(MS))
    [r] = p.device_ranges
    [h] = [x for x in p.ranges if x.name == "three spins"]
    spins = [x for x in p.kernels if x.name == "spin_ns"]
    FIGURES["range"] = {
        "device_ns": r.duration_ns,
        "host_ns": h.duration_ns,
        "expected_device_ns": 3 * MS,
        "queue": r.queue,
        "device": r.device,
        "path": "CUPTI" if cupti_path() else "events",
    }
    assert (r.name, r.backend, r.error) == ("three spins", "cuda", None)
    assert h.duration_ns < 3 * MS  # the range's host side did not wait for its kernels
    if not cupti_path():
        assert abs(r.duration_ns - 3 * MS) < 0.02 * 3 * MS
        return
    # With CUPTI the kernels are rows of their own: the range (its events) holds them all,
    # and any time it holds beyond them is the device idling inside it (a figure, not an error).
    assert len(spins) == 3
    first, last = min(x.start_ns for x in spins), max(x.start_ns + x.duration_ns for x in spins)
    slack = next(iter(p.clocks.values())).error_ns or 0
    FIGURES["range"]["kernels_span_ns"] = last - first
    FIGURES["range"]["idle_before_first_kernel_ns"] = first - r.start_ns
    assert r.start_ns <= first + slack and r.start_ns + r.duration_ns >= last - slack
    assert r.duration_ns >= 0.98 * 3 * MS


def test_clock_alignment(cuda: kprof.plugin.Backend, spin: Any) -> None:
    k = kprof_cuda.kernel(spin)
    cupy.cuda.get_current_stream().synchronize()  # an idle stream: the kernel starts at once
    with profile() as p:
        k(*spin_args(MS))
    [x] = p.kernels
    # With CUPTI the kernel row is CUPTI's, placed by its own clock; the wrapper's events
    # (now a range around it) by the events' calibration.
    clock = next(c for c in p.clocks.values() if c.method == METHOD)
    after_launch = x.start_ns - x.launch_start_ns
    FIGURES["clock"] = {
        "method": clock.method,
        "error_ns": clock.error_ns,
        "shift_ns": clock.shift_ns,
        "first_kernel_start_after_launch_start_ns": after_launch,
        "launch_call_ns": x.launch_end_ns - x.launch_start_ns,
    }
    assert clock.method == METHOD
    assert clock.error_ns is not None and clock.error_ns < 1 * MS
    # A correct alignment never puts work before its launch by more than its error bound, so
    # kprof never has to shift the device by more than that.
    assert clock.shift_ns <= clock.error_ns
    assert after_launch >= 0


# -- streams and threads --------------------------------------------------------------------------


def test_three_threads_on_their_own_streams_side_by_side(
    cuda: kprof.plugin.Backend, spin: Any
) -> None:
    k = kprof_cuda.kernel(spin)
    barrier = threading.Barrier(3)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            with cupy.cuda.Stream(non_blocking=True) as s:
                barrier.wait()
                for _ in range(3):
                    k(*spin_args(5 * MS))
                s.synchronize()
        except BaseException as exc:  # surfaced below, not lost in the thread
            errors.append(exc)

    with profile() as p:
        threads = [
            threading.Thread(target=kprof.propagate(work), name=f"worker{i}") for i in range(3)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors, errors
    rows = [x for x in p.kernels if x.name == "spin_ns"]
    assert len(rows) == 9 and all(x.error is None for x in rows)
    by_thread: dict[str, list[Any]] = {}
    for x in rows:
        by_thread.setdefault(x.thread, []).append(x)
    assert sorted(by_thread) == ["worker0", "worker1", "worker2"]
    queues = {t: {x.queue for x in xs} for t, xs in by_thread.items()}
    assert all(len(q) == 1 for q in queues.values())  # one stream per thread
    assert len({next(iter(q)) for q in queues.values()}) == 3  # three different rows
    spans = {
        t: (min(x.start_ns for x in xs), max(x.end_ns for x in xs)) for t, xs in by_thread.items()
    }
    overlap = min(e for _, e in spans.values()) - max(s for s, _ in spans.values())
    FIGURES["three_streams"] = {
        "queues": sorted(next(iter(q)) for q in queues.values()),
        "spans_ns": {t: e - s for t, (s, e) in spans.items()},
        "common_overlap_ns": overlap,
    }
    assert overlap > 0  # the three streams ran side by side on the device


def test_several_devices_each_have_their_clock(cuda: kprof.plugin.Backend, spin: Any) -> None:
    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("one device")
    k = kprof_cuda.kernel(spin)
    with profile() as p:
        for d in (0, 1):
            with cupy.cuda.Device(d):
                k(*spin_args(MS))
    assert len({x.device for x in p.kernels}) == 2 and len(p.clocks) == 2
    assert all(x.error is None for x in p.kernels)


# -- the pool and the cost per launch -------------------------------------------------------------


def test_no_event_is_created_per_launch_once_warm(cuda: kprof.plugin.Backend, empty: Any) -> None:
    k = kprof_cuda.kernel(empty)
    n = 500

    def batch() -> int:
        with profile() as p:
            for _ in range(n):
                k((1,), (1,), ())
        assert len(p.kernels) == n and all(x.error is None for x in p.kernels)
        return kprof_cuda.pool_stats().created

    first = batch()
    second = batch()
    stats = kprof_cuda.pool_stats()
    FIGURES["pool"] = {
        "launches_per_batch": n,
        "created_after_first": first,
        "created_after_second": second,
        "in_use_after": stats.in_use,
        "free_after": stats.free,
    }
    assert second == first
    assert stats.in_use == 0


def _per_launch_ns(fn: Callable[[], None], n: int, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        cupy.cuda.Device().synchronize()
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter_ns() - t0) / n)
    cupy.cuda.Device().synchronize()
    return best


def test_cost_per_launch(cuda: kprof.plugin.Backend, empty: Any) -> None:
    n = 3000
    grid = ((1,), (1,), ())
    wrapped = kprof_cuda.kernel(empty)

    def raw() -> None:
        empty(*grid)

    def kprof_wrapped() -> None:
        wrapped(*grid)

    def two_new_events() -> None:  # what the reference implementation did per launch
        a = cupy.cuda.Event()
        a.record()
        empty(*grid)
        b = cupy.cuda.Event()
        b.record()

    def ranged() -> None:
        with kprof.range("r"):
            pass

    figures = {
        "unprofiled_ns": _per_launch_ns(raw, n),
        "wrapped_outside_profile_ns": _per_launch_ns(kprof_wrapped, n),
        "two_new_events_per_launch_ns": _per_launch_ns(two_new_events, n),
    }
    created = kprof_cuda.pool_stats().created
    with profile() as p:
        figures["profiled_ns"] = _per_launch_ns(kprof_wrapped, n)
        figures["empty_range_profiled_ns"] = _per_launch_ns(ranged, n)
        figures["unprofiled_inside_profile_ns"] = _per_launch_ns(raw, n)
    figures["overhead_ns"] = figures["profiled_ns"] - figures["unprofiled_ns"]
    figures["events_created_during"] = kprof_cuda.pool_stats().created - created
    figures["launches_profiled"] = len(p.kernels)
    FIGURES["cost_per_launch"] = {k: round(v) for k, v in figures.items()}
    # With CUPTI the raw launches inside the profile are recorded too (3 runs of n each).
    expected = (6 if cupti_path() else 3) * n
    FIGURES["cost_per_launch"]["path"] = "CUPTI" if cupti_path() else "events"
    assert len(p.kernels) == expected and all(x.error is None for x in p.kernels)
    assert 0 < figures["unprofiled_ns"] < figures["profiled_ns"]


# -- copies and NVTX ------------------------------------------------------------------------------


def test_copies_are_captured(cuda: kprof.plugin.Backend) -> None:
    if cupti_path():
        pytest.skip("events path only: with CUPTI every copy is reported (test_cupti_copies)")
    host = numpy.ones(16 * 1024 * 1024, dtype=numpy.float32)  # 64 MiB
    d = cupy.asarray(host)  # warm: pinned staging buffers, memory pool
    d.get()
    cupy.cuda.Device().synchronize()
    with profile() as p:
        d = cupy.asarray(host)
        back = d.get()
        d.set(host)
        cupy.asnumpy(d)
        small = cupy.asarray([1, 2, 3])  # a list: not captured (documented)
    assert back.nbytes == host.nbytes and small.size == 3
    rows = p.kernels
    assert [(x.name, x.kind, x.nbytes) for x in rows] == [
        ("[copy host to device]", "copy", host.nbytes),
        ("[copy device to host]", "copy", host.nbytes),
        ("[copy host to device]", "copy", host.nbytes),
        ("[copy device to host]", "copy", host.nbytes),
    ]
    assert all(x.error is None and x.duration_ns > 0 for x in rows)
    FIGURES["copies_64MiB"] = {
        f"{how} {x.name}": {
            "device_ns": x.duration_ns,
            "host_ns": x.launch_end_ns - x.launch_start_ns,
            "GB_per_s": round(x.nbytes / x.duration_ns, 2),
        }
        for how, x in zip(("cupy.asarray", "ndarray.get", "ndarray.set", "cupy.asnumpy"), rows)
    }


def test_nvtx_ranges(cuda: kprof.plugin.Backend, spin: Any) -> None:
    pytest.importorskip("nvtx")
    with profile() as p, kprof.range("nvtx range"):
        spin(*spin_args(MS))
    from kprof_cuda.plugin import plugin

    assert plugin._nvtx is not None
    assert [r.name for r in p.device_ranges] == ["nvtx range"]


def test_demo_workload(cuda: kprof.plugin.Backend) -> None:
    step = cuda.demo_workload(cuda, 1 << 20)
    assert step is not None
    with profile() as p:
        for _ in range(5):
            step()
    assert [x.name for x in p.kernels] == ["mul2", "add"] * 5
    assert all(x.error is None and x.duration_ns > 0 for x in p.kernels)


# -- the CUPTI path (kprof_cuda.activity) -------------------------------------------------------


@needs_cupti
def test_cupti_cupy_operations_show_their_kernels(cuda: kprof.plugin.Backend) -> None:
    """CuPy's own kernels, which no Python wrapper sees, each as a row with its device time."""
    a = cupy.arange(1 << 20, dtype=cupy.float32)
    b = cupy.ones(1 << 20, dtype=cupy.float32)
    x = cupy.ones((512, 512), dtype=cupy.float32)
    (a * 2 + b).sum()  # compile and warm cuBLAS outside the profile
    x @ x
    cupy.cuda.Device().synchronize()
    ops: dict[str, Any] = {
        "a * 2 + b": lambda: a * 2 + b,
        "cupy.sum": lambda: cupy.sum(a),
        "x @ y": lambda: x @ x,
    }
    found: dict[str, list[str]] = {}
    for label, op in ops.items():
        with profile() as p:
            op()
        rows = [k for k in p.kernels if k.kind == "kernel"]
        found[label] = [k.name for k in rows]
        assert rows, f"{label}: no kernel recorded"
        assert all(k.error is None and k.duration_ns > 0 for k in rows)
        assert all(
            p.details.get(i, "").startswith("grid (")
            for i in range(len(p.table))
            if p.table.kind[i] == 0
        )
    FIGURES["cupti_cupy_kernels"] = found
    assert any("multiply" in n or "add" in n for n in found["a * 2 + b"]), found
    assert any("gemm" in n.lower() for n in found["x @ y"]), found


@needs_cupti
def test_cupti_device_times_agree_with_events(cuda: kprof.plugin.Backend, spin: Any) -> None:
    """The same kernel timed by CUPTI (its row) and by events (a range around it): within 2%."""
    n = 20
    with profile() as p:
        for _ in range(n):
            with kprof.range("events"):
                spin(*spin_args(2 * MS))
    kernels = [k for k in p.kernels if k.name == "spin_ns"]
    ranges = [r for r in p.device_ranges if r.name == "events"]
    assert len(kernels) == n and len(ranges) == n
    cupti_ns = statistics.median(k.duration_ns for k in kernels)
    events_ns = statistics.median(r.duration_ns for r in ranges)
    rel = (cupti_ns - events_ns) / events_ns
    FIGURES["cupti_vs_events"] = {
        "kernel": "spin_ns 2 ms",
        "runs": n,
        "cupti_median_ns": cupti_ns,
        "events_median_ns": events_ns,
        "relative_difference": round(rel, 5),
    }
    assert abs(rel) < 0.02
    # Which reader ran, and how CUPTI's clock was placed: the compiled reader's timestamp
    # callback puts records on perf_counter_ns's clock (error 0); the pure one calibrates.
    from kprof_cuda import activity

    compiled = activity._reader is not None and activity._reader.compiled
    methods = [c.method for c in p.clocks.values()]
    FIGURES["cupti_vs_events"]["reader"] = "compiled" if compiled else "pure Python"
    FIGURES["cupti_vs_events"]["clocks"] = methods
    if compiled and activity._reader.timestamp_callback:
        assert any("timestamp callback" in m for m in methods), methods


@needs_cupti
def test_cupti_three_threads_on_three_streams(cuda: kprof.plugin.Backend, spin: Any) -> None:
    """Raw launches (no wrapper) from three threads on their own streams: each kernel on its
    thread's row and its stream's row, side by side."""
    barrier = threading.Barrier(3)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            with cupy.cuda.Stream(non_blocking=True) as s:
                barrier.wait()
                for _ in range(3):
                    spin(*spin_args(5 * MS))
                s.synchronize()
        except BaseException as exc:
            errors.append(exc)

    with profile() as p:
        threads = [
            threading.Thread(target=kprof.propagate(work), name=f"worker{i}") for i in range(3)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors, errors
    rows = [x for x in p.kernels if x.name == "spin_ns"]
    assert len(rows) == 9
    by_thread: dict[str, set[str]] = {}
    for x in rows:
        by_thread.setdefault(x.thread, set()).add(x.queue)
    FIGURES["cupti_three_streams"] = {t: sorted(q) for t, q in by_thread.items()}
    assert sorted(by_thread) == ["worker0", "worker1", "worker2"]
    assert all(len(q) == 1 for q in by_thread.values())
    assert len(set().union(*by_thread.values())) == 3


@needs_cupti
def test_cupti_graph_launches_every_node(cuda: kprof.plugin.Backend, spin: Any, empty: Any) -> None:
    """A CUDA graph of three kernels, the last 20 ms long, launched 5 times and the profile
    ended at once: every node of every launch is a row, with its launch (CUPTI does not say
    how many node records a graph launch has; the end waits for the devices they ran on)."""
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        s.begin_capture()
        empty((1,), (1,), ())
        spin(*spin_args(MS // 10))
        spin(*spin_args(20 * MS))
        g = s.end_capture()
    g.launch(stream=s)  # uploaded outside the profile
    s.synchronize()
    with profile() as p:
        for _ in range(5):
            g.launch(stream=s)
    names = sorted(k.name for k in p.kernels if k.kind == "kernel")
    assert names == ["empty_k"] * 5 + ["spin_ns"] * 10, names
    # Each row has its graph launch's API record (the call's host interval).
    assert all(k.error is None and k.launch_end_ns > k.launch_start_ns for k in p.kernels)
    long = sorted(k.duration_ns for k in p.kernels if k.name == "spin_ns")[5:]
    assert all(d >= 20 * MS for d in long), long
    FIGURES["cupti_graph_launches"] = {"launches": 5, "nodes": 3, "rows": len(names)}


@needs_cupti
def test_cupti_copies(cuda: kprof.plugin.Backend) -> None:
    """With CUPTI, ``ndarray.get`` is one row (CUPTI's), not two."""
    d = cupy.ones(1 << 22, dtype=cupy.float32)
    d.get()
    with profile() as p:
        d.get()
    rows = [(x.name, x.nbytes) for x in p.kernels if x.kind == "copy"]
    FIGURES["cupti_copies"] = rows
    assert rows == [("[copy device to host]", d.nbytes)]


@needs_cupti
def test_cupti_cost_per_launch_on_and_off(cuda: kprof.plugin.Backend, empty: Any) -> None:
    """The host cost of a raw launch with CUPTI's activity kinds on (inside a profile) and off."""
    n = 3000

    def raw() -> None:
        empty((1,), (1,), ())

    off = _per_launch_ns(raw, n)
    with profile() as p:
        on = _per_launch_ns(raw, n)
    FIGURES["cupti_cost_per_launch"] = {
        "cupti_off_ns": round(off),
        "cupti_on_ns": round(on),
        "overhead_ns": round(on - off),
        "kernels_recorded": len(p.kernels),
    }
    assert len(p.kernels) == 3 * n


# -- a training loop's launches (issue 26's loop, on the real GPU) --------------------------------


def _busy_ns(ns: int) -> None:
    end = time.perf_counter_ns() + ns
    while time.perf_counter_ns() < end:
        pass


def _loop(kernel: Any, args: Any, n: int, w_ns: int) -> list[int]:
    """n iterations of w_ns of Python work and one launch: each iteration's time."""
    stamps = [0] * (n + 1)
    cupy.cuda.Device().synchronize()
    for i in range(n):
        stamps[i] = time.perf_counter_ns()
        _busy_ns(w_ns)
        kernel(*args)
    stamps[n] = time.perf_counter_ns()
    cupy.cuda.Device().synchronize()
    return [b - a for a, b in itertools.pairwise(stamps)]


@needs_cupti
def test_cupti_training_loop(cuda: kprof.plugin.Backend, spin: Any) -> None:
    """W µs of Python work plus one raw CuPy launch (a 7 µs kernel) per iteration, profile off
    and on (CUPTI), in alternating rounds; the median of the per-round ratios is the figure.
    Then 600,000 launches at full speed in one profile: drops, memory, the profile's end."""
    args = spin_args(7000)
    rounds = 5
    out: dict[str, Any] = {"kernel": "spin_ns 7 µs, raw CuPy launch", "rounds": rounds}
    for w_us in (2, 7, 20, 100):
        n = min(20_000, 300_000 // (w_us + 8))
        w_ns = w_us * 1000
        ratios, on_its, off_its, ends, recorded = [], [], [], [], []
        for _ in range(rounds):
            off = _loop(spin, args, n, w_ns)
            with profile() as p:
                on = _loop(spin, args, n, w_ns)
                t_end = time.perf_counter_ns()
            ends.append(time.perf_counter_ns() - t_end)
            recorded.append(sum(1 for x in p.kernels if x.name == "spin_ns"))
            ratios.append(statistics.mean(on) / statistics.mean(off))
            on_its += on
            off_its += off
        on_its.sort()
        off_its.sort()

        def p99(xs: list[int]) -> int:
            return xs[int(0.99 * (len(xs) - 1))]

        out[f"W={w_us}us"] = {
            "iterations": n,
            "ratio_median": round(statistics.median(ratios), 4),
            "ratios": [round(r, 4) for r in ratios],
            "off_mean_ns": round(statistics.mean(off_its)),
            "on_mean_ns": round(statistics.mean(on_its)),
            "off_p99_ns": p99(off_its),
            "on_p99_ns": p99(on_its),
            "on_max_ns": on_its[-1],
            "on_over_1ms": sum(1 for x in on_its if x > MS),
            "on_over_5ms": sum(1 for x in on_its if x > 5 * MS),
            "end_of_profile_ms": round(statistics.median(ends) / 1e6, 2),
            "kernels_recorded": recorded,
        }
        assert recorded == [n] * rounds

    def rss_mb() -> float:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

    total = 600_000
    rss0 = rss_mb()
    cupy.cuda.Device().synchronize()
    with profile() as p:
        t0 = time.perf_counter_ns()
        for _ in range(total):
            spin(*args)
        loop_ns = time.perf_counter_ns() - t0
        rss_loop = rss_mb()
        t_end = time.perf_counter_ns()
    end_ns = time.perf_counter_ns() - t_end
    got = sum(1 for x in p.kernels if x.name == "spin_ns")
    out["sustained"] = {
        "launches": total,
        "launches_per_s": round(total / (loop_ns / 1e9)),
        "kernels_recorded": got,
        "dropped": dict(p.dropped),
        "rss_growth_loop_mb": round(rss_loop - rss0, 1),
        "rss_growth_kept_mb": round(rss_mb() - rss0, 1),
        "end_of_profile_s": round(end_ns / 1e9, 3),
        "end_of_profile_s_per_100k_rows": round(end_ns / 1e9 / (got / 1e5), 3) if got else None,
    }
    from kprof_cuda.plugin import plugin

    if plugin.activity is not None:
        out["reader_stats"] = plugin.activity.stats()
    FIGURES["cupti_training_loop"] = out
    assert got + sum(n for n, _ in p.dropped.values()) == total
