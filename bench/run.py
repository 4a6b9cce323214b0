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


def alternate(
    variants: dict[str, Callable[[], float]], repeats: int, flip: bool = False
) -> dict[str, float]:
    """Run each variant ``repeats`` times, interleaved; the median of each. With ``flip`` every
    other round runs them in reverse order, so that no variant always follows the same one."""
    runs: dict[str, list[float]] = {k: [] for k in variants}
    for r in range(repeats):
        items = list(variants.items())
        for k, v in items[::-1] if flip and r % 2 else items:
            runs[k].append(v())
    return {k: statistics.median(v) for k, v in runs.items()}


# ---------------------------------------------------------------------------------------------


def recorder_paths() -> dict[str, bool]:
    """The recorder paths this install can run: {"compiled": True, "pure": False} or just pure."""
    from kprof_core.low_level import native

    native.use_compiled(True)
    return {"compiled": True, "pure": False} if native.compiled() else {"pure": False}


def on_path(compiled: bool, fn: Callable[[], Any]) -> Callable[[], Any]:
    """``fn`` run with the compiled recorder on or off (kprof_core.low_level.native.use_compiled)."""
    from kprof_core.low_level import native

    def run() -> Any:
        native.use_compiled(compiled)
        try:
            return fn()
        finally:
            native.use_compiled(True)

    return run


def bench_launch(quick: bool) -> dict[str, Any]:
    """Targets 1 and 2: profiled vs unprofiled (and vs the hand-written event loop), per
    launch, loop plus resolving every launch, with the compiled recorder and pure Python."""
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
            out = subprocess.run(
                [sys.executable, "-c", _IDLE_SCRIPT, flag, str(n), str(inner)],
                capture_output=True,
                text=True,
                check=True,
            )
            runs[key].append(float(out.stdout.strip().splitlines()[-1]))
    m = {k: statistics.median(v) for k, v in runs.items()}
    return {
        "ns_per_launch": m,
        "ratio": m["kprof_loaded_idle"] / m["without_kprof"],
        "target_ratio": 1.02,
    }


def bench_range(quick: bool) -> dict[str, Any]:
    """Target 3: kprof.range around one kernel ≤ the kernel + two native markers + 1.5 µs,
    on each recorder path.

    Two figures each. "loop": the host cost inside the loop, with kprof's harvest deferred to
    the end of the profile (Recorder.harvest_every raised), which is what the launching code
    feels for up to harvest_every entries. "total": loop plus resolving, until the range times
    are known: for the hand-written variant, reading each marker pair's profiling info.
    """
    import kprof
    import kprof_opencl
    from kprof_core.recording.recorder import Recorder

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
    variants: dict[str, Callable[[], tuple[float, float]]] = {"kernel_two_markers": kernel_markers}
    for label, compiled in paths.items():
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
        r = m[f"range_around_kernel_{label}"]
        out[f"range_minus_markers_loop_ns_{label}"] = r["loop"] - m["kernel_two_markers"]["loop"]
        out[f"range_minus_markers_total_ns_{label}"] = r["total"] - m["kernel_two_markers"]["total"]
    out["target_extra_ns"] = 1500
    return out


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


def bench_scale(quick: bool) -> dict[str, Any]:
    """A million profiled launches: Python memory per record (tracemalloc), live events, the
    end-of-profile resolution (harvest of what is left and placement, with the device already
    drained, so that it is kprof's own time), the summary and the Chrome trace."""
    import kprof
    from kprof_core.recording.recorder import Recorder

    _cl_mod, _ctx, q, _prg, tiny, _busy, _big, _np, buf = _cl()
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
            rec = kprof.capture.active()
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
    return {
        "import_kprof_s": statistics.median(imp),
        "kprof_backends_s": statistics.median(cli),
        "bare_python_s": bare,
        "targets": {"import_kprof_s": 0.150, "kprof_backends_s": 2.0},
    }


