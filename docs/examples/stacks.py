"""Where in the code device time goes: launch stacks, the tree, and a speedscope file."""

import json

import numpy as np
import pyopencl as cl

import kprof
import kprof_opencl

ctx = cl.Context([kprof_opencl.default_device()])
queue = kprof_opencl.profiling_queue(ctx)
program = cl.Program(
    ctx,
    """
    __kernel void scale(__global float *x, float a) { x[get_global_id(0)] *= a; }
    __kernel void add(__global const float *x, __global float *y) {
        y[get_global_id(0)] += x[get_global_id(0)];
    }
    """,
).build()
scale, add = program.scale, program.add
n = 1 << 20
x, y = (cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 4 * n) for _ in range(2))
cl.enqueue_fill_buffer(queue, x, np.float32(1), 0, 4 * n)
cl.enqueue_fill_buffer(queue, y, np.float32(0), 0, 4 * n)


def normalize(v):
    scale(queue, (n,), None, v, np.float32(0.5))


def layer(inp, out):
    normalize(inp)
    add(queue, (n,), None, inp, out)


def forward():
    layer(x, y)
    layer(y, x)
    normalize(y)


forward()  # the first launches compile the kernels: not in the profile
queue.finish()

with kprof.profile(stacks=True) as p:  # stacks=True: each launch's Python stack, interned
    for _ in range(5):
        with kprof.range("step"):
            forward()
    result = np.empty(n, np.float32)
    cl.enqueue_copy(queue, result, y)
print(p)
print()
print(p.tree())
p.export_speedscope("stacks.speedscope.json")  # open it in www.speedscope.app
doc = json.load(open("stacks.speedscope.json"))
prof = doc["profiles"][0]
print()
print(f"speedscope: {len(doc['shared']['frames'])} frames, {len(prof['samples'])} samples")
print("frames:", ", ".join(sorted({f["name"] for f in doc["shared"]["frames"]})))
device = sum(r.total_ns for r in p.summary().device)
print("weights sum to the device time:", sum(prof["weights"]) == device)
