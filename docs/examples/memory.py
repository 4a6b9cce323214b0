"""Device memory on PoCL: arrays made in a loop, one buffer never released; with
``sites=True`` each allocation keeps the line that made it."""

import os

os.environ["KPROF_OPENCL_MEMORY"] = "1"  # OpenCL buffers are reported only when asked

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

import kprof
import kprof_opencl

ctx = cl.Context([kprof_opencl.default_device()])

with kprof.profile(sites=True) as p:
    q = cl.CommandQueue(ctx)
    x = cla.empty(q, 1 << 20, np.float32)  # 4 MiB
    for _ in range(3):
        tmp = cla.empty(q, 1 << 18, np.float32)  # 1 MiB a step, freed when rebound
    cache = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 64 << 10)  # never released
    q.finish()
m = p.memory
print(m.peak, m.live_bytes_at_end)
report = str(p)
print(report[report.index("Device memory") :].strip())  # the report's memory section
