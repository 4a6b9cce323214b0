"""A queue without profiling, as a program has one when it created the queue before importing
kprof (or after ``kprof_opencl.disable_profiling()``): the queues kprof times approximately
(``~``). Since ``import kprof`` turns profiling on for later queues, the tests make theirs here."""

from __future__ import annotations

from typing import Any

import kprof_opencl


def plain_queue(*args: Any, **kwargs: Any) -> Any:
    """``pyopencl.CommandQueue(*args, **kwargs)`` exactly as asked, without ``PROFILING_ENABLE``
    added (inside a profile, capture still adds it: make these before)."""
    import pyopencl as cl

    was = kprof_opencl.profiling_enabled()
    kprof_opencl.disable_profiling()
    try:
        return cl.CommandQueue(*args, **kwargs)
    finally:
        if was:
            kprof_opencl.enable_profiling()
