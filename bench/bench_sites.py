"""Benchmark ``sites`` (``python bench/run.py --only sites``): what keeping each launch's
site costs, per launch, on each recorder path.

Two measures, each as paired rounds (sites on and off run back to back, the order flipped
every other round) whose per-round difference and ratio are taken, then the median:

- ``launch_ns``: a tiny PyOpenCL launch inside a profile (the loop only: the site is found on
  the launch path), sites on minus sites off. The frames walked are PyOpenCL's
  ``Kernel.__call__`` and its generated invoker, then the user's loop.
- ``capture_ns``: the catcher alone, called under the same two library frames (no device:
  the same walk without the launch's noise).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from harness import launch_loop, on_path, opencl, recorder_paths


def _paired(on: Callable[[], float], off: Callable[[], float], rounds: int) -> dict[str, float]:
    diffs, ratios = [], []
    for r in range(rounds):
        if r % 2:
            b, a = off(), on()
        else:
            a, b = on(), off()
        diffs.append(a - b)
        ratios.append(a / b)
    return {"diff_ns": statistics.median(diffs), "ratio": statistics.median(ratios)}


def _capture_ns(compiled: bool, n: int) -> float:
    """ns per ``capture()`` from under two frames of a skipped module (as PyOpenCL's are)."""
    from kprof_core.low_level import native
    from kprof_core.recording import sites

    native.use_compiled(compiled)
    try:
        catcher = sites.catcher(sites.Skipper(), native.compiled())
    finally:
        native.use_compiled(True)
    lib: dict[str, Any] = {"__name__": "pyopencl.fake"}
    exec(
        "def inner(c):\n    return c()\ndef outer(c):\n    return inner(c)\n",
        lib,
    )
    outer, capture = lib["outer"], catcher.capture
    t0 = time.perf_counter_ns()
    for _ in range(n):
        outer(capture)
    with_capture = time.perf_counter_ns() - t0
    t0 = time.perf_counter_ns()
    for _ in range(n):
        outer(int)  # the same frames and calls, nothing caught
    return (with_capture - (time.perf_counter_ns() - t0)) / n


def bench(quick: bool) -> dict[str, Any]:
    import kprof

    _cl, _ctx, q, _prg, tiny, _busy, _big, _np, buf = opencl()
    n = 500 if quick else 5000
    rounds = 7 if quick else 41
    out: dict[str, Any] = {"launches_per_run": n, "rounds": rounds}

    def loop(sites: bool) -> Callable[[], float]:
        def run() -> float:
            q.finish()
            with kprof.profile(backends=["opencl"], sites=sites) as p:
                r = launch_loop(tiny, q, buf, n)
            assert len(p.kernels) == n
            assert (len(p.sites) == 1) if sites else not p.sites, p.sites
            return r

        return run

    for label, compiled in recorder_paths().items():
        on, off = on_path(compiled, loop(True)), on_path(compiled, loop(False))
        for _ in range(2):  # warm up: compile, fill caches
            on(), off()
        out[f"launch_{label}"] = _paired(on, off, rounds)
        cap_on = lambda c=compiled: _capture_ns(c, 20000)  # noqa: E731
        out[f"capture_{label}_ns"] = statistics.median(cap_on() for _ in range(rounds))
    out["targets"] = {"launch_compiled_diff_ns": 500, "launch_pure_diff_ns": 500}
    return out
