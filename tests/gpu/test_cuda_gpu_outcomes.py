"""Every launch outcome on a real NVIDIA GPU, through kprof's CUPTI reader (issue 39's device
checks; run by ``scripts/gpu_check.sh`` after the suite, skipped without a GPU or where CUPTI
cannot be used): CUPTI's records per launch with per-API enabling, a profile holding a failed
launch and a stream capture (its end must not wait out the timeout), drops followed by
kernels still running, a burst of a million empty kernels, three threads on three streams with
sites on while a fourth releases the GIL in CUDA calls, and torch.profiler beside kprof in one
process, both ways round, where PyTorch is installed. Figures go to the file named by
``KPROF_GPU_FIGURES`` (merged into what the suite wrote) under ``cupti_outcomes``.
"""

from __future__ import annotations

import json
import os
import threading
import time
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

import kprof

cupy = pytest.importorskip("cupy")
numpy = pytest.importorskip("numpy")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not cupy.cuda.is_available(), reason="needs a CUDA GPU"),
]

SPIN = r"""
extern "C" __global__ void spin_ns(unsigned long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}
"""
EMPTY = r"""extern "C" __global__ void empty_k() {}"""
MS = 1_000_000
FIGURES: dict[str, Any] = {}


@pytest.fixture(scope="module")
def cuda() -> Iterator[kprof.plugin.Backend]:
    try:
        b = kprof.get_backend("cuda")
    except kprof.KprofError:
        import kprof_cuda.plugin

        b = kprof.register_backend(kprof_cuda.plugin.plugin, "cuda")
    from kprof_cuda.plugin import plugin

    if plugin.activity is None or plugin.activity.probe() is not None:
        pytest.skip("CUPTI cannot be used here: these are checks of kprof's CUPTI reader")
    yield b
    path = os.environ.get("KPROF_GPU_FIGURES")
    if path and FIGURES:
        old: dict[str, Any] = {}
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                old = json.load(f)
        with open(path, "w", encoding="utf-8") as f:
            json.dump({**old, "cupti_outcomes": FIGURES}, f, indent=2)


@pytest.fixture(scope="module")
def spin() -> Any:
    k = cupy.RawKernel(SPIN, "spin_ns")
    k((1,), (1,), (numpy.uint64(1000),))
    cupy.cuda.Device().synchronize()
    return k


@pytest.fixture(scope="module")
def empty() -> Any:
    k = cupy.RawKernel(EMPTY, "empty_k")
    k((1,), (1,), ())
    cupy.cuda.Device().synchronize()
    return k


def reader_stats() -> dict[str, int]:
    from kprof_cuda import activity

    assert activity._reader is not None
    return dict(activity._reader.stats())


def said(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught]


def test_records_per_launch(cuda: kprof.plugin.Backend, empty: Any) -> None:
    """With per-API enabling, CUPTI writes an API record, an external correlation record and a
    kernel record per launch (3): more means whole API kinds were enabled (the double assumed
    3; an H200 run read about 9.3)."""
    n = 20_000
    with kprof.profile(backends=["cuda"]) as p:
        before = reader_stats()["records"]
        for _ in range(n):
            empty((1,), (1,), ())
    after = reader_stats()["records"]
    rows = sum(1 for k in p.kernels if k.name == "empty_k")
    FIGURES["records_per_launch"] = {"launches": n, "rows": rows, "per": (after - before) / n}
    assert rows == n
    assert (after - before) / n <= 4, (after - before) / n


