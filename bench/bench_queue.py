"""Benchmark ``queue`` (``python bench/run.py --only queue``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from harness import alternate, launch_loop, opencl, per_call_ns


def bench(quick: bool) -> dict[str, Any]:
    """What a profiling queue costs code that is not profiled (kprof creates every queue with
    PROFILING_ENABLE while it captures, and after kprof_opencl.enable_profiling()), and what a
    launch costs inside a profile on a queue with profiling (exact) and one without (observed
    by the watcher thread, approximate)."""
    import warnings

    import kprof
    import kprof_opencl

    cl, ctx, prof_q, _prg, tiny, _busy, _big, np, buf = opencl()
    plain_q = cl.CommandQueue(ctx, prof_q.device)
    n = 500 if quick else 5000
    host = np.empty(64, np.float32)

    def loop(q: Any) -> Callable[[], float]:
        def run() -> float:
            ns = launch_loop(tiny, q, buf, n)
            q.finish()
            return ns

        return run

    def reads(q: Any) -> Callable[[], float]:
        def run() -> float:
            return per_call_ns(lambda: cl.enqueue_copy(q, host, buf), n // 5)

        return run

    def profiled(q: Any) -> Callable[[], float]:
        def run() -> float:
            with kprof.profile(backends=["opencl"]):
                t0 = time.perf_counter_ns()
                launch_loop(tiny, q, buf, n)
                q.finish()
                ns = (time.perf_counter_ns() - t0) / n
            return ns

        return run

    for q in (plain_q, prof_q):  # warm up: compile, first launches
        loop(q)()
    warnings.simplefilter("ignore", kprof_opencl.ProfilingDisabledWarning)
    res = alternate(
        {
            "launch_plain_queue_ns": loop(plain_q),
            "launch_profiling_queue_ns": loop(prof_q),
            "read_plain_queue_ns": reads(plain_q),
            "read_profiling_queue_ns": reads(prof_q),
            "profiled_launch_profiling_queue_ns": profiled(prof_q),
            "profiled_launch_plain_queue_observed_ns": profiled(plain_q),
        },
        repeats=3 if quick else 15,
        flip=True,
    )
    res["launch_ratio"] = res["launch_profiling_queue_ns"] / res["launch_plain_queue_ns"]
    res["read_ratio"] = res["read_profiling_queue_ns"] / res["read_plain_queue_ns"]
    return res
