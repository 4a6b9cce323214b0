"""How far approximate (``~``) OpenCL rows are from exact device times, on real programs.

The very same commands are timed both ways: the queue has profiling (their events' END -
START is exact), but kprof is made to treat it as a queue created without (approximate: the
driver's completion callbacks where compiled, else the polling watcher). Per kernel name the
ratio of approximate to exact totals, and per command the smallest ratio (below 1: a row
shorter than the work took). The first round includes PoCL's compile-on-first-launch
(``cold``); the rest are pooled.

    python bench/bench_approximate.py [--quick]     # or: python bench/run.py --only approximate

Programs: a ``pyopencl.array`` chain (elementwise, reductions, copies) and, where installed,
reikna's FFT and matrix multiplication (the program of issue 27).
"""

from __future__ import annotations

import json
import sys
import warnings
from collections.abc import Callable
from typing import Any


def _programs(ctx: Any) -> dict[str, Callable[[Any], None]]:
    import numpy as np
    import pyopencl.array as cla

    rng = np.random.default_rng(0)
    a = rng.standard_normal(1 << 16).astype(np.float32)

    def array_chain(q: Any) -> None:
        x = cla.to_device(q, a)
        for _ in range(20):
            x = (x * 1.5 + 2.0) / 3.0
            cla.sum(x).get()
        x.get()

    progs: dict[str, Callable[[Any], None]] = {"pyopencl.array": array_chain}
    try:
        from reikna.cluda import ocl_api
        from reikna.fft import FFT
        from reikna.linalg import MatrixMul
    except ImportError:
        return progs
    api = ocl_api()
    c = (rng.standard_normal((256, 256)) + 1j * rng.standard_normal((256, 256))).astype(
        np.complex64
    )
    m = rng.standard_normal((256, 256)).astype(np.float32)
    compiled: dict[int, Any] = {}

    def reikna(q: Any) -> None:
        thr = api.Thread(q)
        key = id(q.context)
        if key not in compiled:
            fft = FFT(c).compile(thr)
            mm = MatrixMul(m, m, out_arr=m).compile(thr)
            compiled[key] = (fft, mm)
        fft, mm = compiled[key]
        dc = thr.to_device(c)
        dm = thr.to_device(m)
        out = thr.empty_like(dm)
        for _ in range(10):
            fft(dc, dc)
            mm(out, dm, dm)
        dc.get()
        thr.synchronize()

    progs["reikna"] = reikna
    return progs


def bench(quick: bool) -> dict[str, Any]:
    """Approximate times against the exact ones of the very same commands: the queue has
    profiling, but kprof is made to treat it as a queue without (``_kprof_profiles = False``),
    and every token the approximate path makes is kept with its event."""
    import pyopencl as cl

    import kprof
    import kprof_opencl
    from kprof_opencl import observed

    START, END = cl.profiling_info.START, cl.profiling_info.END
    dev = kprof_opencl.default_device()
    ctx = cl.Context([dev])
    rounds = 3 if quick else 7
    out: dict[str, Any] = {"rounds": rounds, "method": observed.method()}
    warnings.simplefilter("ignore", kprof_opencl.ProfilingDisabledWarning)
    kept: list[tuple[Any, Any]] = []
    track = observed.watcher.track

    def keeping(event: Any, queue: Any, launched: int) -> Any:
        tok = track(event, queue, launched)
        kept.append((event, tok))
        return tok

    observed.watcher.track = keeping  # type: ignore[method-assign]
    try:
        for label, prog in _programs(ctx).items():
            per: dict[str, list[tuple[int, int]]] = {}
            cold: list[tuple[int, int]] = []
            for r in range(rounds):
                q = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
                q._kprof_profiles = False  # timed as a queue without profiling
                kept.clear()
                with kprof.profile(backends=["opencl"]) as p:
                    prog(q)
                assert p.kernels and all(k.approximate for k in p.kernels)
                pairs = []
                for (ev, tok), row in zip(kept, p.kernels):
                    exact = ev.get_profiling_info(END) - ev.get_profiling_info(START)
                    pairs.append((row.name, tok.end - tok.begin, exact))
                if r == 0:
                    cold = [(a, e) for _, a, e in pairs]
                    continue
                for name, a, e in pairs:
                    per.setdefault(name, []).append((a, e))
            allp = [x for v in per.values() for x in v]
            out[label] = {
                "cold_total_ratio": sum(a for a, _ in cold) / sum(e for _, e in cold),
                "total_ratio": sum(a for a, _ in allp) / sum(e for _, e in allp),
                "per_name_total_ratio": {
                    n: sum(a for a, _ in v) / sum(e for _, e in v) for n, v in per.items()
                },
                # Below 1: an approximate row shorter than the work took.
                "per_command_min_ratio": {
                    n: min(a / max(e, 1) for a, e in v) for n, v in per.items()
                },
            }
    finally:
        observed.watcher.track = track  # type: ignore[method-assign]
    return out


if __name__ == "__main__":
    print(json.dumps(bench("--quick" in sys.argv), indent=2))
