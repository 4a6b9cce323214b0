"""``kprof demo`` on OpenCL: the reference workload's ``mul2`` and ``add`` kernels."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kprof import KprofError

from .queues import default_device, device_name, profiling_queue, use_queue

SOURCE = """
__kernel void mul2(__global float *x) {
    size_t i = get_global_id(0);
    x[i] *= 2.0f;
}
__kernel void add(__global const float *x, __global const float *y, __global float *z) {
    size_t i = get_global_id(0);
    z[i] = x[i] + y[i];
}
"""


def workload(size: int, device: Any = None) -> Callable[[], None] | None:
    """Build the demo on ``device`` (default: :func:`default_device`); ``None`` if OpenCL has none.

    Buffers are created and both kernels compiled and run once (PoCL compiles a kernel for
    real on its first launch) before this returns, so a step measures launches only. The
    calling thread's current queue becomes the demo's, so ``kprof.range`` around a step gets
    device time from the first step on.
    """
    import numpy as np
    import pyopencl as cl

    if device is None:
        device = default_device()
        if device is None:
            return None
    queue = profiling_queue(device)
    ctx = queue.context
    try:
        program = cl.Program(ctx, SOURCE).build()
    except cl.Error as exc:
        raise KprofError(
            f"the OpenCL demo kernels did not build on {device_name(device)}: {exc}"
        ) from exc
    mf = cl.mem_flags
    ones = np.ones(size, dtype=np.float32)
    x = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=ones)
    y = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=ones)
    z = cl.Buffer(ctx, mf.WRITE_ONLY, size=ones.nbytes)
    mul2, add = program.mul2, program.add
    gsize = (size,)

    def step() -> None:
        # Kernel.__call__ ends in pyopencl._cl.enqueue_nd_range_kernel, which kprof captures.
        mul2(queue, gsize, None, x)
        add(queue, gsize, None, x, y, z)

    step()
    queue.finish()
    use_queue(queue)
    step.queue = queue  # type: ignore[attr-defined]
    return step
