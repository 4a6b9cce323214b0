"""kprof's OpenCL backend (PyOpenCL; PoCL's CPU device works on any machine).

The plugin (``kprof_opencl.plugin``, entry point ``opencl``) captures kernel launches and copies
automatically while a ``kprof.profile()`` is active: PyOpenCL's, and, through the ICD
dispatch-table hook (``kprof_opencl.hook``, compiled), those C libraries enqueue (VkFFT,
CLBlast). ``kprof backends`` says per platform whether the hook is active. What users may call:

- :func:`enable_profiling`: from now on every ``pyopencl.CommandQueue`` is created with
  ``PROFILING_ENABLE`` (kprof reads exact device times only from such queues). While a profile
  is active queues get it anyway; call this for queues created before a profile. Queues without
  it are timed approximately (completions observed on the host, marked ``~``).
- :func:`profiling_queue`: a ``CommandQueue`` with ``PROFILING_ENABLE``.
- :class:`use_queue`: set the calling thread's current queue, which ``kprof.range`` times on.
- :func:`current_queue`, :func:`default_device`.

Importing this package does not import pyopencl.
"""

from .profiled_queues import disable_profiling, enable_profiling, profiling_enabled
from .queues import (
    ProfilingDisabledWarning,
    current_queue,
    default_device,
    profiling_queue,
    use_queue,
)

__all__ = [
    "ProfilingDisabledWarning",
    "current_queue",
    "default_device",
    "disable_profiling",
    "enable_profiling",
    "profiling_enabled",
    "profiling_queue",
    "use_queue",
]
