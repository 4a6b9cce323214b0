"""Device time per test, on PoCL: ``pytest test_kernels.py --kprof-save .kprof-baseline``."""

import os

import pyopencl as cl
import pytest

import kprof_opencl

N = int(os.environ.get("N", 1 << 18))  # the docs run it again with N sixteen times larger


@pytest.fixture(scope="module")
def queue():
    return kprof_opencl.profiling_queue(cl.Context([kprof_opencl.default_device()]))


@pytest.fixture(scope="module")
def mul2(queue):
    prg = cl.Program(
        queue.context,
        """
    __kernel void mul2(__global float *x) { x[get_global_id(0)] *= 2.0f; }""",
    ).build()
    k = cl.Kernel(prg, "mul2")
    x = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, 4 * N)
    k(queue, (N,), None, x)  # compile and first touch, outside the profile
    queue.finish()
    return lambda n=N: k(queue, (n,), None, x)


def test_mul2(mul2, kprof_profile):
    for _ in range(10):
        mul2()
    assert len(kprof_profile.kernel_times("mul2")) == 10


@pytest.mark.kprof
def test_small(mul2):
    for _ in range(10):
        mul2(N // 2)  # large enough that the change is far above PoCL's noise
