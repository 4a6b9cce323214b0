"""A training loop on PoCL, profiled in windows of steps; at step 40 its batch grows 4x."""

import pyopencl as cl

import kprof
import kprof_opencl

ctx = cl.Context([kprof_opencl.default_device()])
queue = kprof_opencl.profiling_queue(ctx)
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
x, y, z = (cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 4 * 4 * n) for _ in range(3))


def train_step(batch):
    for _ in range(5):
        mul2(queue, (batch,), None, x)
        add(queue, (batch,), None, x, y, z)


# Cycles of 10 steps: 6 not profiled, 1 warm-up (recorded, then dropped), 3 recorded.
schedule = kprof.schedule(wait=6, warmup=1, active=3)
with kprof.profile(schedule=schedule, on_window=kprof.save_windows("run")) as p:
    for step in range(60):
        train_step(n if step < 40 else 4 * n)
        kprof.step()  # the end of a step
    queue.finish()
print(p)
