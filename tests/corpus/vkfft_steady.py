"""pyvkfft's OpenCL FFT on a 2-D complex array, as its examples use it: the plan made and run
once, then 20 transforms in a profile. Known answer: device-bound."""

import sys

import numpy as np
import pyopencl as cl
import pyopencl.array as cla
from pyvkfft.fft import fftn

import kprof
import kprof_opencl

ctx = cl.Context([kprof_opencl.default_device()])
queue = cl.CommandQueue(ctx)
a = cla.to_device(
    queue, (np.random.default_rng(0).standard_normal((512, 512)) + 0j).astype(np.complex64)
)
b = fftn(a)  # the plan is made (and VkFFT's kernel built) at the first call
queue.finish()
with kprof.profile() as p:
    for _ in range(20):
        b = fftn(a, b)
    queue.finish()
assert np.allclose(b.get(), np.fft.fftn(a.get()), rtol=1e-3, atol=1e-1)
p.save(sys.argv[1])
