"""Tiny launches at several profile lengths, in CPU time (issue 28: a flat cost per launch).

    python bench/launch_lengths.py [--reps 5] [--lengths 2000,20000,100000] [--total 100000]

Each repetition runs ``bench/launch_cpu.py`` in fresh processes: ``setup`` once, then for each
profile length N the modes ``plain`` (unprofiled), ``events`` (the hand-written loop: every
event kept, its END read after ``finish``) and ``kprof`` (``kprof.profile()`` around each N
launches, ``q.finish()`` and the profile's end, so its resolve, included), TOTAL launches in
all, the order of the modes rotated every repetition. The CPU time of a process's loops
(``process_time``: every thread, PoCL's workers included; the set-up is not counted), per
launch. Printed: the medians per launch and the medians of the per-repetition ratios
kprof / plain and kprof / events. CPU time, not wall: the machine is shared, and the wall time
of a process there says more about its neighbours than about it.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODES = ("plain", "events", "kprof")


def cpu_s(mode: str, n: int, total: int) -> float:
    """The CPU seconds (all threads) of one launch_cpu.py process's loops."""
    cmd = [sys.executable, str(HERE / "launch_cpu.py"), mode, str(n), str(total)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=HERE).stdout
    return int(out.split("loop_cpu_ns")[1].split()[0]) / 1e9


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--lengths", default="2000,20000,100000")
    ap.add_argument("--total", type=int, default=100_000)
    args = ap.parse_args(argv)
    lengths = [int(x) for x in args.lengths.split(",")]
    runs: dict[tuple[int, str], list[float]] = {(n, m): [] for n in lengths for m in MODES}
    for rep in range(args.reps):
        for n in lengths:
            k = rep % len(MODES)
            for mode in MODES[k:] + MODES[:k]:
                runs[n, mode].append(cpu_s(mode, n, args.total))
    base = 0.0
    print(
        f"{args.reps} repetitions, {args.total} launches per process; "
        "µs of CPU per launch (all threads), ratios: medians of the per-repetition ratios"
    )
    print("| launches per profile | plain | events | kprof | kprof / plain | kprof / events |")
    print("| --- | --- | --- | --- | --- | --- |")
    for n in lengths:
        per = {m: [(t - base) / args.total * 1e6 for t in runs[n, m]] for m in MODES}
        vs_plain = statistics.median(k / p for k, p in zip(per["kprof"], per["plain"]))
        vs_events = statistics.median(k / e for k, e in zip(per["kprof"], per["events"]))
        med = {m: statistics.median(v) for m, v in per.items()}
        print(
            f"| {n:,} | {med['plain']:.2f} | {med['events']:.2f} | {med['kprof']:.2f} | "
            f"{vs_plain:.2f} | {vs_events:.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
