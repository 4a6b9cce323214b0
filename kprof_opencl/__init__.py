"""kprof's OpenCL backend (PyOpenCL; PoCL's CPU device works on any machine).

The plugin (``kprof_opencl.plugin``, entry point ``opencl``) captures kernel launches and copies
automatically while a ``kprof.profile()`` is active. What users may call:

- :func:`profiling_queue`: a ``CommandQueue`` with ``PROFILING_ENABLE``, which kprof needs to
  read device times (a queue without it falls back to host timing, marked ``*``).
- :class:`use_queue`: set the calling thread's current queue, which ``kprof.range`` times on.
- :func:`current_queue`, :func:`default_device`.

Importing this package does not import pyopencl.
"""

from .queues import (
    ProfilingDisabledWarning,
    current_queue,
    default_device,
    profiling_queue,
    use_queue,
)

__all__ = ["ProfilingDisabledWarning", "current_queue", "default_device", "profiling_queue",
           "use_queue"]
