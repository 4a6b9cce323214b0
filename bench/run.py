"""kprof's benchmarks: one command, side-by-side figures, on PoCL's CPU OpenCL device.

    python bench/run.py            # everything (a few minutes on 2 cores)
    python bench/run.py --quick    # smaller counts, for a smoke run
    python bench/run.py --only launch,range

Every ratio is measured in one run, alternating the variants so that drift on a shared
machine hits them alike; each figure is the median over repeats. Benchmarks report, they never
gate: targets are printed beside the figures. Results also go to bench/results.json.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

KERNEL_SRC = """
__kernel void tiny(__global float *x) { int i = get_global_id(0); x[i] = x[i] + 1.0f; }
__kernel void busy(__global float *x, int n) {
    int i = get_global_id(0); float v = x[i];
    for (int k = 0; k < n; k++) v = v * 0.999f + 0.001f;
    x[i] = v;
}
"""


def _cl() -> Any:
    import numpy as np
    import pyopencl as cl

    ctx = cl.Context(dev_type=cl.device_type.CPU) if _has_cpu(cl) else cl.create_some_context(False)
    q = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
    prg = cl.Program(ctx, KERNEL_SRC).build()
    buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 64 * 4)
    big = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 4096 * 4)
    # The typed invoker: what careful PyOpenCL code (and pyopencl.array) launches with.
    tiny = prg.tiny
    tiny.set_scalar_arg_dtypes([None])
    busy = prg.busy
    busy.set_scalar_arg_dtypes([None, np.int32])
    return cl, ctx, q, prg, tiny, busy, big, np, buf


def _has_cpu(cl: Any) -> bool:
    return any(d.type & cl.device_type.CPU for p in cl.get_platforms() for d in p.get_devices())


def per_call_ns(fn: Callable[[], Any], n: int) -> float:
    t0 = time.perf_counter_ns()
    for _ in range(n):
        fn()
    return (time.perf_counter_ns() - t0) / n


def launch_loop(call: Callable[..., Any], q: Any, buf: Any, n: int) -> float:
    """ns per launch of ``call(q, (64,), None, buf)``, with no extra Python layer around it."""
    gsize = (64,)
    t0 = time.perf_counter_ns()
    for _ in range(n):
        call(q, gsize, None, buf)
    return (time.perf_counter_ns() - t0) / n


def alternate(variants: dict[str, Callable[[], float]], repeats: int,
              flip: bool = False) -> dict[str, float]:
    """Run each variant ``repeats`` times, interleaved; the median of each. With ``flip`` every
    other round runs them in reverse order, so that no variant always follows the same one."""
    runs: dict[str, list[float]] = {k: [] for k in variants}
    for r in range(repeats):
        items = list(variants.items())
        for k, v in (items[::-1] if flip and r % 2 else items):
            runs[k].append(v())
    return {k: statistics.median(v) for k, v in runs.items()}


# ---------------------------------------------------------------------------------------------


def bench_launch(quick: bool) -> dict[str, Any]:
    """Target 1 (profiled ≤ 1.25× unprofiled per launch) and the native floors."""
    import kprof

    cl, _ctx, q, _prg, tiny, _busy, _big, _np, buf = _cl()
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
        with kprof.profile(backends=["opencl"]):
            for _ in range(n):
                call(q, gsize, None, buf)
            q.finish()
        return (time.perf_counter_ns() - t0) / n

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
        return (time.perf_counter_ns() - t0) / n

    def sync_per_launch() -> float:
        # cupyx.profiler.benchmark style (what the host fallback does): wait after each launch.
        q.finish()
        m = max(100, n // 4)
        t0 = time.perf_counter_ns()
        for _ in range(m):
            call(q, gsize, None, buf).wait()
        return (time.perf_counter_ns() - t0) / m

    for _ in range(2):  # warm up: compile, allocate, fill kprof's caches
        plain(), profiled()
    m = alternate({"unprofiled": plain, "profiled": profiled, "unprofiled_total": plain_total,
                   "profiled_total": profiled_total, "native_event_loop": native_events,
                   "synchronize_per_launch": sync_per_launch}, 5 if quick else 15)
    return {
        "launches_per_run": n,
        "ns_per_launch": m,
        "ratio_profiled": m["profiled"] / m["unprofiled"],
        "ratio_profiled_total": m["profiled_total"] / m["unprofiled_total"],
        "target_ratio_profiled": 1.25,
    }


_IDLE_SCRIPT = r"""
import sys, time, statistics
with_kprof = sys.argv[1] == "1"
if with_kprof:
    import kprof
    for b in kprof.backends():
        b.info()
