"""kprof.testing's conformance kit, run against every plugin kprof ships and its test backend."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest
from kprof_testbackend import device

from kprof.testing import BackendConformance


class TestTestdevConformance(BackendConformance):
    """The test backend's ``testdev``: pooled markers on a simulated device, with capture."""

    backend_name = "testdev"
    records_per_step = 2

    queue: device.Queue

    def make_workload(self, backend: Any) -> Callable[[], Any]:
        self.queue = q = device.Queue("conformance")

        def step() -> None:
            q.launch("mul2", 50)
            q.launch("add", 80)

        return step

    def queue_context(self) -> contextlib.AbstractContextManager[Any]:
        return self.queue

    def stall(self) -> Callable[[], None]:
        q = self.queue
        q.hang.clear()
        q.launch("hang")
        return q.hang.set


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
        prg = cl.Program(q.context, """
            __kernel void mul2(__global float *x) { x[get_global_id(0)] *= 2.0f; }
            __kernel void add(__global const float *x, __global float *z) {
                z[get_global_id(0)] += x[get_global_id(0)];
            }""").build()
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

    def stall(self) -> Callable[[], None]:
        import pyopencl as cl

        gate = cl.UserEvent(self.queue.context)
        cl.enqueue_barrier(self.queue, wait_for=[gate])
        return lambda: gate.set_status(cl.command_execution_status.COMPLETE)
