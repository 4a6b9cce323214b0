"""Device memory of PyOpenCL buffers (the ``memory_install`` hook): the fallback subclass.

Where kprof can hook the ICD's dispatch table, buffers and SVM allocations are recorded there
(memory_hook.py): every one of the process, nothing in Python changed. Where it cannot (pure
Python, compiled parts not built, a table the hook refuses, ``KPROF_OPENCL_HOOK=preload``),
``KPROF_OPENCL_MEMORY=1`` makes ``pyopencl.Buffer`` a subclass of PyOpenCL's own while a
profile runs, reporting each buffer made (``kprof.plugin.allocated``: its ``cl_mem`` handle,
its size, its context's device) and its end (``freed``): ``release()`` or the object's
deallocation, whichever comes first. ``pyopencl.array`` allocations without an allocator go
through ``pyopencl.Buffer``, so they are seen too. Shared virtual memory (OpenCL 2.0):
``pyopencl.SVMAllocation`` and the class ``svm_empty`` and its relatives allocate through are
subclassed the same way (the address is ``svm_ptr``; the end is ``release()``,
``enqueue_release()`` or deallocation). A subclass because PyOpenCL's buffer is a compiled type
whose methods cannot be replaced. Not transparent, hence only when asked: buffers made before
the profile fail ``isinstance(b, pyopencl.Buffer)`` while it runs, ``type(Buffer.from_int_ptr(
b.int_ptr)) is type(b)`` is False (PyOpenCL's test_int_ptr and SVM tests fail), and buffers
made in C++ or C (``pyopencl.tools`` pools, C libraries) are not seen.
"""

from __future__ import annotations

import os
from typing import Any

from kprof import plugin as kp

from . import memory_hook
from .memory_hook import context_device

#: ``0`` off; ``1`` on with the subclass fallback (kprof_core/envvars.py documents it).
ENV_MEMORY = "KPROF_OPENCL_MEMORY"


def install(backend: kp.Backend) -> bool:
    """On by default through the dispatch-table hook (transparent: memory_hook.py), where
    every platform allows it (compiled parts, Linux, a writable table in the ICD, not
    ``KPROF_OPENCL_HOOK=preload``). The subclass below is not transparent: only where the hook
    cannot be installed and ``KPROF_OPENCL_MEMORY=1`` asks for memory anyway. ``0``: off."""
    asked = os.environ.get(ENV_MEMORY, "")
    if asked == "0":
        return False
    try:
        import pyopencl as cl
    except ImportError:
        return False
    if memory_hook.install(backend):
        return True
    return asked == "1" and _install_subclass(backend, cl)


def _install_subclass(backend: kp.Backend, cl: Any) -> bool:
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
            self._kprof_dev = dev = context_device(names, context)
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
            self._kprof_dev = dev = context_device(names, context)
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
    memory_hook.remove(backend)
    patcher = backend.state.pop("memory_patcher", None)
    if patcher is not None:
        patcher.restore()
