"""Benchmark ``range`` (``python bench/run.py --only range``)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from harness import on_path, opencl, recorder_paths


def bench(quick: bool) -> dict[str, Any]:
    """kprof.range around one kernel ≤ the kernel + two native markers + 1.5 µs compiled, + 4
    µs pure, until the times are known (``TARGET_EXTRA_NS``), on each recorder path against
    the markers on the same path.

    Two figures each. "loop": the host cost inside the loop, with kprof's harvest deferred to
    the end of the profile (Recorder.harvest_every raised), which is what the launching code
    feels for up to harvest_every entries. "total": loop plus resolving, until the range times
    are known: for the hand-written variant, reading each marker pair's profiling info.
    """
    import kprof
    import kprof_opencl
    from kprof_core.recording.recorder import Recorder

    cl, _ctx, q, _prg, tiny, _busy, _big, _np, buf = opencl()
    n = 300 if quick else 1000
    call = tiny
    marker = cl._cl._enqueue_marker_with_wait_list  # the cheapest native marker, as kprof uses
    start_info, end_info = cl.profiling_info.START, cl.profiling_info.END
    g = (64,)

    def kernel_markers() -> tuple[float, float]:
        q.finish()
        with kprof.profile(backends=["opencl"]):
            t0 = time.perf_counter_ns()
            pairs = []
            for _ in range(n):
                m0 = marker(q, None)
                call(q, g, None, buf)
                pairs.append((m0, marker(q, None)))
            t1 = time.perf_counter_ns()
            q.finish()
            times = [
                b.get_profiling_info(end_info) - a.get_profiling_info(start_info) for a, b in pairs
            ]
            assert len(times) == n
            t2 = time.perf_counter_ns()
        return (t1 - t0) / n, (t2 - t0) / n

    def kernel_range() -> tuple[float, float]:
        q.finish()
        rng = kprof.range
        t0 = time.perf_counter_ns()
        with kprof.profile(backends=["opencl"]) as p, kprof_opencl.use_queue(q):
            t0 = time.perf_counter_ns()
            for _ in range(n):
                with rng("r"):
                    call(q, g, None, buf)
            t1 = time.perf_counter_ns()
            q.finish()
        t2 = time.perf_counter_ns()
        assert len(p.device_ranges) == n, len(p.device_ranges)
        return (t1 - t0) / n, (t2 - t0) / n

    saved = Recorder.harvest_every
    Recorder.harvest_every = 10**9
    paths = recorder_paths()
    # The markers on each recorder path too: the kernel inside is captured by that path, and
    # its cost is not the range's.
    variants: dict[str, Callable[[], tuple[float, float]]] = {}
    for label, compiled in paths.items():
        variants[f"kernel_two_markers_{label}"] = on_path(compiled, kernel_markers)
        variants[f"range_around_kernel_{label}"] = on_path(compiled, kernel_range)
    try:
        for _ in range(2):
            for v in variants.values():
                v()
        runs: dict[str, list[tuple[float, float]]] = {k: [] for k in variants}
        for _ in range(7 if quick else 21):
            for k, v in variants.items():
                runs[k].append(v())
    finally:
        Recorder.harvest_every = saved
    m = {
        k: {"loop": statistics.median(a for a, _ in v), "total": statistics.median(b for _, b in v)}
        for k, v in runs.items()
    }
    out: dict[str, Any] = {"ns_per_iteration": m}
    for label in paths:
        r, k = m[f"range_around_kernel_{label}"], m[f"kernel_two_markers_{label}"]
        out[f"range_minus_markers_loop_ns_{label}"] = r["loop"] - k["loop"]
        out[f"range_minus_markers_total_ns_{label}"] = r["total"] - k["total"]
    out["target_extra_ns"] = TARGET_EXTRA_NS
    return out


#: Issue 37: a range around a kernel, the profile's end included, at most the two markers plus
#: this much.
TARGET_EXTRA_NS = {"compiled": 1500, "pure": 4000}
