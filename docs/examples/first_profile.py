"""The first profile: two kernels in a loop on PoCL's CPU OpenCL device (any machine)."""

import numpy as np
import pyopencl as cl

import kprof
import kprof_opencl

ctx = cl.Context([kprof_opencl.default_device()])
queue = kprof_opencl.profiling_queue(ctx)  # a queue with profiling on: device timestamps
program = cl.Program(
    ctx,
    """
    __kernel void mul2(__global float *x) { x[get_global_id(0)] *= 2.0f; }
    __kernel void add(__global const float *x, __global const float *y, __global float *z) {
        size_t i = get_global_id(0);
        z[i] = x[i] + y[i];
    }
    """,
).build()
mul2, add = program.mul2, program.add
n = 1 << 20
x, y, z = (cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 4 * n) for _ in range(3))
cl.enqueue_fill_buffer(queue, x, np.float32(1), 0, 4 * n)
cl.enqueue_fill_buffer(queue, y, np.float32(2), 0, 4 * n)
mul2(queue, (n,), None, x)  # the first launch of a kernel compiles it: not in the profile
add(queue, (n,), None, x, y, z)
queue.finish()

# Ranges time the work enqueued inside them on the thread's current queue: the queue it last
# launched on, or this one from the start.
with kprof_opencl.use_queue(queue), kprof.profile() as p:
    for _ in range(10):
        with kprof.range("step"):
            mul2(queue, (n,), None, x)  # launched as usual: kprof never waits for them
            add(queue, (n,), None, x, y, z)
print(p)
p.save("first.kprof")
p.export_html("first.html")
