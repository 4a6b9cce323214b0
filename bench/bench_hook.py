"""The OpenCL dispatch-table hook's cost per tiny launch, beside PyOpenCL's Python capture.

Five variants, interleaved in one process (order flipped every other round), 64-work-item
kernels on PoCL's CPU device, the loop alone timed (the profile's end is not in it):

- ``py_plain`` / ``c_plain``: unprofiled launches from PyOpenCL (the typed invoker) and from
  C (tests/opencl_clib/clib.c through the system's loader, no event, as VkFFT does);
- ``py_capture``: PyOpenCL launches in a profile as kprof records them: through the hook where
  it records every kernel launch (compiled, every platform hooked), else PyOpenCL's capture;
- ``py_hook``: the same launches recorded by the hook (PyOpenCL's kernel entry put back to the
  native function for the loop where it was patched): the same as ``py_capture`` where the
  hook records them already;
- ``c_hook``: C launches in a profile, recorded by the hook;
- ``c_thread`` / ``c_hook_unattributed``: C launches from a thread outside any profile, without
  and with the hook installed: the hook's own part (its event, the GIL, the recorder lookup,
  nothing recorded), apart from kprof's recording and harvest.

Figures are medians of ratios paired within a round (each variant against its plain twin).

    python bench/bench_hook.py          # or: python bench/run.py --only hook
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def bench(quick: bool) -> dict[str, Any]:
    import numpy as np
    import pyopencl as cl
    import pyopencl._cl as _cl

    import kprof
    import kprof_opencl
    from kprof_opencl import hook

    if hook.module() is None:
        return {"skipped": "the compiled hook is not in use (KPROF_PURE_PYTHON=1 or not built)"}
    sys.path.insert(0, str(ROOT / "tests" / "opencl_clib"))
    from clib import CLib, build, loader

    so = build(Path(tempfile.mkdtemp(prefix="kprof-bench-")))
    if so is None:
        return {"skipped": "no C compiler to build tests/opencl_clib/clib.c"}
    lib = CLib(so, loader())
    dev = kprof_opencl.default_device()
    ctx = cl.Context([dev])
    q = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
    prg = cl.Program(ctx, "__kernel void tiny(__global float *x) { x[get_global_id(0)] += 1; }")
    tiny = prg.build().tiny
    tiny.set_scalar_arg_dtypes([None])
    buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 64 * 4)
    n = 500 if quick else 5000
    gsize = (64,)
    del np

    def py_loop() -> float:
        t0 = time.perf_counter_ns()
        for _ in range(n):
            tiny(q, gsize, None, buf)
        r = (time.perf_counter_ns() - t0) / n
        q.finish()
        return r

    def c_loop() -> float:
        t0 = time.perf_counter_ns()
        lib.loop(q.int_ptr, n)
        return (time.perf_counter_ns() - t0) / n

    def in_thread() -> float:
        got: list[float] = []
        t = threading.Thread(target=lambda: got.append(c_loop()))
        t.start()
        t.join()
        return got[0]

    def unattributed() -> float:
        with kprof.profile(backends=["opencl"]) as p:
            r = in_thread()  # the thread is in no profile: the hook records nothing
        assert not p.kernels
        return r

    def profiled(loop: Any, name: str, native: bool = False) -> float:
        with kprof.profile(backends=["opencl"]) as p:
            wrapper = _cl.enqueue_nd_range_kernel
            native = native and hasattr(wrapper, "__wrapped__")  # else the hook has them already
            if native:  # the hook records PyOpenCL's launches: the Python patch stepped aside
                _cl.enqueue_nd_range_kernel = wrapper.__wrapped__
                try:
                    r = loop()
                finally:
                    _cl.enqueue_nd_range_kernel = wrapper
            else:
                r = loop()
        got = sum(1 for k in p.kernels if k.name == name)
        assert got == n and not p.unresolved, (name, got, n)
        return r

    variants = {
        "py_plain": py_loop,
        "py_capture": lambda: profiled(py_loop, "tiny"),
        "py_hook": lambda: profiled(py_loop, "tiny", native=True),
        "c_plain": c_loop,
        "c_hook": lambda: profiled(c_loop, "kc_tiny"),
        "c_thread": in_thread,
        "c_hook_unattributed": unattributed,
    }
    for _ in range(2):  # warm up: compile, fill caches
        for v in variants.values():
            v()
    rounds = 5 if quick else 21
    runs: dict[str, list[float]] = {k: [] for k in variants}
    for r in range(rounds):
        items = list(variants.items())
        for k, v in items[::-1] if r % 2 else items:
            runs[k].append(v())
    pairs = {
        "py_capture": "py_plain",
        "py_hook": "py_plain",
        "c_hook": "c_plain",
        "c_hook_unattributed": "c_thread",
    }
    out: dict[str, Any] = {
        "launches_per_run": n,
        "rounds": rounds,
        "ns_per_launch": {k: statistics.median(v) for k, v in runs.items()},
        "ratio": {},
        "added_ns": {},
    }
    for k, base in pairs.items():
        out["ratio"][k] = statistics.median(a / b for a, b in zip(runs[k], runs[base]))
        out["added_ns"][k] = statistics.median(a - b for a, b in zip(runs[k], runs[base]))
    out["target_added_ns"] = 500  # Intel's intercept layer, measured in issue 27: +0.47 µs
    return out


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    print(json.dumps(bench(quick), indent=2))
