"""The idle analysis (``Profile.analysis()``) on a million launches: its wall time, median of
repeats, for the shapes that cost most (issue 23's target: at most 1 s).

    python bench/analysis.py            # 1,000,000 launches
    python bench/analysis.py --n 100000

Profiles are synthetic (rows written into the table as a harvest would leave them), so the
figure is the analysis alone, the same on both recorder paths (it calls no recorder code):

- ``launch-bound, 1 queue``: every kernel separated by a gap (the most gaps to split);
- ``device-bound, 1 queue``: back-to-back kernels, a deep queue;
- ``2 queues``: two interleaved queues of one device (sorting, dependencies, overlap);
- ``range "step"``: the first shape over 1,000 range instances.

Each line gives the median wall time and the median CPU time of the process (on a shared
machine, wall time also counts waiting for a core).
"""

from __future__ import annotations

import argparse
import statistics
import time
from array import array

from kprof_core.data.records import (
    KERNEL,
    PLACED,
    DeviceClock,
    HostTable,
    QueueRecord,
    ThreadRecord,
)
from kprof_core.result import Profile


def profile(n: int, shape: str) -> Profile:
    p = Profile()
    p.names = ["k", "step"]
    q1 = QueueRecord("testdev", "testdev 0", "queue 1", "testdev:0")
    q2 = QueueRecord("testdev", "testdev 0", "queue 2", "testdev:0")
    p.queues = [q1, q2]
    p.threads = [ThreadRecord(1, "MainThread")]
    p.clocks = {"testdev:0": DeviceClock("testdev", "testdev 0", "host clock", 0)}
    t = p.table
    base = 10**12
    i = array("q", range(n))
    if shape.startswith("device"):
        ls = array("q", (base + k * 1_000 for k in i))
        st = array("q", (base + 1_000 + k * 20_000 for k in i))
        du = array("q", [20_000]) * n
    else:
        ls = array("q", (base + k * 10_000 for k in i))
        st = array("q", (base + k * 10_000 + 9_000 for k in i))
        du = array("q", [2_000]) * n
    t.name = array("q", [0]) * n
    t.kind = array("q", [KERNEL]) * n
    t.queue = array("q", (k & 1 for k in i)) if shape == "2 queues" else array("q", [0]) * n
    t.thread = array("q", [0]) * n
    t.launch_start = ls
    t.launch_end = array("q", (x + 8_000 for x in ls))
    t.start = st
    t.duration = du
    t.nbytes = array("q", [-1]) * n
    t.flags = array("q", [PLACED]) * n
    p.start_ns, p.end_ns = base, ls[-1] + 8_000
    if shape.startswith("range"):
        step = (p.end_ns - base) // 1_000
        for k in range(1_000):
            p.host.append(1, HostTable.RANGE, 0, base + k * step, base + k * step + step // 2)
    return p


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    for shape in ("launch-bound, 1 queue", "device-bound, 1 queue", "2 queues", 'range "step"'):
        p = profile(args.n, shape)
        rng = "step" if shape.startswith("range") else None
        times, cpu = [], []
        for _ in range(args.repeats):
            t0, c0 = time.perf_counter(), time.process_time()
            a = p.analysis(range=rng)
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        # CPU time beside wall time: on a shared machine the wall time also counts the waits
        # for a core.
        print(
            f"{shape:24} {args.n:>9} launches: median {statistics.median(times):.3f} s wall, "
            f"{statistics.median(cpu):.3f} s CPU (wall min {min(times):.3f}, max "
            f"{max(times):.3f}; target ≤ 1 s)  {a.kind}"
        )


if __name__ == "__main__":
    main()
