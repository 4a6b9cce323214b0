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

Issue 22's long run, on the test backend (its simulated device: no GPU, no PoCL; a launch
is a Python call and a queue put, about 2 µs), apart from ``bench/run.py``::

    python bench/bench_step.py --launches 10000000

100 launches a step, a window of 10 steps every 1,000 (``kprof.schedule(wait=990,
active=10)``), windows handed to ``on_window`` and dropped. Two parts:

- loop: the run itself, untraced. In each cycle the 990 steps between windows are timed,
  and right before or after (order flipped every cycle) the same 990 steps of launches
  unprofiled: in a fresh ``contextvars.Context`` no profile is active and, between windows,
  no capture is installed, so that is the program without kprof (``kprof.step()`` there is
  its outside-any-profile lookup). Figure: the median over cycles of the per-cycle ratio.
  The unprofiled steps are extra: the process launches twice the count.
- memory: the same run again under ``tracemalloc`` (5x slower), its peak against that of
  the same schedule stopped after its first window (1,000 steps). The test device's queue
  is drained at each step in both, so that its backlog (a worker thread behind the
  launches) is not counted as kprof's.
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


def long_run(
    launches: int, per_step: int = 100, every: int = 1000, active: int = 10
) -> dict[str, Any]:
    """Issue 22's long run on the test backend (see the module docstring)."""
    import contextvars
    import gc
    import os
    import tracemalloc

    os.environ["KPROF_TESTDEV_CLOCK"] = "simulated"
    from kprof_testbackend import device

    import kprof

    q = device.Queue()
    steps = launches // per_step
    cycles = steps // every
    wait = every - active
    sched = kprof.schedule(wait=wait, active=active)
    step = kprof.step
    kept: list[int] = []

    def window(w: Any) -> None:
        kept.append(len(w.kernels))

    def run_steps(n: int, drain: bool = False) -> None:
        launch = q.launch
        for _ in range(n):
            for _ in range(per_step):
                launch("k")
            if drain:
                q.finish()
            step()

    def timed(n: int) -> int:
        q.finish()
        t0 = time.perf_counter_ns()
        run_steps(n)
        q.finish()
        return time.perf_counter_ns() - t0

    # -- the loop: between windows against unprofiled, in pairs of `sub` steps
    sub = 30  # 3,000 launches, about 6 ms: pairs close in time pair up well when loaded
    ratios: list[float] = []
    between: list[int] = []
    plain: list[int] = []
    t_run = time.perf_counter()
    with kprof.profile(backends=["testdev"], schedule=sched, on_window=window) as p:
        for _c in range(cycles):
            done = 0
            while done < wait:
                n = min(sub, wait - done)
                pair = [0, 0]
                for which in (0, 1) if len(ratios) % 2 else (1, 0):
                    if which == 0:  # steps of the cycle's wait: between windows
                        pair[0] = timed(n)
                    else:
                        pair[1] = contextvars.Context().run(timed, n)
                done += n
                if n == sub:
                    between.append(pair[0])
                    plain.append(pair[1])
                    ratios.append(pair[0] / pair[1])
            run_steps(active)  # the window's steps; the last one's step() delivers it
    t_run = time.perf_counter() - t_run
    q.finish()
    assert p.meta["windows"]["delivered"] == cycles and kept == [active * per_step] * cycles

    # -- the memory: the whole run and one window, under tracemalloc
    def peak(n_cycles: int) -> tuple[int, int]:
        """The peak, and what is left after the last window and a full collection (which
        also empties CPython's free lists of small objects, that tracemalloc counts)."""
        s1 = kprof.schedule(wait=wait, active=active, repeat=n_cycles)
        q.finish()
        tracemalloc.start()
        try:
            with kprof.profile(backends=["testdev"], schedule=s1, on_window=lambda w: None):
                run_steps(n_cycles * every, drain=True)
                gc.collect()
                left = tracemalloc.get_traced_memory()[0]
            return tracemalloc.get_traced_memory()[1], left
        finally:
            tracemalloc.stop()

    peak(1)  # first-time allocations out of the comparison
    t_mem = time.perf_counter()
    many, many_left = peak(cycles)
    t_mem = time.perf_counter() - t_mem
    one, one_left = peak(1)
    q.close()
    return {
        "launches_profiled_run": cycles * every * per_step,
        "launches_recorded": sum(kept),
        "windows": cycles,
        "loop_pairs": len(ratios),
        "loop_ratio_between_windows_median": statistics.median(ratios),
        "loop_ratio_between_windows_quartiles": statistics.quantiles(ratios, n=4),
        "between_windows_ns_per_launch_median": statistics.median(between) / (sub * per_step),
        "unprofiled_ns_per_launch_median": statistics.median(plain) / (sub * per_step),
        "run_seconds": t_run,
        "memory_peak_one_window_bytes": one,
        "memory_peak_run_bytes": many,
        "memory_ratio": many / one,
        "memory_left_one_window_bytes": one_left,
        "memory_left_run_bytes": many_left,
        "memory_run_seconds": t_mem,
        "targets": {"loop_ratio_between_windows_median": 1.02, "memory_ratio": 1.2},
    }


if __name__ == "__main__":
    import argparse
    import json

    ap = argparse.ArgumentParser(description="issue 22's long run on the test backend")
    ap.add_argument("--launches", type=int, default=10_000_000)
    args = ap.parse_args()
    print(json.dumps(long_run(args.launches), indent=1))
