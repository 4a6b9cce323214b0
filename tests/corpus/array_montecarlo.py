"""A Monte-Carlo estimate with pyopencl.array and pyopencl.clrandom: random points on the
device, a reduction, the result read back and summarised on the host each batch. Known answer:
host-bound."""

import sys

import numpy as np
import pyopencl as cl
import pyopencl.array as cla
import pyopencl.clrandom as clrandom

import kprof
import kprof_opencl

ctx = cl.Context([kprof_opencl.default_device()])
queue = cl.CommandQueue(ctx)
gen = clrandom.PhiloxGenerator(ctx, seed=1)
n = 1 << 14


def batch() -> float:
    x = gen.uniform(queue, n, np.float32)
    y = gen.uniform(queue, n, np.float32)
    return float(cla.sum((x * x + y * y < 1).astype(np.float32)).get())


batch()  # every kernel built and run once (first launches compile: not what is measured here)
estimates: list[float] = []
with kprof.profile() as p:
    for i in range(30):
        estimates.append(4 * batch() / n)
        # the host's summary of each batch: a bootstrap of the estimates so far
        rng = np.random.default_rng(i)
        boot = [np.mean(rng.choice(estimates, len(estimates))) for _ in range(300)]
        np.percentile(boot, [2.5, 97.5])
assert abs(np.mean(estimates) - np.pi) < 0.05
p.save(sys.argv[1])
