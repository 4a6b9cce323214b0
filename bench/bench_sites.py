"""Benchmark ``sites`` (``python bench/run.py --only sites``): what keeping each launch's
site, and its whole stack (``profile(stacks=True)``, depth 32), costs per launch, on each
recorder path.

The measures, each as paired rounds (on and off run back to back, the order flipped every
other round) whose per-round difference and ratio are taken, then the median:

- ``launch_*``: a tiny PyOpenCL launch on PoCL inside a profile (the loop and a ``q.finish()``,
  not the profile's start and end: the site is found on the launch path), sites on minus
  sites off, in three clocks read around the same loop: the launching thread's CPU time
  (``thread_ns``: kprof's own work), the process's CPU time (``process_ns``: all threads, so
  PoCL's workers too, which wake per launch and may charge any host time added between
  launches again), and wall time (``wall_ns``: meaningless on a loaded machine). The frames
  walked are PyOpenCL's generated invoker, then the user's loop (and, pure, kprof's wrapper).
- ``capture_ns``: the catcher alone, called under the same two library frames (no device:
  the same walk without the launch's noise).
- ``stacks_*``: the same tiny launch from 40 frames of the user's code (so that a stack of
  32 frames is walked whole), in the launching thread's CPU time per launch
  (``time.thread_time_ns``: robust to a loaded machine): stacks minus off, stacks minus
  sites, sites minus off (three variants per round, their order rotated round by round).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from harness import on_path, opencl, recorder_paths

CLOCKS = ("thread", "process", "wall")


def _paired(
    on: Callable[[], dict[str, float]], off: Callable[[], dict[str, float]], rounds: int
) -> dict[str, float]:
    """Per clock: the medians of the runs, and of the per-round differences and ratios, with
    the differences' quartiles."""
    runs: dict[str, list[dict[str, float]]] = {"on": [], "off": []}
    for r in range(rounds):
        if r % 2:
            b, a = off(), on()
        else:
            a, b = on(), off()
        runs["on"].append(a)
        runs["off"].append(b)
    out: dict[str, float] = {}
    for c in CLOCKS:
        ons = [x[c] for x in runs["on"]]
        offs = [x[c] for x in runs["off"]]
        diffs = sorted(a - b for a, b in zip(ons, offs))
        q1, _, q3 = statistics.quantiles(diffs, n=4)
        out[f"off_{c}_ns"] = statistics.median(offs)
        out[f"on_{c}_ns"] = statistics.median(ons)
        out[f"diff_{c}_ns"] = statistics.median(diffs)
        out[f"diff_{c}_q1_ns"], out[f"diff_{c}_q3_ns"] = q1, q3
        out[f"ratio_{c}"] = statistics.median(a / b for a, b in zip(ons, offs))
    return out


def _clocked_loop(tiny: Any, q: Any, buf: Any, n: int) -> dict[str, float]:
    """ns per launch of ``tiny(q, (64,), None, buf)``, ``n`` times and a ``q.finish()``, in
    the three clocks."""
    gsize = (64,)
    w0, t0, p0 = time.perf_counter_ns(), time.thread_time_ns(), time.process_time_ns()
    for _ in range(n):
        tiny(q, gsize, None, buf)
    q.finish()
    t1, p1, w1 = time.thread_time_ns(), time.process_time_ns(), time.perf_counter_ns()
    return {"thread": (t1 - t0) / n, "process": (p1 - p0) / n, "wall": (w1 - w0) / n}


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
    if hasattr(os, "getloadavg"):
        out["loadavg_start"] = os.getloadavg()

    def loop(sites: bool) -> Callable[[], dict[str, float]]:
        def run() -> dict[str, float]:
            q.finish()
            with kprof.profile(backends=["opencl"], sites=sites) as p:
                r = _clocked_loop(tiny, q, buf, n)
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
        deep = {m: on_path(compiled, _deep_loop(q, tiny, buf, n, m)) for m in MODES}
        for f in deep.values():
            f()
        out[f"stacks_{label}"] = _three_way(deep, rounds)
    out["targets"] = {
        "launch_compiled_diff_thread_ns": 200,
        "launch_pure_diff_thread_ns": 500,
        "stacks_compiled_diff_ns": 400,
    }
    if hasattr(os, "getloadavg"):
        out["loadavg_end"] = os.getloadavg()
    return out


#: profile() arguments of the variants of ``stacks_*``.
MODES: dict[str, dict[str, Any]] = {
    "off": {"sites": False},
    "sites": {"sites": True},
    "stacks": {"stacks": 32},
}


def _deep_loop(q: Any, tiny: Any, buf: Any, n: int, mode: str) -> Callable[[], float]:
    """ns per launch of the tiny kernel from 40 frames of user code, profiled as ``mode``."""
    import kprof

    def down(k: int) -> float:
        if k:
            return down(k - 1)
        # The launching thread's CPU time, not wall time: what the launch path costs that
        # thread, without PoCL's worker threads and the waits for a core of a loaded machine.
        gsize = (64,)
        t0 = time.thread_time_ns()
        for _ in range(n):
            tiny(q, gsize, None, buf)
        return (time.thread_time_ns() - t0) / n

    def run() -> float:
        q.finish()
        with kprof.profile(backends=["opencl"], **MODES[mode]) as p:
            r = down(40)
        assert len(p.kernels) == n
        assert len(p.stacks) == (1 if mode == "stacks" else 0)
        assert not p.stacks or len(p.stacks[0]) == 32
        return r

    return run


def _three_way(variants: dict[str, Callable[[], float]], rounds: int) -> dict[str, float]:
    """Medians over rounds of the per-round differences (ns) and ratios between variants."""
    keys = list(variants)
    got: dict[str, list[float]] = {k: [] for k in keys}
    pairs = {
        "stacks_minus_off": ("stacks", "off"),
        "stacks_minus_sites": ("stacks", "sites"),
        "sites_minus_off": ("sites", "off"),
    }
    diffs: dict[str, list[float]] = {k: [] for k in pairs}
    ratios: dict[str, list[float]] = {k: [] for k in pairs}
    for r in range(rounds):
        order = keys[r % 3 :] + keys[: r % 3]
        now = {k: variants[k]() for k in order}
        for k in keys:
            got[k].append(now[k])
        for name, (a, b) in pairs.items():
            diffs[name].append(now[a] - now[b])
            ratios[name].append(now[a] / now[b])
    out: dict[str, float] = {f"{k}_ns": statistics.median(v) for k, v in got.items()}
    for name in pairs:
        out[f"{name}_ns"] = statistics.median(diffs[name])
        out[f"{name}_ratio"] = statistics.median(ratios[name])
    return out