def test_a_failed_launch_and_a_stream_capture_do_not_hold_the_end(
    cuda: kprof.plugin.Backend, spin: Any, empty: Any
) -> None:
    """A launch that fails (a block too large) and launches captured into a graph make no
    kernel record: the end neither waits out the timeout nor blames the device; the kernels
    that ran have their rows."""
    timeout = 20
    s = cupy.cuda.Stream(non_blocking=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with kprof.profile(backends=["cuda"], timeout=timeout) as p:
            spin((1,), (1,), (numpy.uint64(MS),))
            with pytest.raises(cupy.cuda.driver.CUDADriverError):
                empty((1,), (4096,), ())  # more threads than a block holds
            with s:
                s.begin_capture()
                empty((1,), (1,), ())
                spin((1,), (1,), (numpy.uint64(MS),))
                graph = s.end_capture()
            spin((1,), (1,), (numpy.uint64(MS),))
            t_end = time.monotonic()
        ended_s = time.monotonic() - t_end
    msgs = said(caught)
    FIGURES["failed_and_captured"] = {"end_s": round(ended_s, 3), "said": msgs}
    assert [k.name for k in p.kernels if k.kind == "kernel"] == ["spin_ns", "spin_ns"], p.kernels
    assert not any("device may be hung" in m for m in msgs), msgs
    assert ended_s < timeout / 2, ended_s  # not the whole timeout
    del graph


def test_drops_then_kernels_still_running(
    cuda: kprof.plugin.Backend, spin: Any, empty: Any
) -> None:
    """Records dropped earlier in the capture (every buffer refused or discarded while 20,000
    launches ran) are no reason to stop waiting for kernels still running at an inner
    profile's end: all five 300 ms kernels are rows."""
    from kprof_cuda import activity

    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        with kprof.profile(backends=["cuda"]) as outer:
            reader = activity._reader
            assert reader is not None
            saved = reader.max_buffers
            reader.max_buffers = 0
            reader.apply_limits()
            try:
                for _ in range(20_000):  # more records than the buffer already lent holds
                    empty((1,), (1,), ())
                cupy.cuda.Device().synchronize()
            finally:
                reader.max_buffers = saved
                reader.apply_limits()
            with kprof.profile(backends=["cuda"]) as inner:
                for _ in range(5):
                    spin((1,), (1,), (numpy.uint64(300 * MS),))
    long = [k for k in inner.kernels if k.name == "spin_ns" and k.duration_ns >= 300 * MS]
    FIGURES["drops_then_running"] = {
        "dropped": outer.dropped.get("cuda", (0, ""))[0],
        "long_rows": len(long),
    }
    assert len(long) == 5, inner.kernels


def test_a_million_empty_kernels(cuda: kprof.plugin.Backend, empty: Any) -> None:
    """A burst of 1M empty kernels: every one a row, or counted as dropped; never silently
    lost."""
    n = 1_000_000
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        with kprof.profile(backends=["cuda"]) as p:
            for _ in range(n):
                empty((1,), (1,), ())
            t_loop = time.perf_counter()
    t1 = time.perf_counter()
    rows = sum(1 for k in p.kernels if k.name == "empty_k")
    dropped = p.dropped.get("cuda", (0, ""))[0]
    FIGURES["million_empty"] = {
        "rows": rows,
        "dropped": dropped,
        "loop_s": round(t_loop - t0, 2),
        "end_s": round(t1 - t_loop, 2),
        "reader": reader_stats(),
    }
    assert rows == n or (rows < n and dropped > 0), (rows, dropped)


def test_three_threads_with_sites_while_a_fourth_releases_the_gil(
    cuda: kprof.plugin.Backend, spin: Any
) -> None:
    """Sites on: CUPTI's callback takes the GIL inside the driver call. Three threads launch on
    their own streams while a fourth copies and synchronizes (CuPy releases the GIL there):
    no deadlock, every kernel a row on its thread, each with a site."""
    stop = threading.Event()
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def launcher() -> None:
        try:
            with cupy.cuda.Stream(non_blocking=True) as s:
                barrier.wait()
                for _ in range(200):
                    spin((1,), (1,), (numpy.uint64(10_000),))
                s.synchronize()
        except BaseException as exc:
            errors.append(exc)

    def releaser() -> None:
        try:
            a = cupy.zeros(1 << 22, dtype=cupy.float32)
            barrier.wait()
            while not stop.is_set():
                a.get()  # a copy to the host: the GIL released inside CUDA
                cupy.cuda.Device().synchronize()
        except BaseException as exc:
            errors.append(exc)

    with kprof.profile(backends=["cuda"], sites=True) as p:
        threads = [
            threading.Thread(target=kprof.propagate(launcher), name=f"launcher{i}", daemon=True)
            for i in range(3)
        ]
        other = threading.Thread(target=kprof.propagate(releaser), name="releaser", daemon=True)
        for t in (*threads, other):
            t.start()
        for t in threads:
            t.join(60)
        stop.set()
        other.join(60)
    assert not any(t.is_alive() for t in (*threads, other)), "a thread hung"
    assert not errors, errors
    rows = [k for k in p.kernels if k.name == "spin_ns"]
    FIGURES["threads_sites_gil"] = {
        "rows": len(rows),
        "with_site": sum(k.site is not None for k in rows),
    }
    assert len(rows) == 600
    assert {k.thread for k in rows} == {"launcher0", "launcher1", "launcher2"}
    assert all(k.site is not None for k in rows)


def _torch_profile(n: int) -> int:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch here has no CUDA")
    x = torch.ones(1 << 16, device="cuda")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            x.mul_(1.0)
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def test_torch_profiler_then_kprof_then_torch_profiler(
    cuda: kprof.plugin.Backend, empty: Any
) -> None:
    """torch.profiler (Kineto) registers its own CUPTI callbacks at each trace: kprof's
    profile after it gets its rows (kprof registers again at its capture's start), and a
    torch.profiler trace after kprof gets its events."""
    first = _torch_profile(10)
    with kprof.profile(backends=["cuda"], timeout=10) as p:
        for _ in range(10):
            empty((1,), (1,), ())
    mine = sum(1 for k in p.kernels if k.name == "empty_k")
    after = _torch_profile(10)
    FIGURES["torch_profiler"] = {"torch_before": first, "kprof": mine, "torch_after": after}
    assert first >= 10 and mine == 10 and after >= 10, FIGURES["torch_profiler"]
