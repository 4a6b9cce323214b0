"""What the pages' inline Python assumes: PoCL's CPU device, a profiling queue, three buffers
of ``n`` floats and the reference kernels (``mul2(queue, x)``, ``add(queue, x, y, z)``, and
``step()`` launching both). ``tests/test_docs_site.py`` runs it before each inline block."""

import numpy as np  # noqa: F401  (the pages use these names)
import pyopencl as cl

import kprof  # noqa: F401
import kprof_opencl

ctx = cl.Context([kprof_opencl.default_device()])
queue = kprof_opencl.profiling_queue(ctx)
_program = cl.Program(
    ctx,
    """
    __kernel void mul2(__global float *x) { x[get_global_id(0)] *= 2.0f; }
    __kernel void add(__global const float *x, __global const float *y, __global float *z) {
        size_t i = get_global_id(0);
        z[i] = x[i] + y[i];
    }
    """,
).build()
n = 1 << 16
x, y, z = (cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 4 * n) for _ in range(3))


def mul2(queue, x, size=n):
    return _program.mul2(queue, (size,), None, x)


def add(queue, x, y, z, size=n):
    return _program.add(queue, (size,), None, x, y, z)


def step(size=n):
    mul2(queue, x, size)
    add(queue, x, y, z, size)


step()
queue.finish()
