"""Benchmark ``queue`` (``python bench/run.py --only queue``)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from harness import alternate_runs, launch_loop, opencl, paired_ratio, per_call_ns


def bench(quick: bool) -> dict[str, Any]:
    """What a profiling queue costs code that is not profiled (kprof creates every queue with
    PROFILING_ENABLE once kprof and PyOpenCL are both imported), and what a launch costs
    inside a profile on a queue with profiling (exact) and one without (observed,
    approximate). The ratios are medians over rounds of the two variants' figures measured
    side by side in the same round."""
    import warnings

    import kprof
    import kprof_opencl

    cl, ctx, prof_q, _prg, tiny, _busy, _big, np, buf = opencl()
    kprof_opencl.disable_profiling()  # a queue as made before `import kprof`
    plain_q = cl.CommandQueue(ctx, prof_q.device)
    kprof_opencl.enable_profiling()
    n = 500 if quick else 5000
    host = np.empty(64, np.float32)

    def loop(q: Any, clock: Callable[[], int] = time.perf_counter_ns) -> Callable[[], float]:
        def run() -> float:  # the launches and the wait for their work: all the program pays
            t0 = clock()
            launch_loop(tiny, q, buf, n)
            q.finish()
            return (clock() - t0) / n

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
    runs = alternate_runs(
        {
            "launch_plain_queue_ns": loop(plain_q),
            "launch_profiling_queue_ns": loop(prof_q),
            # CPU of every thread of the process (PoCL's workers too): less noisy than wall time
            "launch_plain_queue_cpu_ns": loop(plain_q, time.process_time_ns),
            "launch_profiling_queue_cpu_ns": loop(prof_q, time.process_time_ns),
            "read_plain_queue_ns": reads(plain_q),
            "read_profiling_queue_ns": reads(prof_q),
            "profiled_launch_profiling_queue_ns": profiled(prof_q),
            "profiled_launch_plain_queue_observed_ns": profiled(plain_q),
        },
        repeats=3 if quick else 41,
        flip=True,
    )
    res: dict[str, Any] = {k: statistics.median(v) for k, v in runs.items()}
    res["launch_ratio"] = paired_ratio(runs, "launch_profiling_queue_ns", "launch_plain_queue_ns")
    res["launch_cpu_ratio"] = paired_ratio(
        runs, "launch_profiling_queue_cpu_ns", "launch_plain_queue_cpu_ns"
    )
    res["read_ratio"] = paired_ratio(runs, "read_profiling_queue_ns", "read_plain_queue_ns")
    for k, (a, b) in {
        "launch_ratio_quartiles": ("launch_profiling_queue_ns", "launch_plain_queue_ns"),
        "launch_cpu_ratio_quartiles": (
            "launch_profiling_queue_cpu_ns",
            "launch_plain_queue_cpu_ns",
        ),
    }.items():
        ratios = [x / y for x, y in zip(runs[a], runs[b])]
        res[k] = [round(q, 3) for q in statistics.quantiles(ratios, n=4)] if len(ratios) > 1 else []
    return res