def bench_parts(quick: bool) -> dict[str, Any]:
    """Where kprof's time per launch goes, without PoCL's noise: the capture wrapper and
    ``rec.launch`` around a stand-in for the native enqueue, the harvest of completed events
    (real ones, read back), and the placement at the end; per recorder path, ns per launch."""
    import kprof
    from kprof_core.recording.recorder import Recorder
    from kprof_opencl import capture as ocl_capture

    _cl_mod, _ctx, q, _prg, tiny, _busy, _big, _np, buf = _cl()
    n = 2000 if quick else 20000
    events = [tiny(q, (64,), None, buf) for _ in range(4096)]
    q.finish()
    ev = events[0]

    def native_stand_in(queue: Any, kernel: Any, *args: Any) -> Any:
        return ev

    from kprof_core.host.discovery import registry

    backend = registry.get("opencl")
    g = (64,)
    out: dict[str, Any] = {}
    for label, compiled in recorder_paths().items():

        def parts(compiled: bool = compiled) -> dict[str, float]:
            from kprof_core.low_level import native

            native.use_compiled(compiled)
            wrapper = ocl_capture.kernel_wrapper(native_stand_in, backend)  # compiled or not
            try:
                saved = Recorder.harvest_every, Recorder.max_pending
                Recorder.harvest_every = Recorder.max_pending = 10**9  # no harvest meanwhile
                with kprof.profile(backends=["opencl"]):
                    rec = kprof.capture.active()
                    assert rec is not None
                    t0 = time.perf_counter_ns()
                    for _ in range(n):
                        native_stand_in(q, tiny, g, None, None, None, False, False)
                    t1 = time.perf_counter_ns()
                    for _ in range(n):
                        wrapper(q, tiny, g, None, None, None, False, False)
                    t2 = time.perf_counter_ns()
                    # The harvest, of real completed events (one per entry, as captured).
                    pending = rec._incoming
                    pending[:] = [
                        (*e[:7], events[i % 4096], events[i % 4096], *e[9:])
                        for i, e in enumerate(pending)
                    ]
                    t3 = time.perf_counter_ns()
                    rec.harvest(wait=False)
                    t4 = time.perf_counter_ns()
                    assert not pending
                t5 = time.perf_counter_ns()
                Recorder.harvest_every, Recorder.max_pending = saved
            finally:
                native.use_compiled(True)
            return {
                "wrapper_and_launch": (t2 - t1 - (t1 - t0)) / n,
                "harvest": (t4 - t3) / n,
                "end_of_profile": (t5 - t4) / n,
            }

        runs = [parts() for _ in range(3 if quick else 9)]
        out[label] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    out["launches_per_run"] = n
    return out


