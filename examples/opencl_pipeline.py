"""A small OpenCL pipeline to look at in kprof's timelines (runs anywhere with PoCL's CPU device).

    kprof run --trace trace.json --html timeline.html examples/opencl_pipeline.py

Each step uploads ``x`` and scales it on the main thread's queue while a worker thread, on its
own queue, uploads and scales ``y``; then ``z = x + y`` is computed and downloaded. The trace
shows the two threads, the two queues, the copies and kernels with arrows from each launch to
its device work, and the device time of each ``kprof.range``. It also runs without kprof.
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyopencl as cl

import kprof
import kprof_opencl

SOURCE = """
__kernel void scale(__global float *x, const float a) {
    size_t i = get_global_id(0);
    x[i] *= a;
}
__kernel void add(__global const float *x, __global const float *y, __global float *z) {
    size_t i = get_global_id(0);
    z[i] = x[i] + y[i];
}
"""


def main(steps: int = 4, n: int = 1 << 18) -> None:
    device = kprof_opencl.default_device()
    if device is None:
        sys.exit("OpenCL finds no device here: pip install pocl-binary-distribution")
    ctx = cl.Context([device])
    # Queues created with PROFILING_ENABLE, so that kprof reads device times.
    main_q = kprof_opencl.profiling_queue(ctx)
    side_q = kprof_opencl.profiling_queue(ctx)
    program = cl.Program(ctx, SOURCE).build()
    # One kernel object per thread: setting arguments is not thread-safe.
    scale_main, scale_side = cl.Kernel(program, "scale"), cl.Kernel(program, "scale")
    add = cl.Kernel(program, "add")

    host = np.arange(n, dtype=np.float32)
    mf = cl.mem_flags
    x, y, z = (cl.Buffer(ctx, mf.READ_WRITE, host.nbytes) for _ in range(3))
    out = np.empty_like(host)

    def prepare_y() -> None:
        # kprof.range times on this thread's current queue: the side queue.
        with kprof_opencl.use_queue(side_q), kprof.range("prepare y"):
            cl.enqueue_copy(side_q, y, host, is_blocking=False)
            scale_side(side_q, (n,), None, y, np.float32(0.5))
        side_q.finish()  # y is read by the main queue next

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="side") as worker:
        for _ in range(steps):
            with kprof_opencl.use_queue(main_q), kprof.range("step"):
                # kprof.propagate: the worker's job belongs to the same profile.
                side = worker.submit(kprof.propagate(prepare_y))
                cl.enqueue_copy(main_q, x, host, is_blocking=False)
                scale_main(main_q, (n,), None, x, np.float32(2.0))
                side.result()
                add(main_q, (n,), None, x, y, z)
                cl.enqueue_copy(main_q, out, z)  # blocking: the step ends with the result
            kprof.mark("step done")

    if not np.allclose(out, host * 2.5):
        sys.exit("opencl_pipeline: wrong result")
    print(f"opencl_pipeline: {steps} steps of {n} floats on {device.name.strip()}: ok")


if __name__ == "__main__":
    main()
