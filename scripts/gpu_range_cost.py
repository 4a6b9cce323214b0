"""Where a ``kprof.range``'s time goes on CUDA, CUPTI on and off (diagnostic; needs a GPU).

    python scripts/gpu_range_cost.py     # per-call costs and cProfile's top functions

Run from a checkout (kprof is imported from it). Writes ``range_cost.json`` to ``$OUT`` (or
/tmp). Each figure is the best of 3 loops of 3,000 calls, in nanoseconds per call.
"""

from __future__ import annotations

import cProfile
import io
import json
import os
import pstats
import sys
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.getcwd())

import cupy

import kprof
import kprof_cuda
from kprof_cuda.plugin import plugin

N = 3000


def per_call(fn: Callable[[], Any], n: int = N) -> int:
    best = []
    for _ in range(3):
        cupy.cuda.Device().synchronize()
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fn()
        best.append((time.perf_counter_ns() - t0) / n)
    cupy.cuda.Device().synchronize()
    return round(min(best))


def main() -> None:
    try:
        kprof.get_backend("cuda")
    except kprof.KprofError:
        kprof.register_backend(plugin, "cuda")

    empty = cupy.RawKernel('extern "C" __global__ void empty_k() {}', "empty_k")
    empty((1,), (1,), ())
    cupy.cuda.Device().synchronize()
    ev = cupy.cuda.Event()

    def launch() -> None:
        empty((1,), (1,), ())

    def empty_range() -> None:
        with kprof.range("r"):
            pass

    def range_around_kernel() -> None:
        with kprof.range("r"):
            launch()

    out: dict[str, dict[str, Any]] = {}
    for label, activity in (("cupti", plugin.activity), ("events_only", None)):
        saved = plugin.activity
        plugin.activity = activity
        try:
            r: dict[str, Any] = {"event_record_outside": per_call(ev.record)}
            with kprof.profile(backends=["cuda"]) as p:
                r["event_record_inside"] = per_call(ev.record)
                r["range_empty"] = per_call(empty_range)
                r["range_around_kernel"] = per_call(range_around_kernel)
                r["raw_launch_inside"] = per_call(launch)
                r["pool_created_during"] = kprof_cuda.pool_stats().created
                prof = cProfile.Profile()
                prof.enable()
                for _ in range(N):
                    empty_range()
                prof.disable()
                t_end = time.perf_counter_ns()
            r["end_of_profile_ms"] = round((time.perf_counter_ns() - t_end) / 1e6, 1)
            r["device_ranges"] = len(p.device_ranges)
            s = io.StringIO()
            pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(18)
            r["cprofile_top"] = s.getvalue()[-6000:]
            out[label] = r
        finally:
            plugin.activity = saved
    for label, r in out.items():
        print("=====", label)
        print(json.dumps({k: v for k, v in r.items() if k != "cprofile_top"}))
        print(r["cprofile_top"])
    with open(os.path.join(os.environ.get("OUT", "/tmp"), "range_cost.json"), "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
