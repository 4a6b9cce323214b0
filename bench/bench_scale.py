"""Benchmark ``scale`` (``python bench/run.py --only scale``)."""

from __future__ import annotations

import gc
import statistics
import time
import tracemalloc
from typing import Any

from harness import HERE, on_path, opencl, recorder_paths


def bench(quick: bool) -> dict[str, Any]:
    """A million profiled launches: Python memory per record (tracemalloc), live events, the
    end-of-profile resolution (harvest of what is left and placement, with the device already
    drained, so that it is kprof's own time), the summary and the Chrome trace."""
    import kprof
    from kprof_core.recording.recorder import Recorder

    _cl_mod, _ctx, q, _prg, tiny, _busy, _big, _np, buf = opencl()
    n = 100_000 if quick else 1_000_000
    call = tiny
    g = (64,)

    def profile_once(traced: bool) -> dict[str, Any]:
        q.finish()
        gc.collect()
        if traced:
            tracemalloc.start()
            base = tracemalloc.get_traced_memory()[0]
        t0 = time.perf_counter_ns()
        with kprof.profile(backends=["opencl"]) as p:
            rec = kprof.plugin.active()
            assert rec is not None
            for _ in range(n):
                call(q, g, None, buf)
            t_loop = (time.perf_counter_ns() - t0) / 1e9
            q.finish()
            t1 = time.perf_counter()
        t_resolve = time.perf_counter() - t1
        out: dict[str, Any] = {
            "p": p,
            "seconds_profiled_loop": t_loop,
            "seconds_resolution": t_resolve,
            "max_live_pending": rec.pending_high_water,
        }
        if traced:
            gc.collect()
            out["bytes_per_record"] = (tracemalloc.get_traced_memory()[0] - base) / n
            tracemalloc.stop()
        assert len(p.table) == n and not p.unresolved
        return out

    # Memory, once (tracemalloc slows every allocation: its times mean nothing).
    traced = profile_once(traced=True)
    traced.pop("p")
    # Times: each recorder path, alternated, median of the rounds.
    paths = recorder_paths()
    rounds = 1 if quick else 3
    runs: dict[str, dict[str, list[float]]] = {
        k: {"resolution": [], "summary": [], "loop": []} for k in paths
    }
    last: Any = None
    for _ in range(rounds):
        for label, compiled in paths.items():
            r = on_path(compiled, lambda: profile_once(traced=False))()
            last = r.pop("p")
            t = time.perf_counter()
            last.summary()
            runs[label]["summary"].append(time.perf_counter() - t)
            runs[label]["resolution"].append(r["seconds_resolution"])
            runs[label]["loop"].append(r["seconds_profiled_loop"])
            del r
    t1 = time.perf_counter()
    text = last.report()
    t_report = time.perf_counter() - t1
    path = HERE / "scale_trace.json"
    t2 = time.perf_counter()
    last.export_chrome_trace(path)
    t_trace = time.perf_counter() - t2
    size = path.stat().st_size
    path.unlink()
    med = {label: {k: statistics.median(v) for k, v in d.items()} for label, d in runs.items()}
    return {
        "launches": n,
        "bytes_per_record": traced["bytes_per_record"],
        "max_live_pending": traced["max_live_pending"],
        "pending_bound": Recorder.max_pending,
        "seconds": med,
        "seconds_report_text": t_report,
        "seconds_chrome_trace": t_trace,
        "chrome_trace_mb": size / 1e6,
        "report_lines": len(text.splitlines()),
        "targets": {
            "bytes_per_record": 80,
            "seconds_resolution": 1.0,
            "seconds_summary": 0.5,
            "seconds_chrome_trace": 10.0,
        },
    }
