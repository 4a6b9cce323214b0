"""A plain script (no MPI in it) for ``mpiexec -n N kprof run --output 'prof-{rank}.kprof'``.

    launcher_app.py [testdev|opencl]

Every rank launches ``advance`` twice (on the test device, or on OpenCL: PoCL here); the
launcher's variables tell kprof which rank it is.
"""

import sys

if (sys.argv[1] if len(sys.argv) > 1 else "testdev") == "testdev":
    from kprof_testbackend import device

    q = device.Queue()
    with q:
        q.launch("advance", 50)
        q.launch("advance", 50)
    q.finish()
else:
    import numpy as np
    import pyopencl as cl

    ctx = cl.create_some_context(interactive=False)
    queue = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
    prg = cl.Program(
        ctx, "__kernel void advance(__global float *a) { a[get_global_id(0)] += 1.0f; }"
    ).build()
    a = np.zeros(64, dtype=np.float32)
    buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=a)
    advance = cl.Kernel(prg, "advance")
    advance(queue, a.shape, None, buf)
    advance(queue, a.shape, None, buf)
    queue.finish()
