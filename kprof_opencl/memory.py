"""Device memory of PyOpenCL buffers (the ``memory_install`` hook).

While installed, ``pyopencl.Buffer`` is a subclass of PyOpenCL's own that reports each buffer
made (``kprof.plugin.allocated``: its ``cl_mem`` handle, its size, its context's device) and
its end (``freed``): ``release()``, or the object's deallocation (``__del__``), whichever comes
first. ``pyopencl.array`` allocations without an allocator go through ``pyopencl.Buffer``, so
they are seen too. Shared virtual memory (OpenCL 2.0, where the device has
``svm_capabilities``): ``pyopencl.SVMAllocation`` and the class ``svm_empty``, ``csvm_empty``,
``fsvm_empty`` and their ``*_like`` allocate through are subclassed the same way (the address
is ``svm_ptr``; the end is ``release()``, ``enqueue_release()`` or deallocation). Why a subclass: PyOpenCL's buffer is a compiled type whose methods cannot be
replaced and whose instances take no weak reference; a subclass costs one Python ``__init__``
per buffer and no object besides. Not seen: buffers made in C++ (``pyopencl.tools``' memory
pools and their SVM pools, sub-buffers), and buffers made before the profile are not of the subclass: their
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
    _install_svm(backend, cl, names, patcher)
    return True


def _svm_class(backend: kp.Backend, base: Any, names: dict[int, str]) -> Any:
    """A subclass of an SVM allocation class that reports its allocation and its end.
    ``base``'s ``__init__`` takes ``(context, size, ...)`` as PyOpenCL's two classes do."""
    init, base_release, base_enqueue = base.__init__, base.release, base.enqueue_release
    allocated, freed = kp.allocated, kp.freed

    class Tracked(base):  # type: ignore[misc]
        __slots__ = ("_kprof_addr", "_kprof_dev")
        __doc__ = base.__doc__
        _kprof_dev: str | None
        _kprof_addr: int

        def __init__(self, context: Any, size: int, *args: Any, **kw: Any) -> None:
            init(self, context, size, *args, **kw)
            self._kprof_addr = addr = int(self.svm_ptr)
            self._kprof_dev = dev = _context_device(names, context)
            allocated(backend, dev, addr, size)

        def _kprof_end(self) -> None:
            dev = getattr(self, "_kprof_dev", None)  # None: released, or __init__ failed
            if dev is not None:
                self._kprof_dev = None
                freed(backend, dev, self._kprof_addr)

        def release(self) -> None:
            self._kprof_end()
            base_release(self)

        def enqueue_release(self, queue: Any = None, wait_for: Any = None) -> Any:
            self._kprof_end()  # when enqueued: the driver frees it when the queue gets there
            return base_enqueue(self, queue, wait_for)

        def __del__(self) -> None:
            self._kprof_end()

    Tracked.__name__ = Tracked.__qualname__ = base.__name__
    Tracked.__module__ = base.__module__
    return Tracked


#: PyOpenCL's SVM allocation classes (OpenCL 2.0 headers only): the public one, and the one
#: ``svm_empty`` and its relatives allocate through.
SVM_CLASSES = ("SVMAllocation", "_OverriddenArrayInterfaceSVMAllocation")


def _install_svm(backend: kp.Backend, cl: Any, names: dict[int, str], patcher: Any) -> None:
    for attr in SVM_CLASSES:
        base = getattr(cl, attr, None)
        if isinstance(base, type) and hasattr(base, "svm_ptr"):
            patcher.patch(cl, attr, _svm_class(backend, base, names))


def remove(backend: kp.Backend) -> None:
    patcher = backend.state.pop("memory_patcher", None)
    if patcher is not None:
        patcher.restore()
