"""reikna's FFT, as its tutorial uses it: a Thread on the PyOpenCL device, a compiled FFT,
transforms repeated on a large array. Known answer: device-bound (the transforms run back to
back; the host only enqueues)."""

import sys

import numpy as np
import pyopencl as cl
from reikna.cluda import ocl_api
from reikna.fft import FFT

import kprof
import kprof_opencl

api = ocl_api()
thr = api.Thread(cl.CommandQueue(cl.Context([kprof_opencl.default_device()])))
data = (np.random.default_rng(0).standard_normal((16, 65536)) + 0j).astype(np.complex64)
dev = thr.to_device(data)
res = thr.empty_like(dev)
fft = FFT(dev, axes=(1,)).compile(thr)
fft(res, dev)  # the first call compiles its kernels on the device: warm-up, outside the profile
thr.synchronize()
with kprof.profile() as p:
    for _ in range(10):
        fft(res, dev)
    thr.synchronize()
got = res.get()
assert np.allclose(got[0], np.fft.fft(data[0]), rtol=1e-3, atol=1e-2)
p.save(sys.argv[1])
