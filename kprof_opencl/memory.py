"""Device memory of PyOpenCL buffers (the ``memory_install`` hook).

While installed, ``pyopencl.Buffer`` is a subclass of PyOpenCL's own that reports each buffer
made (``kprof.plugin.allocated``: its ``cl_mem`` handle, its size, its context's device) and
its end (``freed``): ``release()``, or the object's deallocation (``__del__``), whichever comes
first. ``pyopencl.array`` allocations without an allocator go through ``pyopencl.Buffer``, so
they are seen too. Why a subclass: PyOpenCL's buffer is a compiled type whose methods cannot be
replaced and whose instances take no weak reference; a subclass costs one Python ``__init__``
per buffer and no object besides. Not seen: buffers made in C++ (``pyopencl.tools``' memory
pools, sub-buffers, SVM), and buffers made before the profile are not of the subclass: their
``isinstance(b, pyopencl.Buffer)`` is False while a profile runs (``pyopencl.capture_call``
asks, and so may a user's code). That changes the program, so it is off unless
``KPROF_OPENCL_MEMORY=1``.
"""

from __future__ import annotations

import os
from typing import Any

from kprof import plugin as kp

from .queues import device_name


def _context_device(names: dict[int, str], context: Any) -> str:
    """The device a context's buffers count against: its device, or its devices joined."""
    key = context.int_ptr
    name = names.get(key)
    if name is None:
        name = names[key] = " + ".join(device_name(d) for d in context.devices)
    return name


#: ``1`` turns buffer reporting on (kprof_core/envvars.py documents it).
ENV_MEMORY = "KPROF_OPENCL_MEMORY"


def install(backend: kp.Backend) -> bool:
    if os.environ.get(ENV_MEMORY) != "1":
        return False
    try:
        import pyopencl as cl
    except ImportError:
        return False
    base = cl.Buffer
    # The base's own __init__, called directly: super().__init__ costs ~1.5 µs more per
    # buffer on nanobind's types (measured, bench/bench_memory.py).
    init, base_release = base.__init__, base.release
    names: dict[int, str] = {}
    allocated, freed = kp.allocated, kp.freed

    class Buffer(base):  # type: ignore[misc, valid-type]
        __slots__ = ("_kprof_addr", "_kprof_dev")
        __doc__ = base.__doc__
        _kprof_dev: str | None
        _kprof_addr: int

        def __init__(self, context: Any, flags: Any, size: int = 0, hostbuf: Any = None) -> None:
            init(self, context, flags, size, hostbuf)
            self._kprof_addr = addr = self.int_ptr
            self._kprof_dev = dev = _context_device(names, context)
            allocated(backend, dev, addr, size or self.size)

        def release(self) -> None:
            dev = self._kprof_dev
            if dev is not None:
                self._kprof_dev = None
                freed(backend, dev, self._kprof_addr)
            base_release(self)

        def __del__(self) -> None:
            dev = getattr(self, "_kprof_dev", None)  # None: released, or __init__ failed
            if dev is not None:
                self._kprof_dev = None
                freed(backend, dev, self._kprof_addr)

    Buffer.__name__ = Buffer.__qualname__ = "Buffer"
    Buffer.__module__ = base.__module__
    patcher = backend.state["memory_patcher"] = kp.Patcher()
    patcher.patch(cl, "Buffer", Buffer)
    return True


def remove(backend: kp.Backend) -> None:
    patcher = backend.state.pop("memory_patcher", None)
    if patcher is not None:
        patcher.restore()
