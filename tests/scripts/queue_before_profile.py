"""The common pattern: context and queue made at the top, then the profile. ``argv[1]`` says
in which order the program imports and creates: ``kprof-first``, ``pyopencl-first``,
``plugin-first`` (PyOpenCL, then ``kprof_opencl``, which imports kprof while it initializes),
``queue-before-kprof`` (the queue exists before ``import kprof``) or ``declined``
(``kprof_opencl.disable_profiling()`` before PyOpenCL is imported). Prints one JSON line."""

import json
import sys
import warnings

order = sys.argv[1]
warnings.simplefilter("always")
caught = warnings.catch_warnings(record=True)
said = caught.__enter__()

if order == "kprof-first":
    import pyopencl as cl

    import kprof
elif order == "declined":
    import kprof_opencl

    kprof_opencl.disable_profiling()
    import pyopencl as cl

    import kprof
else:
    import pyopencl as cl
if order == "queue-before-kprof":
    import kprof_opencl.queues as _q  # finds a device; imports no kprof profile machinery

    ctx = cl.Context([_q.default_device()])
    queue = cl.CommandQueue(ctx)
    import kprof
elif order == "pyopencl-first":
    import kprof
elif order == "plugin-first":
    __import__("kprof_opencl")  # first: it imports kprof while it initializes (no isort here)
    import kprof
if order != "queue-before-kprof":
    import kprof_opencl

    ctx = cl.Context([kprof_opencl.default_device()])
    queue = cl.CommandQueue(ctx)

import numpy as np  # noqa: E402

prg = cl.Program(ctx, "__kernel void twice(__global float *x) { x[get_global_id(0)] *= 2; }")
twice = cl.Kernel(prg.build(), "twice")
host = np.ones(4096, np.float32)
buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=host)
with kprof.profile() as p:
    for _ in range(3):
        twice(queue, host.shape, None, buf)
    cl.enqueue_copy(queue, host, buf)
caught.__exit__(None, None, None)
assert host[0] == 8.0
print(
    json.dumps(
        {
            "rows": [[r.name, r.approximate, r.host_timed] for r in p.kernels],
            "warnings": [f"{w.category.__name__}: {w.message}" for w in said],
            "properties": int(queue.properties),
            "report": str(p),
        }
    )
)
