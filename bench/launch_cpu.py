"""Tiny PyOpenCL launches on PoCL, for ``perf stat``/``perf record`` from outside (issue 28):

    perf stat -e task-clock,context-switches,cpu-migrations,page-faults \\
        python bench/launch_cpu.py MODE N TOTAL
    perf record -e cpu-clock -F 4999 -g -- python bench/launch_cpu.py kprof 20000 200000

MODE: ``setup`` (the set-up alone, to subtract), ``plain``, ``events`` (the hand-written loop:
every event kept and its END read after ``finish``), ``kprof``, or ``kprof_noharvest`` (no
harvest while the loop runs). TOTAL launches in profiles (or rounds) of N, each ended with
``q.finish()``; it prints the loops' own CPU time (``process_time``). CPU time, not wall: on a shared machine the wall time of one process says
little, and ``perf`` counts every thread (PoCL's workers too).
"""

from __future__ import annotations

import sys
import time

from harness import opencl

import kprof
from kprof_core.recording.recorder import Recorder


def main(mode: str, n: int, total: int) -> None:
    cl, _ctx, q, _prg, tiny, _busy, _big, _np, buf = opencl()
    g = (64,)
    with kprof.profile(backends=["opencl"]):  # capture's first install: part of the set-up
        tiny(q, g, None, buf)
    q.finish()
    if mode == "kprof_noharvest":
        Recorder.harvest_every = Recorder.max_pending = 10**9
    t0 = time.process_time_ns()  # every thread of the process: PoCL's workers too
    for _ in range(0 if mode == "setup" else total // n):
        if mode == "plain":
            for _ in range(n):
                tiny(q, g, None, buf)
            q.finish()
        elif mode == "events":
            evs = [tiny(q, g, None, buf) for _ in range(n)]
            q.finish()
            ends = [e.get_profiling_info(cl.profiling_info.END) for e in evs]
            del evs, ends
        else:
            with kprof.profile(backends=["opencl"]):
                for _ in range(n):
                    tiny(q, g, None, buf)
                q.finish()
    # The loops' CPU time, set-up excluded (bench/launch_lengths.py reads it).
    print(f"loop_cpu_ns {time.process_time_ns() - t0}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
