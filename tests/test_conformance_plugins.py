"""kprof.testing's conformance kit, run against every plugin kprof ships and its test backend:
OpenCL on PoCL, CUDA on the fake of test_cuda_fake.py, testdev and testnots here; HIP on its
test double in a child process (tests/hip/test_hip_conformance.py)."""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from kprof_testbackend import device
from test_cuda_fake import MODULE as FAKE_CUPY
from test_cuda_fake import FakeCuda, fake_cupy_module
from test_cuda_fake import _available as fake_cuda_info

from kprof.testing import BackendConformance
from kprof_cuda.plugin import CudaPlugin

_FAKE_CUDA = FakeCuda(1)


class TestTestdevConformance(BackendConformance):
    """The test backend's ``testdev``: pooled markers on a simulated device, with capture."""

    backend_name = "testdev"
    records_per_step = 2

    queue: device.Queue

    def make_workload(self, backend: Any) -> Callable[[], Any]:
        self.queue = q = device.Queue("conformance")

        def step() -> None:
            q.launch("mul2", 50, grid=(4, 1, 1), block=(64, 1, 1))  # a launch configuration
            q.launch("add", 80)

        return step

    def queue_context(self) -> contextlib.AbstractContextManager[Any]:
        return self.queue

    def stall(self) -> Callable[[], None]:
        q = self.queue
        q.hang.clear()
        q.launch("hang")
        return q.hang.set

    def allocate(self) -> tuple[int, Callable[[], None]]:
        a = device.alloc(4096)
        return 4096, a.free


class TestTestnotsConformance(BackendConformance):
    """The test backend's ``testnots``: no timestamp hooks, capture, host timing."""

    backend_name = "testnots"
    records_per_step = 1

    queue: device.PlainQueue

    def make_workload(self, backend: Any) -> Callable[[], Any]:
        self.queue = q = device.PlainQueue("conformance")
        return lambda: q.launch("k", 30)

    def queue_context(self) -> contextlib.AbstractContextManager[Any]:
        return self.queue


class TestOpenCLConformance(BackendConformance):
    """kprof_opencl on PoCL's CPU device: launch events as tokens, markers for ranges."""

    backend_name = "opencl"
    records_per_step = 2
    # elapsed_time(a, b) is END(b) - START(a): t1→t2 plus t2→t3 also counts t2's own marker
    # (its START to END: 147 ns at most in 50 tries here, more on a loaded machine).
    tolerance_ns = 100_000

    def make_workload(self, backend: Any) -> Callable[[], Any]:
        import pyopencl as cl

        import kprof_opencl

        dev = kprof_opencl.default_device()
        if dev is None:
            pytest.fail("OpenCL finds no device here (pip install pocl-binary-distribution)")
        self.queue = q = kprof_opencl.profiling_queue(dev)
        prg = cl.Program(
            q.context,
            """
            __kernel void mul2(__global float *x) { x[get_global_id(0)] *= 2.0f; }
            __kernel void add(__global const float *x, __global float *z) {
                z[get_global_id(0)] += x[get_global_id(0)];
            }""",
        ).build()
        x = cl.Buffer(q.context, cl.mem_flags.READ_WRITE, 4 * 4096)
        z = cl.Buffer(q.context, cl.mem_flags.READ_WRITE, 4 * 4096)
        mul2, add = prg.mul2, prg.add

        def step() -> None:
            mul2(q, (4096,), None, x)
            add(q, (4096,), None, x, z)

        step()  # PoCL compiles on the first launch
        q.finish()
        return step

    def queue_context(self) -> contextlib.AbstractContextManager[Any]:
        import kprof_opencl

        return kprof_opencl.use_queue(self.queue)

    def allocate(self) -> tuple[int, Callable[[], None]]:
        import pyopencl as cl

        buf = cl.Buffer(self.queue.context, cl.mem_flags.READ_WRITE, 8192)
        return 8192, buf.release

    def stall(self) -> Callable[[], None]:
        import pyopencl as cl

        gate = cl.UserEvent(self.queue.context)
        cl.enqueue_barrier(self.queue, wait_for=[gate])
        return lambda: gate.set_status(cl.command_execution_status.COMPLETE)


class TestCudaOnItsFakeConformance(BackendConformance):
    """kprof_cuda's CudaPlugin on the fake CUDA of test_cuda_fake.py (streams are worker
    threads, events stamped with the host clock): pooled events, copy capture, calibration."""

    backend_name = "fakecuda"
    plugin = CudaPlugin(
        api=lambda: _FAKE_CUDA, module=FAKE_CUPY, describe=fake_cuda_info, nvtx=lambda: None
    )
    records_per_step = 2
    rerecord_supersedes = True  # an event recorded again reports its newest record only

    @pytest.fixture(scope="class", autouse=True)
    @classmethod
    def fake_cupy(cls) -> Iterator[None]:
        """The fake ``cupy`` module is imported while the class runs (capture needs it)."""
        sys.modules[FAKE_CUPY] = fake_cupy_module(_FAKE_CUDA)
        yield
        del sys.modules[FAKE_CUPY]
        _FAKE_CUDA.close()

    def make_workload(self, backend: Any) -> Callable[[], Any]:
        cupy = sys.modules[FAKE_CUPY]
        self.stream = _FAKE_CUDA.stream()
        host = np.zeros(1000, dtype=np.float32)
        on_device = cupy.asarray(host)
        return lambda: (cupy.asarray(host), on_device.set(host))  # two copies to the device

    def queue_context(self) -> contextlib.AbstractContextManager[Any]:
        return _FAKE_CUDA.use(self.stream)

    def stall(self) -> Callable[[], None]:
        gate = threading.Event()
        _FAKE_CUDA.worker(self.stream.ptr, self.stream.device_id).commands.put(gate.wait)
        return gate.set
