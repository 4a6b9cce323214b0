"""Benchmark ``launch`` (``python bench/run.py --only launch``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from harness import alternate, launch_loop, on_path, opencl, recorder_paths


def bench(quick: bool) -> dict[str, Any]:
    """Targets 1 and 2: profiled vs unprofiled (and vs the hand-written event loop), per
    launch, loop plus resolving every launch, with the compiled recorder and pure Python."""
    import kprof

    cl, _ctx, q, _prg, tiny, _busy, _big, _np, buf = opencl()
    # More launches than Recorder.harvest_every, so the profiled loop pays for its harvests.
    n = 500 if quick else 5000
    gsize = (64,)
    call = tiny

    def plain() -> float:
        q.finish()
        r = launch_loop(call, q, buf, n)
        q.finish()
        return r

    def profiled() -> float:
        q.finish()
        with kprof.profile(backends=["opencl"]) as p:
            r = launch_loop(call, q, buf, n)
        assert len(p.kernels) == n, (len(p.kernels), n)
        return r

    def profiled_total() -> float:
        # The whole cost: the loop plus resolving every launch at the end of the profile.
        q.finish()
        t0 = time.perf_counter_ns()
        with kprof.profile(backends=["opencl"]) as p:
            for _ in range(n):
                call(q, gsize, None, buf)
            q.finish()
        r = (time.perf_counter_ns() - t0) / n
        assert len(p.kernels) == n and not p.unresolved, (len(p.kernels), n)
        return r

    def plain_total() -> float:
        q.finish()
        t0 = time.perf_counter_ns()
        for _ in range(n):
            call(q, gsize, None, buf)
        q.finish()
        return (time.perf_counter_ns() - t0) / n

    def native_events() -> float:
        # What a user writes by hand: keep every event, read its profile after the loop.
        q.finish()
        t0 = time.perf_counter_ns()
        evs = [call(q, gsize, None, buf) for _ in range(n)]
        q.finish()
        start, end = cl.profiling_info.START, cl.profiling_info.END
        total = sum(e.get_profiling_info(end) - e.get_profiling_info(start) for e in evs)
        assert total >= 0
        # Inside the timed region, as every other variant pays for it: releasing 5,000 events
        # (clReleaseEvent and the wrapper's dealloc) after the clock stopped made this loop read
        # 0.78x of the unprofiled one, which drops each event as it goes.
        del evs
        return (time.perf_counter_ns() - t0) / n

    def sync_per_launch() -> float:
        # cupyx.profiler.benchmark style (what the host fallback does): wait after each launch.
        q.finish()
        m = max(100, n // 4)
        t0 = time.perf_counter_ns()
        for _ in range(m):
            call(q, gsize, None, buf).wait()
        return (time.perf_counter_ns() - t0) / m

    paths = recorder_paths()
    variants: dict[str, Callable[[], float]] = {
        "unprofiled": plain_total,
        "native_event_loop": native_events,
    }
    for label, compiled in paths.items():
        variants[f"kprof_{label}"] = on_path(compiled, profiled_total)
    variants["unprofiled_loop"] = plain
    for label, compiled in paths.items():
        variants[f"kprof_{label}_loop"] = on_path(compiled, profiled)
    for _ in range(2):  # warm up: compile, allocate, fill kprof's caches
        for v in variants.values():
            v()
    m = alternate(variants, 7 if quick else 31, flip=True)
    m["synchronize_per_launch"] = alternate({"s": sync_per_launch}, 3 if quick else 5)["s"]
    out: dict[str, Any] = {"launches_per_run": n, "rounds": 7 if quick else 31, "ns_per_launch": m}
    for label in paths:
        out[f"ratio_{label}"] = m[f"kprof_{label}"] / m["unprofiled"]
        out[f"ratio_{label}_vs_event_loop"] = m[f"kprof_{label}"] / m["native_event_loop"]
        out[f"ratio_{label}_loop"] = m[f"kprof_{label}_loop"] / m["unprofiled_loop"]
    out["targets"] = {
        "ratio_compiled": 1.25,
        "ratio_compiled_vs_event_loop": 1.15,
        "ratio_pure": 1.9,
    }
    return out
