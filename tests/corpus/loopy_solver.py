"""A Jacobi-style iteration written with loopy, checked for convergence on the host after every
sweep (a `.get()` and a numpy norm), as a small solver does. Known answer: host-bound (the host's
own work between sweeps is far longer than a sweep on 4096 points)."""

import sys

import loopy as lp
import numpy as np
import pyopencl as cl
import pyopencl.array as cla

import kprof
import kprof_opencl

ctx = cl.Context([kprof_opencl.default_device()])
queue = cl.CommandQueue(ctx)
knl = lp.make_kernel(
    "{ [i]: 1 <= i < n - 1 }",
    "out[i] = 0.5 * (u[i - 1] + u[i + 1]) - 0.5 * h2 * f[i]",
    [lp.GlobalArg("u,f,out", np.float32, shape="n"), lp.ValueArg("h2", np.float32), ...],
    lang_version=(2018, 2),
)
knl = lp.split_iname(knl, "i", 64, outer_tag="g.0", inner_tag="l.0")
n = 4096
u = cla.zeros(queue, n, np.float32)
f = cla.to_device(queue, np.ones(n, np.float32))
out = cla.zeros(queue, n, np.float32)
h2 = np.float32(1.0 / n**2)
knl(queue, u=u, f=f, out=out, h2=h2)  # loopy generates and builds its code at the first call
queue.finish()
with kprof.profile() as p:
    for sweep in range(40):
        knl(queue, u=u, f=f, out=out, h2=h2)
        u, out = out, u
        residual = np.linalg.norm(np.diff(u.get(), 2))  # the host checks convergence
        for _ in range(20):  # and logs, plots, saves: the host's own work between sweeps
            np.sort(np.random.default_rng(sweep).standard_normal(20000))
p.save(sys.argv[1])
