"""A loop of tiny kernels with the host's own work between them: host-bound."""

import numpy as np
import pyopencl as cl

import kprof
import kprof_opencl

ctx = cl.Context([kprof_opencl.default_device()])
q = kprof_opencl.profiling_queue(ctx)
scale = cl.Kernel(
    cl.Program(
        ctx, "__kernel void scale(__global int *x, int a) { x[get_global_id(0)] *= a; }"
    ).build(),
    "scale",
)
x = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 4 * 64)
scale(q, (64,), None, x, np.int32(1))  # compile before the profile
q.finish()

with kprof.profile() as p:
    for _ in range(200):
        scale(q, (64,), None, x, np.int32(1))  # a tiny kernel...
        sum(range(20000))  # ...and the host's own work per step (~0.2 ms)
    q.finish()
print(p.analysis())
a = p.analysis()
print(a.kind == "host-bound", a.device().busy_ns < a.device().idle_ns)
