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
    ratio = [
        a / b
        for a, b in zip(runs["launch_step_between_windows_ns"], runs["launch_loop_ns"], strict=True)
    ]
    extra = [a - b for a, b in zip(runs["step_outside_ns"], runs["plain_call_ns"], strict=True)]
    out["loop_ratio_between_windows"] = statistics.median(ratio)
    out["step_outside_minus_plain_call_ns"] = statistics.median(extra)
    out["n"], out["launches"], out["rounds"] = n, nl, rounds
    out["targets"] = {"loop_ratio_between_windows": 1.02}
    return out
