"""What kprof's benchmarks share: the OpenCL set-up, timing loops, alternation of variants, and
the recorder paths. Each benchmark is a file ``bench/bench_<name>.py`` with a function
``bench(quick: bool) -> dict`` returning its figures; ``python bench/run.py`` runs them all.
"""

from __future__ import annotations

import statistics
import time
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


def opencl() -> Any:
    import numpy as np
    import pyopencl as cl

    ctx = cl.Context(dev_type=cl.device_type.CPU) if has_cpu(cl) else cl.create_some_context(False)
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


def has_cpu(cl: Any) -> bool:
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


def alternate_runs(
    variants: dict[str, Callable[[], float]], repeats: int, flip: bool = False
) -> dict[str, list[float]]:
    """Run each variant ``repeats`` times, interleaved; every figure, round by round. With
    ``flip`` every other round runs them in reverse order, so that no variant always follows
    the same one."""
    runs: dict[str, list[float]] = {k: [] for k in variants}
    for r in range(repeats):
        items = list(variants.items())
        for k, v in items[::-1] if flip and r % 2 else items:
            runs[k].append(v())
    return runs


def alternate(
    variants: dict[str, Callable[[], float]], repeats: int, flip: bool = False
) -> dict[str, float]:
    """:func:`alternate_runs`, the median of each."""
    return {k: statistics.median(v) for k, v in alternate_runs(variants, repeats, flip).items()}


def paired_ratio(runs: dict[str, list[float]], num: str, den: str) -> float:
    """The median over rounds of ``num / den`` measured in the same round."""
    return statistics.median(a / b for a, b in zip(runs[num], runs[den]))


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