import pyopencl as cl
ctx = cl.Context(dev_type=cl.device_type.CPU)
q = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
prg = cl.Program(ctx, "__kernel void tiny(__global float *x){int i=get_global_id(0); x[i]+=1.0f;}").build()
buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 256)
k = prg.tiny; k.set_scalar_arg_dtypes([None])
if with_kprof:  # a profile came and went: capture must be gone without a trace
    with kprof.profile():
        k(q, (64,), None, buf)
    q.finish()
n = int(sys.argv[2]); out = []
for _ in range(int(sys.argv[3])):
    q.finish(); t0 = time.perf_counter_ns()
    for _ in range(n):
        k(q, (64,), None, buf)
    out.append((time.perf_counter_ns() - t0) / n)
q.finish()
print(statistics.median(out))
"""


def bench_idle(quick: bool) -> dict[str, Any]:
    """Target 2: with kprof imported and plugins loaded, no profile: ≤ 1.02× without kprof."""
    n, inner = (500, 5) if quick else (2000, 9)
    runs: dict[str, list[float]] = {"without_kprof": [], "kprof_loaded_idle": []}
    for _ in range(3 if quick else 7):
        for key, flag in (("without_kprof", "0"), ("kprof_loaded_idle", "1")):
            out = subprocess.run([sys.executable, "-c", _IDLE_SCRIPT, flag, str(n), str(inner)],
                                 capture_output=True, text=True, check=True)
            runs[key].append(float(out.stdout.strip().splitlines()[-1]))
    m = {k: statistics.median(v) for k, v in runs.items()}
    return {"ns_per_launch": m, "ratio": m["kprof_loaded_idle"] / m["without_kprof"],
            "target_ratio": 1.02}


def bench_range(quick: bool) -> dict[str, Any]:
    """Target 3: kprof.range around one kernel ≤ the kernel + two native markers + 1 µs.

    Two figures each. "loop": the host cost inside the loop, with kprof's harvest deferred to
    the end of the profile (Recorder.harvest_every raised), which is what the launching code
    feels for up to harvest_every entries. "total": loop plus resolving, until the range times
    are known: for the hand-written variant, reading each marker pair's profiling info.
    """
    import kprof
    import kprof_opencl
    from kprof_core.recorder import Recorder

    cl, _ctx, q, _prg, tiny, _busy, _big, _np, buf = _cl()
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
            times = [b.get_profiling_info(end_info) - a.get_profiling_info(start_info) for a, b in pairs]
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
    try:
        for _ in range(2):
            kernel_markers(), kernel_range()
        runs: dict[str, list[tuple[float, float]]] = {"kernel_two_markers": [], "range_around_kernel": []}
        for _ in range(5 if quick else 15):
            runs["kernel_two_markers"].append(kernel_markers())
            runs["range_around_kernel"].append(kernel_range())
    finally:
        Recorder.harvest_every = saved
    m = {k: {"loop": statistics.median(a for a, _ in v), "total": statistics.median(b for _, b in v)}
         for k, v in runs.items()}
    return {"ns_per_iteration": m,
            "range_minus_markers_loop_ns": m["range_around_kernel"]["loop"] - m["kernel_two_markers"]["loop"],
            "range_minus_markers_total_ns": m["range_around_kernel"]["total"] - m["kernel_two_markers"]["total"],
            "target_extra_ns": 1000}


def bench_accuracy(quick: bool) -> dict[str, Any]:
    """Target 4: captured launches report exactly their events' times; ranges within 1% / 2 µs."""
    import kprof
    import kprof_opencl

    cl, _ctx, q, _prg, tiny, busy, big, np, buf = _cl()
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
        return {"work_median_ns": med, "error_median_ns": statistics.median(errors),
                "error_max_ns": max(errors, key=abs), "bound_ns": bound,
                "within_bound": sum(1 for e in errors if abs(e) <= bound), "ranges": len(errors)}

    ranges = {f"{label}_{state}": ranges_vs_work(iters, state == "idle")
              for label, iters in (("short", 100), ("long", 2000)) for state in ("idle", "busy")}
    return {"captured_launches": len(got), "captured_mismatches": mismatches, "ranges": ranges}


