"""Blocking reads into fresh numpy arrays, with or without a profile; prints the peak RSS in KiB.

Usage: opencl_copy_loop.py MEGABYTES LOOPS plain|profiled [plain-queue]
"""

import resource
import sys

import numpy as np
import pyopencl as cl

import kprof
import kprof_opencl

mb, loops, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
plain_queue = "plain-queue" in sys.argv[4:]
device = kprof_opencl.default_device()
queue = (
    cl.CommandQueue(cl.Context([device])) if plain_queue else kprof_opencl.profiling_queue(device)
)
n = mb * 2**20 // 4
buf = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, n * 4)
cl.enqueue_fill_buffer(queue, buf, np.float32(1), 0, n * 4)
queue.finish()


def work() -> None:
    for _ in range(loops):
        a = np.empty(n, np.float32)
        cl.enqueue_copy(queue, a, buf)  # blocking: the array is filled when this returns
        assert a[-1] == 1.0


if mode == "profiled":
    with kprof.profile(backends=["opencl"]) as p:
        work()
    assert sum(r.kind == "copy" for r in p.kernels) == loops
else:
    work()
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
