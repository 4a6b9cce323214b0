"""Benchmark ``configs`` (``python bench/run.py --only configs``, or run this file): what a
launch configuration costs per launch, on each recorder path.

A backend that does nothing (int tokens read by ``device_times``, no device) records N
launches through ``rec.launch`` inside a profile, and the profile ends (the harvest, where
configurations are interned, included), timed in CPU time of this thread. Three runs, paired
(the order rotated every round): no configuration (``config=None``), one configuration
repeated (``((4096,), (64,))``: the common case, a loop of one kernel), and 100 distinct ones
in turn. Per round: ns per launch, with minus without; the medians over the rounds.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

N_QUICK, N_FULL = 5_000, 50_000


class _Null:
    """Tokens are ints; the work is done the moment it is launched."""

    import kprof as _k

    @_k.plugin.hookimpl
    def current_queue(self, backend: Any) -> Any:
        return None

    @_k.plugin.hookimpl
    def record_timestamp(self, backend: Any) -> Any:
        return None

    @_k.plugin.hookimpl
    def timestamp_done(self, backend: Any, token: Any) -> bool:
        return True

    @_k.plugin.hookimpl
    def device_times(self, backend: Any, start: Any, stop: Any) -> tuple[int, int]:
        return start, stop

    @_k.plugin.hookimpl
    def queue_info(self, backend: Any, queue: Any) -> Any:
        return self._k.plugin.QueueInfo(device="null", label="q")


def _run(backend: Any, n: int, configs: list[Any], compiled: bool) -> float:
    import kprof
    from kprof_core.low_level import native

    native.use_compiled(compiled)
    kernel, queue, k = kprof.plugin.KERNEL, object(), len(configs)
    tt = time.thread_time_ns
    try:
        t0 = tt()
        with kprof.profile(backends=["bench_configs_null"]) as p:
            launch = kprof.plugin.active().launch  # type: ignore[union-attr]
            for i in range(n):
                launch(backend, kernel, "k", queue, 1, 2, 10 + i, 11 + i, -1, configs[i % k])
        t1 = tt()
    finally:
        native.use_compiled(True)
    assert len(p.kernels) == n and len(p.configs) == (0 if configs == [None] else k)
    return (t1 - t0) / n


def bench(quick: bool) -> dict[str, Any]:
    from harness import recorder_paths

    import kprof

    try:
        backend = kprof.get_backend("bench_configs_null")
    except Exception:
        backend = kprof.register_backend(_Null(), "bench_configs_null")
    n = N_QUICK if quick else N_FULL
    rounds = 5 if quick else 21
    one = [((4096,), (64,))]
    many = [((4096 + i,), (64,)) for i in range(100)]
    out: dict[str, Any] = {"launches_per_run": n, "rounds": rounds}
    for path, compiled in recorder_paths().items():
        runs: dict[str, list[float]] = {"none": [], "one": [], "many": []}
        for r in range(rounds):
            order = [("none", [None]), ("one", one), ("many", many)]
            order = order[r % 3 :] + order[: r % 3]
            for label, cfgs in order:
                runs[label].append(_run(backend, n, cfgs, compiled))
        for label in ("one", "many"):
            diffs = [a - b for a, b in zip(runs[label], runs["none"])]
            ratios = [a / b for a, b in zip(runs[label], runs["none"])]
            out[f"{path}_{label}_minus_none_ns"] = round(statistics.median(diffs), 1)
            out[f"{path}_{label}_ratio"] = round(statistics.median(ratios), 3)
        out[f"{path}_none_ns"] = round(statistics.median(runs["none"]), 1)
    return out


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(bench("--quick" in sys.argv), indent=1))
