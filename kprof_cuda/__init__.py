"""kprof's CUDA backend, on CuPy and CUPTI (``pip install 'kprof[cuda]'``, or ``kprof[cuda13]``).

What is captured on CUDA with CUPTI
-----------------------------------
When CUPTI can be used (libcupti found: NVIDIA's nvidia-cuda-cupti wheel, which the extras
bring, or the system CUDA's; a driver; no other tool holding CUPTI), a profile records every
kernel, copy (direction, bytes) and memset its code enqueues, from CUPTI's Activity API, read
by kprof itself (:mod:`kprof_cuda.activity`; a compiled reader, or a pure-Python one without
a compiler), whoever launched it: CuPy's array
operations, cuBLAS, cuFFT, CUB, Numba, raw kernels. Kernel names are demangled; grid, block,
device and CUPTI stream are in ``Profile.details``. Work belongs to a profile when it was
launched on a thread running the profile's code (the thread that entered it, threads started
through ``kprof.propagate``). ``kprof.range`` still gets its device time from events, and a
``kprof_cuda.kernel`` call becomes a range around the kernels CUPTI reports. ``kprof
backends`` says which path is in use and why.

Without CUPTI (the rest of this note): device times come from CUDA events drawn from a pool
(no event is created per launch once warm), recorded on the calling thread's current CuPy
stream, and read later without synchronizing: kprof polls ``cudaEventQuery`` and reads
``cudaEventElapsedTime``.

What is captured on CUDA with events
------------------------------------
CuPy has no kernel-launch hook, and its kernel types (``RawKernel``, ``RawModule`` functions,
``ElementwiseKernel``, ``ReductionKernel``, ufuncs such as ``cupy.add``) are immutable Cython
types whose launches reach ``cuLaunchKernel`` through C-level calls. kprof does not change
CuPy's behaviour to reach them, so:

Captured automatically while a profile is active (CuPy imported before it started):

- Copies device → host through ``cupy.ndarray.get`` (and what calls it: ``cupy.asnumpy``,
  ``ndarray.tolist``, ...), and host → device through ``cupy.ndarray.set``, and
  ``cupy.asarray``/``cupy.array`` called with a ``numpy.ndarray``: one row each,
  ``[copy device to host]``/``[copy host to device]``, with the bytes moved and their device
  time on the stream the copy used. A ``get`` of a non-contiguous array includes the kernel
  that makes it contiguous. ``cupy.asarray``/``cupy.array`` first stage the data in pinned
  host memory: on an idle stream their device time includes that staging (see below).

Timed when you ask (device time of everything enqueued on the thread's current stream):

- ``with kprof.range("name"):`` around any CuPy code: all its kernels, copies and library
  calls (cuBLAS, cuFFT, cuSOLVER, CUB...) enqueued on the current stream, as one range.
- :func:`kernel` (``kprof_cuda.kernel(k)``): each call of a ``RawKernel``,
  ``ElementwiseKernel``, ``ReductionKernel``, ufunc or any callable, as one named kernel row.

Not captured:

- Individual kernels that CuPy launches inside array operations (``a + b``, ``cupy.sum``,
  ``x @ y``) outside a range or a wrapped callable: per-kernel records need CUPTI.
- Copies made by ``cupy.copyto``, ``ndarray.copy``, ``cupy.asarray`` of lists or device
  arrays, ``MemoryPointer.copy_*`` and direct ``cupy.cuda.runtime.memcpy*`` calls.
- Calls through names bound before the profile started (``from cupy import asarray``).
- Work on streams other than the thread's current one (a range times the current stream).
  A range or wrapped call must end on the device it began on: events of two devices cannot
  be compared (CUDA reports an invalid handle, and kprof stops using the backend).
- Work enqueued on a stream while it is being captured into a CUDA graph: kprof's events
  become part of the graph instead of timestamps, so such rows get no device time (they are
  reported unresolved; not yet checked on a GPU). Don't profile graph capture itself.

What a device time means: events are recorded on the stream before and after the call, so a
row's device time runs from when the stream reached the first event to when it reached the
second. Work queued earlier on the stream is not counted; but if the stream sat idle while the
host was still preparing the work (compiling a kernel on first use, staging a copy), that wait
is counted.

Streams and threads: every (device, stream) is its own queue row, labelled ``legacy default
stream``, ``per-thread default stream (<thread>)`` or ``stream N`` (numbered as first seen).
Rows of one device are placed side by side using the elapsed time between their events.
Device times are placed on the host clock by calibration (see :mod:`kprof_cuda.clock`).

NVTX: when the ``nvtx`` package is installed, every ``kprof.range`` and ``kprof_cuda.kernel``
call on a thread using CuPy is also an NVTX range (domain ``kprof``), for Nsight Systems.

Importing this package does not import CuPy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import kprof

from .events import PoolStats

__all__ = ["PoolStats", "kernel", "pool_stats"]


def kernel(fn: Callable[..., Any], name: str | None = None) -> Callable[..., Any]:
    """Wrap a CuPy kernel (``RawKernel``, ``ElementwiseKernel``, ...) or any callable so that
    each call is timed on the device as one kernel row.

    The row is named ``name``, else the kernel's own ``.name`` (the CUDA function name), else
    the callable's ``__name__``. Outside a profile the wrapper just calls through::

        spin = kprof_cuda.kernel(cupy.RawKernel(source, "spin"))
        spin((blocks,), (threads,), (x, n))
    """
    if not callable(fn):
        raise TypeError(
            f"kprof_cuda.kernel wraps a CuPy kernel or a callable, not {type(fn).__name__}"
        )
    if name is None:
        own = getattr(fn, "name", None)
        name = own if isinstance(own, str) and own else getattr(fn, "__name__", None)
    return kprof.kernel(fn, name)


def pool_stats(device: int | None = None) -> PoolStats:
    """The CUDA event pool's counts (created, in use, free), for one device or summed."""
    from .plugin import plugin

    return plugin.stats(device)