def targets_table(r: dict[str, Any]) -> list[str]:
    """The target rows BENCHMARKS.md quotes, as markdown lines (figures are medians)."""
    rows: list[tuple[str, str, str, bool | None]] = []

    def add(what: str, target: str, value: float | None, fmt: str, ok: bool | None) -> None:
        rows.append((what, target, "n/a" if value is None else fmt.format(value), ok))

    la = r.get("launch")
    if la:
        ns = la["ns_per_launch"]
        for label in ("compiled", "pure"):
            if f"ratio_{label}" in la:
                add(
                    f"tiny launch, kprof {label} / unprofiled (loop + resolving; "
                    f"{ns[f'kprof_{label}']:.0f} vs {ns['unprofiled']:.0f} ns)",
                    "≤ 1.25" if label == "compiled" else "≤ 1.9",
                    la[f"ratio_{label}"],
                    "{:.2f}×",
                    la[f"ratio_{label}"] <= (1.25 if label == "compiled" else 1.9),
                )
        if "ratio_compiled_vs_event_loop" in la:
            v = la["ratio_compiled_vs_event_loop"]
            add(
                f"kprof compiled / hand-written event loop ({ns['native_event_loop']:.0f} ns)",
                "≤ 1.15",
                v,
                "{:.2f}×",
                v <= 1.15,
            )
        v = la.get("ratio_pure_vs_event_loop")
        if v is not None:
            add("kprof pure Python / hand-written event loop", "-", v, "{:.2f}×", None)
    idle = r.get("idle")
    if idle:
        add(
            "no profile running, kprof loaded / no kprof",
            "≤ 1.02",
            idle["ratio"],
            "{:.2f}×",
            idle["ratio"] <= 1.02,
        )
    ra = r.get("range")
    if ra:
        for label in ("compiled", "pure"):
            key = f"range_minus_markers_loop_ns_{label}"
            if key in ra:
                add(
                    f"kprof.range around a kernel minus two native markers, loop, {label}",
                    "≤ 1500 ns",
                    ra[key],
                    "{:+.0f} ns",
                    ra[key] <= 1500,
                )
                tot = ra[f"range_minus_markers_total_ns_{label}"]
                add(f"the same, until the times are known, {label}", "-", tot, "{:+.0f} ns", None)
    sc = r.get("scale")
    if sc:
        n = sc["launches"]
        add(
            f"{n:,} launches: Python memory per record",
            "≤ 80 B",
            sc["bytes_per_record"],
            "{:.2f} B",
            sc["bytes_per_record"] <= 80,
        )
        for label, t in sc["seconds"].items():
            add(
                f"{n:,} launches: end-of-profile resolution, {label}",
                "≤ 1 s",
                t["resolution"],
                "{:.2f} s",
                t["resolution"] <= 1,
            )
            add(
                f"{n:,} launches: summary, {label} run",
                "≤ 0.5 s",
                t["summary"],
                "{:.2f} s",
                t["summary"] <= 0.5,
            )
        add(
            f"{n:,} launches: Chrome trace ({sc['chrome_trace_mb']:.0f} MB)",
            "≤ 10 s",
            sc["seconds_chrome_trace"],
            "{:.1f} s",
            sc["seconds_chrome_trace"] <= 10,
        )
        add(
            "most pending entries (live events) seen",
            f"≤ {sc['pending_bound']:,}",
            sc["max_live_pending"],
            "{:,}",
            sc["max_live_pending"] <= sc["pending_bound"],
        )
    ac = r.get("accuracy")
    if ac:
        add(
            "captured launches whose time differs from their event's END − START",
            "0",
            ac["captured_mismatches"],
            "{}",
            ac["captured_mismatches"] == 0,
        )
        for key, rr in ac["ranges"].items():
            state = key.split("_")[1]
            rows.append(
                (
                    f"a range's device time vs its work ({rr['work_median_ns'] / 1e3:.0f} µs,"
                    f" queue {state}): within 1 % or 2 µs",
                    "all",
                    f"{rr['within_bound']}/{rr['ranges']} (median error "
                    f"{rr['error_median_ns'] / 1e3:.1f} µs)",
                    rr["within_bound"] == rr["ranges"],
                )
            )
    st = r.get("startup")
    if st:
        add(
            "import kprof",
            "≤ 150 ms",
            st["import_kprof_s"] * 1e3,
            "{:.0f} ms",
            st["import_kprof_s"] <= 0.150,
        )
        add(
            "kprof backends",
            "≤ 2 s",
            st["kprof_backends_s"],
            "{:.2f} s",
            st["kprof_backends_s"] <= 2,
        )
    lines = ["| what | target | measured | met? |", "| --- | --- | --- | --- |"]
    for what, target, value, ok in rows:
        met = "-" if ok is None else ("yes" if ok else "**no**")
        lines.append(f"| {what} | {target} | {value} | {met} |")
    if la:
        lines += [
            "",
            "| way of timing a tiny launch (loop + resolving) | ns per launch |",
            "| --- | --- |",
        ]
        for k, v in la["ns_per_launch"].items():
            lines.append(f"| {k} | {v:.0f} |")
    pa = r.get("parts")
    if pa:
        lines += [
            "",
            "| kprof's own work per launch (stand-in enqueue) | compiled | pure |",
            "| --- | --- | --- |",
        ]
        for k in ("wrapper_and_launch", "harvest", "end_of_profile"):
            cells = [f"{pa[p][k]:.0f} ns" if p in pa else "n/a" for p in ("compiled", "pure")]
            lines.append(f"| {k.replace('_', ' ')} | {cells[0]} | {cells[1]} |")
    return lines


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


def bench_hook(quick: bool) -> dict[str, Any]:
    """The OpenCL dispatch-table hook beside the Python capture (bench/opencl_hook.py)."""
    sys.path.insert(0, str(HERE))
    from opencl_hook import bench_hook as run

    return run(quick)


def bench_approximate(quick: bool) -> dict[str, Any]:
    """Approximate (~) OpenCL times against exact ones (bench/opencl_approximate.py)."""
    sys.path.insert(0, str(HERE))
    from opencl_approximate import bench_approximate as run

    return run(quick)


BENCHES = {
    "queue": bench_queue,
    "launch": bench_launch,
    "parts": bench_parts,
    "idle": bench_idle,
    "range": bench_range,
    "accuracy": bench_accuracy,
    "scale": bench_scale,
    "startup": bench_startup,
    "hook": bench_hook,
    "approximate": bench_approximate,
}


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
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
        results["device"] = ", ".join(
            f"{p.version} / {d.name}" for p in pyopencl.get_platforms() for d in p.get_devices()
        )
    except Exception as exc:
        print(f"OpenCL is not available: {exc}", file=sys.stderr)
        return 1
    for name in chosen:
        print(f"== {name}", flush=True)
        results[name] = BENCHES[name](args.quick)
        print(json.dumps(results[name], indent=2), flush=True)
    from kprof_core.low_level import native

    results["recorder"] = native.describe()
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")
    print(
        f"\n== targets ({results['date']}, {results['machine']}; {results['device']}; "
        f"recorder: {results['recorder']})"
    )
    print("\n".join(targets_table(results)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
