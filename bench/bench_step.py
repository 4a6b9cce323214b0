"""Benchmark ``step`` (``python bench/run.py --only step``): what ``kprof.step()`` costs.

Paired: each round times every variant back to back (order flipped every other round), and
the figures are medians over rounds of the per-round values and ratios, so that drift on a
shared machine hits the variants alike.

- ``step_outside_ns``: ``kprof.step()`` with no profile running, against a call of an empty
  Python function (``plain_call_ns``): one context-variable lookup more.
- ``step_between_windows_ns``: inside ``kprof.profile(schedule=...)`` on a step that opens
  no window (a counter and a comparison), on each recorder path (nothing is recorded there).
- ``loop_ratio_between_windows``: a loop of a tiny OpenCL launch and ``kprof.step()``
  between windows, over the same loop of launches alone, unprofiled (issue 22's target:
  within 2 %).
- ``memory_ratio_windows``: the peak Python memory (tracemalloc) of a run of many windows
  (100 launches a step, 10 steps recorded every 100), handed to ``on_window`` and dropped,
  over that of the same run stopped after one window (issue 22's target: within 1.2x).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from harness import on_path, opencl, recorder_paths


def bench(quick: bool) -> dict[str, Any]:
    import kprof

    _cl, _ctx, q, _prg, tiny, _busy, _big, _np, buf = opencl()
    # Short variants, many rounds: pairs close in time pair up well on a shared machine.
    n = 20_000
    nl = 2_000
    rounds = 7 if quick else 41
    g = (64,)
    step = kprof.step

    def nothing() -> None:
        pass

    def calls(fn: Any) -> float:
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fn()
        return (time.perf_counter_ns() - t0) / n

    # Never reaches a window: every step is between windows.
    far = kprof.schedule(skip_first=10**12, active=1)

    def between(compiled: bool) -> Any:
        def run() -> float:
            with kprof.profile(backends=["opencl"], schedule=far):
                return calls(step)

        return on_path(compiled, run)

    def launches(with_step: bool) -> float:
        q.finish()
        t0 = time.perf_counter_ns()
        if with_step:
            with kprof.profile(backends=["opencl"], schedule=far):
                for _ in range(nl):
                    tiny(q, g, None, buf)
                    step()
        else:
            for _ in range(nl):
                tiny(q, g, None, buf)
        q.finish()
        return (time.perf_counter_ns() - t0) / nl

    paths = recorder_paths()
    runs: dict[str, list[float]] = {}
    for r in range(rounds):
        variants: dict[str, Any] = {
            "plain_call_ns": lambda: calls(nothing),
            "step_outside_ns": lambda: calls(step),
            **{f"step_between_windows_ns_{k}": between(v) for k, v in paths.items()},
            "launch_loop_ns": lambda: launches(False),
            "launch_step_between_windows_ns": lambda: launches(True),
        }
        items = list(variants.items())
        for k, fn in items[::-1] if r % 2 else items:
            runs.setdefault(k, []).append(fn())
    out: dict[str, Any] = {k: statistics.median(v) for k, v in runs.items()}
    out.update(_memory(kprof, tiny, q, buf, quick))
    ratio = [
        a / b
        for a, b in zip(runs["launch_step_between_windows_ns"], runs["launch_loop_ns"], strict=True)
    ]
    extra = [a - b for a, b in zip(runs["step_outside_ns"], runs["plain_call_ns"], strict=True)]
    out["loop_ratio_between_windows"] = statistics.median(ratio)
    out["step_outside_minus_plain_call_ns"] = statistics.median(extra)
    out["n"], out["launches"], out["rounds"] = n, nl, rounds
    out["targets"] = {"loop_ratio_between_windows": 1.02, "memory_ratio_windows": 1.2}
    return out


def _memory(kprof: Any, tiny: Any, q: Any, buf: Any, quick: bool) -> dict[str, Any]:
    """Peak Python memory (tracemalloc) of a long run with windows handed to ``on_window``
    and dropped, against a run of one window: what a long run keeps is one window."""
    import tracemalloc

    per_step, every, active = 100, 100, 10
    windows = 5 if quick else 20
    g = (64,)

    def run(n_windows: int) -> int:
        sched = kprof.schedule(wait=every - active, active=active, repeat=n_windows)
        q.finish()
        tracemalloc.start()
        try:
            with kprof.profile(backends=["opencl"], schedule=sched, on_window=lambda w: None):
                for _ in range(n_windows * every):
                    for _ in range(per_step):
                        tiny(q, g, None, buf)
                    kprof.step()
                q.finish()
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    run(1)  # first-time allocations (caches, interned names) out of the comparison
    one, many = run(1), run(windows)
    return {
        "memory_peak_one_window_bytes": one,
        "memory_peak_windows_bytes": many,
        "memory_windows": windows,
        "memory_launches": windows * every * per_step,
        "memory_ratio_windows": many / one,
    }
