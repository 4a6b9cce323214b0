"""A user's script as PyOpenCL's examples are written: a plain ``cl.CommandQueue(ctx)``."""

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

import kprof_opencl

print(f"__file__={__file__}")
ctx = cl.Context([kprof_opencl.default_device()])
queue = cl.CommandQueue(ctx)
print(f"profiling={bool(queue.properties & cl.command_queue_properties.PROFILING_ENABLE)}")
a = cla.to_device(queue, np.arange(4096, dtype=np.float32))
b = (2 * a + 1).get()
assert b[10] == 21.0
print("computed", flush=True)
