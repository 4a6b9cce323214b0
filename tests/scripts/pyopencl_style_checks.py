"""Programs written the way PyOpenCL's own tests and examples are (plain ``cl.CommandQueue(ctx)``,
user events, callbacks, async gets, out-of-order queues, pyopencl.array, reductions, scans),
each printing ``check <name>: <result>``. Run with ``python`` and under kprof: the printed
results must be identical. ``inside-profile`` wraps the checks in ``kprof.profile()`` with the
queues created before it (so they have no profiling and are observed)."""

import sys
import time

import numpy as np
import pyopencl as cl
import pyopencl.array as cla
from pyopencl.elementwise import ElementwiseKernel
from pyopencl.reduction import ReductionKernel
from pyopencl.scan import InclusiveScanKernel

import kprof_opencl

COMPLETE = cl.command_execution_status.COMPLETE
ctx = cl.Context([kprof_opencl.default_device()])
queue = cl.CommandQueue(ctx)
try:
    ooo_queue = cl.CommandQueue(
        ctx, properties=cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE
    )
except cl.Error:
    ooo_queue = None
rng = np.random.default_rng(seed=7)
SUM = cl.Program(
    ctx,
    """
__kernel void sum(__global const float *a, __global const float *b, __global float *c) {
    int i = get_global_id(0); c[i] = a[i] + b[i];
}""",
).build()


def report(name: str, value: object) -> None:
    print(f"check {name}: {value}", flush=True)


def event_callback_after_a_user_event() -> None:
    a = rng.random(50000, dtype=np.float32)
    mf = cl.mem_flags
    a_g = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a)
    c_g = cl.Buffer(ctx, mf.WRITE_ONLY, a.nbytes)
    gate = cl.UserEvent(ctx)
    called: list[int] = []
    evt = cl.Kernel(SUM, "sum")(queue, a.shape, None, a_g, a_g, c_g, wait_for=[gate])
    evt.set_callback(COMPLETE, called.append)
    gate.set_status(COMPLETE)
    queue.finish()
    for _ in range(500):
        if called:
            break
        time.sleep(0.01)
    c = np.empty_like(a)
    cl.enqueue_copy(queue, c, c_g)
    report("event callback", (called, bool(np.allclose(c, 2 * a))))


def get_async_waits_for_events() -> None:
    a = rng.random(10**5, dtype=np.float32)
    a_gpu = cla.to_device(queue, a)
    b_gpu = a_gpu + a_gpu**2 + 1
    gate = cl.UserEvent(ctx)
    b_gpu.add_event(gate)
    b, evt = b_gpu.get_async()  # must not hang: the gate is set on the next line
    gate.set_status(COMPLETE)
    evt.wait()
    report("get_async", bool(np.abs(b - (a + a**2 + 1)).max() < 1e-5))


def out_of_order_queue_get() -> None:
    if ooo_queue is None:
        report("out of order", "skipped")
        return
    a = rng.random(10**5, dtype=np.float32)
    a_gpu = cla.to_device(ooo_queue, a)
    b = (a_gpu * 2 + 1).get()
    report("out of order", bool(np.allclose(b, 2 * a + 1)))


def array_arithmetic_reductions_and_scans() -> None:
    a = np.arange(1, 20001, dtype=np.float32)
    g = cla.to_device(queue, a)
    report("array sum", float(cla.sum(g).get()))
    report("array dot", float(cla.dot(g, g).get()))
    report("array max", float(cla.max(g).get()))
    ints = cla.to_device(queue, np.arange(10000, dtype=np.int64))
    InclusiveScanKernel(ctx, np.int64, "a+b", neutral="0")(ints)
    report("scan", int(ints.get()[-1]))
    knl = ElementwiseKernel(ctx, "float *x, float a", "x[i] = a * x[i] + 1")
    knl(g, np.float32(2))
    report("elementwise", float(g.get()[-1]))
    red = ReductionKernel(
        ctx,
        np.float32,
        neutral="0",
        reduce_expr="a+b",
        map_expr="x[i]*x[i]",
        arguments="__global float *x",
    )
    report("reduction", float(red(cla.to_device(queue, a[:100])).get()))
    z = cla.zeros(queue, 2**22, np.float32)
    report("zeros", float(cla.sum(z).get()))


def copies_and_fills() -> None:
    host = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, host.nbytes)
    cl.enqueue_copy(queue, buf, host)
    out = np.zeros((16, 16), np.float32)
    cl.enqueue_copy(
        queue,
        out,
        buf,
        buffer_origin=(0, 8, 0),
        host_origin=(0, 0, 0),
        region=(16 * 4, 16, 1),
        buffer_pitches=(64 * 4, 0),
        host_pitches=(16 * 4, 0),
    )
    cl.enqueue_fill_buffer(queue, buf, np.float32(3), 0, 256)
    first = np.empty(64, np.float32)
    cl.enqueue_copy(queue, first, buf)
    report("rect copy", float(out.sum()))
    report("fill", float(first.sum()))


def run() -> None:
    event_callback_after_a_user_event()
    get_async_waits_for_events()
    out_of_order_queue_get()
    array_arithmetic_reductions_and_scans()
    copies_and_fills()


if "inside-profile" in sys.argv[1:]:
    import kprof

    with kprof.profile(backends=["opencl"], timeout=30) as p:
        run()
    kinds = {r.approximate for r in p.kernels if r.error is None}
    print(f"profiled {len(p.kernels)} records, approximate: {sorted(kinds)}", file=sys.stderr)
else:
    run()
