"""Benchmark ``idle`` (``python bench/run.py --only idle``)."""

from __future__ import annotations

import statistics
import subprocess
import sys
from typing import Any

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
n = int(sys.argv[2]); out = []; cpu = []
for _ in range(int(sys.argv[3])):
    q.finish(); t0 = time.perf_counter_ns(); c0 = time.process_time_ns()
    for _ in range(n):
        k(q, (64,), None, buf)
    q.finish()  # the device's work too: CPU time counts PoCL's worker threads
    out.append((time.perf_counter_ns() - t0) / n); cpu.append((time.process_time_ns() - c0) / n)
print(statistics.median(out), statistics.median(cpu))
"""


def idle(rounds: int, n: int, inner: int) -> dict[str, Any]:
    """The same loop in fresh processes without kprof and with kprof loaded (backends
    described, a profile come and gone), ``rounds`` pairs, the order alternating from pair
    to pair (AB, BA, ...) so that neither side always runs first; the figure is the median
    of the per-pair ratios, with its quartiles."""
    runs: dict[str, list[float]] = {"without_kprof": [], "kprof_loaded_idle": []}
    cpu: dict[str, list[float]] = {"without_kprof": [], "kprof_loaded_idle": []}
    order = (("without_kprof", "0"), ("kprof_loaded_idle", "1"))
    for i in range(rounds):
        for key, flag in order if i % 2 == 0 else order[::-1]:
            out = subprocess.run(
                [sys.executable, "-c", _IDLE_SCRIPT, flag, str(n), str(inner)],
                capture_output=True,
                text=True,
                check=True,
            )
            wall, used = out.stdout.strip().splitlines()[-1].split()
            runs[key].append(float(wall))
            cpu[key].append(float(used))

    def paired(d: dict[str, list[float]]) -> tuple[float, list[float]]:
        r = sorted(a / b for a, b in zip(d["kprof_loaded_idle"], d["without_kprof"]))
        q = statistics.quantiles(r, n=4) if len(r) > 1 else [r[0]] * 3
        return statistics.median(r), [q[0], q[2]]

    ratio, quartiles = paired(runs)
    cpu_ratio, cpu_quartiles = paired(cpu)
    return {
        "ns_per_launch": {k: statistics.median(v) for k, v in runs.items()},
        "cpu_ns_per_launch": {k: statistics.median(v) for k, v in cpu.items()},
        "ratio": ratio,
        "ratio_quartiles": quartiles,
        "cpu_ratio": cpu_ratio,
        "cpu_ratio_quartiles": cpu_quartiles,
        "pairs": rounds,
        "launches_per_process": n * inner,
        "target_ratio": 1.02,
    }


def bench(quick: bool) -> dict[str, Any]:
    """Target 2: with kprof imported and plugins loaded, no profile: ≤ 1.02× without kprof."""
    return idle(*((6, 500, 5) if quick else (40, 2000, 9)))


if __name__ == "__main__":
    import json

    print(json.dumps(idle(int(sys.argv[1]) if sys.argv[1:] else 40, 2000, 9), indent=2))
