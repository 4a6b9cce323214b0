"""An MPI program for tests: every rank runs kernels inside ``kprof.mpi.profile``.

    mpiexec -n 2 python mpi_app.py OUT_DIR [testdev|opencl]

Rank r launches ``work`` r + 1 times and ``only_rank_r`` once, then a host range ``probe``
bracketed by raw ``perf_counter_ns`` readings (unaffected by KPROF_TEST_CLOCK_SKEW_NS). Each
rank saves ``OUT_DIR/prof-{rank}.kprof``; rank 0 saves the gathered, combined profile as
``OUT_DIR/all.kprof`` and the probe brackets as ``OUT_DIR/probes.json``, and prints the report.
"""

from __future__ import annotations

import json
import os
import sys
import time

from mpi4py import MPI

import kprof


def run_kernels(backend: str, rank: int) -> None:
    if backend == "testdev":
        from kprof_testbackend import device

        q = device.Queue()
        with q:
            for _ in range(rank + 1):
                q.launch("work", 100)
            q.launch(f"only_rank_{rank}", 20)
        return
    import numpy as np
    import pyopencl as cl

    ctx = cl.create_some_context(interactive=False)
    queue = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
    prg = cl.Program(
        ctx,
        f"""
        __kernel void work(__global float *a) {{ a[get_global_id(0)] += 1.0f; }}
        __kernel void only_rank_{rank}(__global float *a) {{ a[get_global_id(0)] *= 2.0f; }}
    """,
    ).build()
    a = np.zeros(64, dtype=np.float32)
    buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=a)
    work, only = cl.Kernel(prg, "work"), cl.Kernel(prg, f"only_rank_{rank}")
    for _ in range(rank + 1):
        work(queue, a.shape, None, buf)
    only(queue, a.shape, None, buf)
    queue.finish()


def main() -> None:
    out = sys.argv[1]
    backend = sys.argv[2] if len(sys.argv) > 2 else "testdev"
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    with kprof.mpi.profile(
        output=os.path.join(out, "prof-{rank}.kprof"), backends=[backend]
    ) as run:
        run_kernels(backend, rank)
        before = time.perf_counter_ns()
        with kprof.range("probe"):
            pass
        after = time.perf_counter_ns()
    probes = comm.gather([before, after], root=0)
    if rank == 0:
        assert run.combined is not None
        run.combined.save(os.path.join(out, "all.kprof"))
        with open(os.path.join(out, "probes.json"), "w") as f:
            json.dump(probes, f)
        print(run.report())
    else:
        assert run.combined is None and run.ranks is None


if __name__ == "__main__":
    main()
