"""pyopencl.array expressions and an ElementwiseKernel on 8 M floats, repeated: the host
enqueues far faster than the device computes. Known answer: device-bound."""

import sys

import numpy as np
import pyopencl as cl
import pyopencl.array as cla
from pyopencl.elementwise import ElementwiseKernel

import kprof
import kprof_opencl

ctx = cl.Context([kprof_opencl.default_device()])
queue = cl.CommandQueue(ctx)
n = 1 << 23
a = cla.to_device(queue, np.random.default_rng(0).random(n, np.float32))
b = cla.to_device(queue, np.random.default_rng(1).random(n, np.float32))
lin = ElementwiseKernel(ctx, "float k, float *x, float *y, float *z", "z[i] = k * x[i] + sin(y[i])")
z = cla.empty_like(a)
lin(np.float32(2), a, b, z)
c = 2 * a + b * b
queue.finish()
with kprof.profile() as p:
    for _ in range(8):
        lin(np.float32(2), a, b, z)
        c = 2 * a + b * b
    queue.finish()
p.save(sys.argv[1])