def bench_scale(quick: bool) -> dict[str, Any]:
    """Target 5: a million profiled launches in bounded memory and bounded live events."""
    import kprof
    from kprof_core.recorder import Recorder

    _cl_mod, _ctx, q, _prg, tiny, _busy, _big, _np, buf = _cl()
    n = 100_000 if quick else 1_000_000
    call = tiny
    g = (64,)
    original_take = Recorder._take
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    t0 = time.perf_counter_ns()
    with kprof.profile(backends=["opencl"]) as p:
        rec = kprof.capture.active()
        assert rec is not None
        for _ in range(n):
            call(q, g, None, buf)
    # The most entries (each holding its launch's event) ever pending at once.
    live_max = rec.pending_high_water
    t_loop = (time.perf_counter_ns() - t0) / 1e9
    gc.collect()
    mem = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    assert Recorder._take is original_take
    t1 = time.perf_counter()
    text = p.report()
    t_summary = time.perf_counter() - t1
    path = HERE / "scale_trace.json"
    t2 = time.perf_counter()
    p.export_chrome_trace(path)
    t_trace = time.perf_counter() - t2
    size = path.stat().st_size
    path.unlink()
    return {
        "launches": n,
        "records": len(p.table),
        "bytes_per_record": mem / n,
        "max_live_pending": live_max,
        "pending_bound": Recorder.max_pending,
        "seconds_profiled_loop": t_loop,
        "seconds_summary": t_summary,
        "seconds_chrome_trace": t_trace,
        "chrome_trace_mb": size / 1e6,
        "report_lines": len(text.splitlines()),
        "targets": {"bytes_per_record": 160, "seconds_summary": 1.0, "seconds_chrome_trace": 10.0},
    }


def bench_startup(quick: bool) -> dict[str, Any]:
    """Target 6: ``import kprof`` ≤ 150 ms, ``kprof backends`` ≤ 2 s (all vendor libraries installed)."""
    reps = 3 if quick else 7
    imp, cli = [], []
    kprof_bin = Path(sys.executable).with_name("kprof")
    for _ in range(reps):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import kprof"], check=True)
        imp.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        subprocess.run([str(kprof_bin), "backends"], check=True, capture_output=True)
        cli.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    bare = time.perf_counter() - t0
    return {"import_kprof_s": statistics.median(imp), "kprof_backends_s": statistics.median(cli),
            "bare_python_s": bare, "targets": {"import_kprof_s": 0.150, "kprof_backends_s": 2.0}}


def bench_queue(quick: bool) -> dict[str, Any]:
    """What a profiling queue costs code that is not profiled (kprof creates every queue with
    PROFILING_ENABLE while it captures, and after kprof_opencl.enable_profiling()), and what a
    launch costs inside a profile on a queue with profiling (exact) and one without (observed
    by the watcher thread, approximate)."""
    import warnings

    import kprof
    import kprof_opencl

    cl, ctx, prof_q, _prg, tiny, _busy, _big, np, buf = _cl()
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
    res = alternate({
        "launch_plain_queue_ns": loop(plain_q), "launch_profiling_queue_ns": loop(prof_q),
        "read_plain_queue_ns": reads(plain_q), "read_profiling_queue_ns": reads(prof_q),
        "profiled_launch_profiling_queue_ns": profiled(prof_q),
        "profiled_launch_plain_queue_observed_ns": profiled(plain_q),
    }, repeats=3 if quick else 15, flip=True)
    res["launch_ratio"] = res["launch_profiling_queue_ns"] / res["launch_plain_queue_ns"]
    res["read_ratio"] = res["read_profiling_queue_ns"] / res["read_plain_queue_ns"]
    return res


BENCHES = {
    "queue": bench_queue,
    "launch": bench_launch,
    "idle": bench_idle,
    "range": bench_range,
    "accuracy": bench_accuracy,
    "scale": bench_scale,
    "startup": bench_startup,
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", help="comma-separated: " + ",".join(BENCHES))
    ap.add_argument("--out", default=str(HERE / "results.json"))
    args = ap.parse_args()
    chosen = args.only.split(",") if args.only else list(BENCHES)
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "command": "python bench/run.py" + (" --quick" if args.quick else ""),
    }
    try:
        import pyopencl

        results["pyopencl"] = ".".join(map(str, pyopencl.VERSION))  # no VERSION_TEXT in 2026.1
        results["device"] = ", ".join(f"{p.version} / {d.name}" for p in pyopencl.get_platforms()
                                      for d in p.get_devices())
    except Exception as exc:
        print(f"OpenCL is not available: {exc}", file=sys.stderr)
        return 1
    for name in chosen:
        print(f"== {name}", flush=True)
        results[name] = BENCHES[name](args.quick)
        print(json.dumps(results[name], indent=2), flush=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
