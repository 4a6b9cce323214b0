"""A whole script: smooth a stack of noisy signals by FFT with reikna (forward transform, a
low-pass mask in the frequency domain with pyopencl.array, inverse transform), 30 times, then
check one against numpy. No warm-up: under `kprof run` with PoCL's kernel cache empty, kernels
are compiled as the script goes. Known answer: device-bound (the transforms dwarf the compiles)."""

import numpy as np
from reikna.cluda import ocl_api
from reikna.fft import FFT

api = ocl_api()
thr = api.Thread.create()
rng = np.random.default_rng(0)
n = 1 << 15
signals = (np.sin(np.linspace(0, 40, n)) + rng.standard_normal((16, n))).astype(np.complex64)
mask = np.zeros(n, np.complex64)
mask[: n // 64] = mask[-n // 64 :] = 1
x = thr.to_device(signals)
spec = thr.empty_like(x)
out = thr.empty_like(x)
m = thr.to_device(np.broadcast_to(mask, signals.shape).copy())
fft = FFT(x, axes=(1,)).compile(thr)
for _ in range(30):
    fft(spec, x)
    spec *= m
    fft(out, spec, inverse=True)
thr.synchronize()
want = np.fft.ifft(np.fft.fft(signals[0]) * mask)
assert np.allclose(out.get()[0], want, atol=1e-2)
