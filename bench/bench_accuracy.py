"""Benchmark ``accuracy`` (``python bench/run.py --only accuracy``)."""

from __future__ import annotations

import statistics
from typing import Any

from harness import opencl


def bench(quick: bool) -> dict[str, Any]:
    """Target 4: captured launches report exactly their events' times; ranges within 1% / 2 µs."""
    import kprof
    import kprof_opencl

    cl, _ctx, q, _prg, tiny, busy, big, np, buf = opencl()
    start, end = cl.profiling_info.START, cl.profiling_info.END
    with kprof.profile(backends=["opencl"]) as p:
        evs = [tiny(q, (64,), None, buf) for _ in range(200)]
    own = [e.get_profiling_info(end) - e.get_profiling_info(start) for e in evs]
    got = [k.duration_ns for k in p.kernels]
    mismatches = sum(1 for a, b in zip(own, got) if a != b) + abs(len(own) - len(got))

    # A kernel inside a range: the range's device time vs the kernel's own. Two queue states:
    # "idle" (the queue drained before each range: the range then also counts the device
    # waiting for the host to enqueue the kernel) and "busy" (ranges back to back: the range
    # starts when the previous work ends, as in a pipeline). Two sizes of work.
    def ranges_vs_work(iters: int, drain: bool) -> dict[str, Any]:
        busy(q, (4096,), None, big, np.int32(iters)).wait()
        events = []
        with kprof.profile(backends=["opencl"]) as p, kprof_opencl.use_queue(q):
            for _ in range(10 if quick else 30):
                with kprof.range("work"):
                    events.append(busy(q, (4096,), None, big, np.int32(iters)))
                if drain:
                    q.finish()
        works = [e.get_profiling_info(end) - e.get_profiling_info(start) for e in events]
        errors = [r.duration_ns - w for r, w in zip(p.device_ranges, works)]
        med = statistics.median(works)
        bound = max(0.01 * med, 2000)
        return {
            "work_median_ns": med,
            "error_median_ns": statistics.median(errors),
            "error_max_ns": max(errors, key=abs),
            "bound_ns": bound,
            "within_bound": sum(1 for e in errors if abs(e) <= bound),
            "ranges": len(errors),
        }

    ranges = {
        f"{label}_{state}": ranges_vs_work(iters, state == "idle")
        for label, iters in (("short", 100), ("long", 2000))
        for state in ("idle", "busy")
    }
    return {"captured_launches": len(got), "captured_mismatches": mismatches, "ranges": ranges}
