"""The report's marks: exact device times with the trace and its clock line, then ``~`` rows
(a queue made without profiling) and ``*`` rows (the same queue, synchronized per launch)."""

import warnings

import numpy as np
import pyopencl as cl

import kprof
import kprof_opencl

ctx = cl.Context([kprof_opencl.default_device()])
mul2 = cl.Kernel(
    cl.Program(ctx, "__kernel void mul2(__global float *x) { x[get_global_id(0)] *= 2; }").build(),
    "mul2",
)
n = 1 << 16
x = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 4 * n)
cl.enqueue_fill_buffer(cl.CommandQueue(ctx), x, np.float32(1), 0, 4 * n).wait()

timed = kprof_opencl.profiling_queue(ctx)  # device timestamps
mul2(timed, (n,), None, x).wait()  # the first launch compiles: before the profile
with kprof.profile(trace=True) as p:
    for _ in range(2):
        mul2(timed, (n,), None, x)
print(p)

# A queue without PROFILING_ENABLE, as one made before `import kprof` is: no device timestamps.
kprof_opencl.disable_profiling()
plain = cl.CommandQueue(ctx)
warnings.simplefilter("ignore", kprof_opencl.ProfilingDisabledWarning)  # said once, above
with kprof.profile() as p:
    for _ in range(3):
        mul2(plain, (n,), None, x)
print(p.summary().device_row("mul2").name, "approximate:", p.kernels[0].approximate)
print(p)

with kprof.profile(synchronize=True) as p:  # waits after each launch, times it on the host
    for _ in range(3):
        mul2(plain, (n,), None, x)
print(p)
