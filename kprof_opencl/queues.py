"""Queues: each thread's current queue, per-queue facts cached on the queue, profiling queues.

Nothing here imports pyopencl at module import; functions that need it import it lazily.
Facts about a queue (does it profile? its label) and a kernel (its name) are cached as
``_kprof_*`` attributes on the PyOpenCL objects themselves: PyOpenCL's wrappers carry an
instance ``__dict__``, and a ``queue in dict`` lookup would cost a ``clGetCommandQueueInfo``
call per launch (``CommandQueue.__hash__`` asks OpenCL for the handle).
"""

from __future__ import annotations

import itertools
import os
import sys
import threading
import warnings
from typing import Any

# OpenCL constants (fixed by the Khronos headers), so the launch path needs no enum lookups.
from .profiled_queues import PROFILING_ENABLE, declined, real_properties

DEVICE_TYPE_CPU = 1 << 1  # CL_DEVICE_TYPE_CPU
DEVICE_TYPE_GPU = 1 << 2
DEVICE_TYPE_ACCELERATOR = 1 << 3
POCL_PLATFORM = "Portable Computing Language"


class ProfilingDisabledWarning(UserWarning):
    """A queue without ``PROFILING_ENABLE`` was used in a profile: its work is timed
    approximately, from completions observed on the host."""


class _Current(threading.local):
    # A class attribute default makes the read a plain attribute access on every thread.
    queue: Any = None


_current = _Current()
_numbers = itertools.count(1)
_label_lock = threading.RLock()  # re-entered by a _LabelTag collected while held


def current_queue() -> Any:
    """The calling thread's current OpenCL queue for kprof, or ``None``.

    It is the queue this thread last launched on while a profile captured it, or the one set
    with :func:`use_queue`. ``kprof.range`` puts its device timestamps on it.
    """
    return _current.queue


class use_queue:
    """Make ``queue`` the calling thread's current queue for kprof.

    ``kprof.range`` (and ``kprof.kernel``) time device work on the current queue. A thread's
    current queue is otherwise the one it last launched on inside a profile, so set it when a
    range must be timed on the device before the thread's first launch::

        with kprof_opencl.use_queue(queue):     # until the block ends
            with kprof.range("step"):
                ...

        kprof_opencl.use_queue(queue)           # as a statement: from now on, in this thread
    """

    __slots__ = ("_previous", "queue")

    def __init__(self, queue: Any) -> None:
        if queue is not None and not hasattr(queue, "finish"):
            raise TypeError(f"use_queue takes a pyopencl.CommandQueue, not {type(queue).__name__}")
        self.queue = queue
        self._previous = _current.queue
        _current.queue = queue

    def __enter__(self) -> Any:
        return self.queue

    def __exit__(self, *exc: object) -> None:
        _current.queue = self._previous


def queue_profiles(queue: Any) -> bool:
    """Whether ``queue`` was created with ``PROFILING_ENABLE`` (cached on the queue)."""
    try:
        return bool(queue._kprof_profiles)
    except AttributeError:
        pass
    profiles = bool(real_properties(queue) & PROFILING_ENABLE)
    try:
        queue._kprof_profiles = profiles
    except AttributeError:  # an object without __dict__: no cache, ask each time
        pass
    if not profiles:
        _warn_not_profiling(queue)
    return profiles


def _warn_not_profiling(queue: Any) -> None:
    try:
        label = queue_label(queue)
        if label in _warned:  # another object over the same queue (the hook's) said it
            return
        _warned.add(label)
        where = f"{label} on {device_name(queue.device)}"
    except Exception:  # describing is best effort; the advice is what matters
        where = repr(queue)
    if declined():
        why, fix = "kprof_opencl.disable_profiling() was called", "enable_profiling()"
    else:
        why = "it was created before `import kprof`, or through a CommandQueue name bound before"
        fix = "import kprof before creating queues"
    warnings.warn(
        f"kprof: the OpenCL {where} has no profiling ({why}), so its work is timed "
        f"approximately, on the host (rows marked ~); for exact device times, {fix}.",
        ProfilingDisabledWarning,
        stacklevel=_user_stacklevel(),
    )


_OURS = frozenset({"kprof", "kprof_core", "kprof_opencl", "pyopencl"})


def _user_stacklevel() -> int:
    """The ``stacklevel`` of the first frame outside kprof and PyOpenCL (its generated invokers
    included), so that a warning points at the user's line."""
    frame = sys._getframe(2)  # the caller of our caller: warnings.warn counts from there
    level = 2
    while frame is not None:
        name = str(frame.f_globals.get("__name__", ""))
        if not (name.split(".")[0] in _OURS or frame.f_code.co_filename.startswith("<generated")):
            return level
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return 2


def queue_label(queue: Any) -> str:
    """``"queue N"``: queues are numbered per process in the order kprof first sees them. Two
    Python objects over one ``cl_command_queue`` (the user's, and the one kprof's dispatch-table
    hook makes for a C library's enqueue on it, as VkFFT's) get the same label, so they are one
    queue in the reports."""
    try:
        return str(queue._kprof_label)
    except AttributeError:
        pass
    try:
        handle = int(queue.int_ptr)
    except Exception:
        handle = None
    with _label_lock:
        label = getattr(queue, "_kprof_label", None)
        if label is None:
            known = _by_handle.get(handle) if handle is not None else None
            label = known[0] if known is not None else f"queue {next(_numbers)}"
            try:
                queue._kprof_label = label
                if handle is not None:
                    queue._kprof_label_tag = _LabelTag(handle, label)
            except AttributeError:
                pass
    return str(label)


class _LabelTag:
    """Kept on each labelled queue object: the handle's label is known while one lives. When
    the last dies the handle may be reused by a new queue, which gets a new number."""

    __slots__ = ("handle", "label")

    def __init__(self, handle: int, label: str) -> None:
        self.handle, self.label = handle, label
        entry = _by_handle.get(handle)
        if entry is not None and entry[0] == label:
            entry[1] += 1
        else:
            _by_handle[handle] = [label, 1]

    def __del__(self) -> None:
        try:
            with _label_lock:
                entry = _by_handle.get(self.handle)
                if entry is not None and entry[0] == self.label:
                    entry[1] -= 1
                    if entry[1] <= 0:
                        del _by_handle[self.handle]
        except Exception:  # interpreter shutdown: the module's globals may be gone
            pass


#: Labels of queues whose lack of profiling was said (once per queue, whichever object).
_warned: set[str] = set()

#: ``{handle: [label, live labelled objects]}`` (changed under ``_label_lock``).
_by_handle: dict[int, list[Any]] = {}


def platform_title(platform_name: str) -> str:
    """A short platform name for reports: ``PoCL`` rather than 'Portable Computing Language'."""
    return "PoCL" if platform_name.strip() == POCL_PLATFORM else platform_name.strip()


def device_name(device: Any) -> str:
    return str(device.name).strip()


def device_key(device: Any) -> str:
    """Stable per OpenCL device in this process: its name and its ``cl_device_id``."""
    return f"{device_name(device)}@{device.int_ptr:#x}"


def is_pocl_cpu(device: Any) -> bool:
    """PoCL's CPU drivers (pthread, basic) stamp events with the host's CLOCK_MONOTONIC_RAW."""
    try:
        return device.platform.name.strip() == POCL_PLATFORM and bool(device.type & DEVICE_TYPE_CPU)
    except Exception:
        return False


def _rank(device: Any) -> int:
    """Order for picking a default device: GPUs and accelerators, then PoCL, then the rest."""
    try:
        pname = device.platform.name.strip()
        if pname.lower().startswith("oclgrind"):  # a simulator: slow, last resort
            return 3
        if device.type & (DEVICE_TYPE_GPU | DEVICE_TYPE_ACCELERATOR):
            return 0
        return 1 if pname == POCL_PLATFORM else 2
    except Exception:
        return 4


def default_device() -> Any:
    """The device kprof uses when none is given; ``None`` when OpenCL has none.

    ``PYOPENCL_CTX`` chooses, as for ``pyopencl.create_some_context``. Otherwise the first GPU
    or accelerator of any platform, then PoCL's CPU device, then any other device.
    """
    import pyopencl as cl

    if os.environ.get("PYOPENCL_CTX"):
        return cl.create_some_context(interactive=False).devices[0]
    try:
        platforms = cl.get_platforms()
    except cl.Error:
        return None
    devices = []
    for p in platforms:
        try:
            devices.extend(p.get_devices())
        except cl.Error:  # a platform with no devices raises DEVICE_NOT_FOUND
            continue
    if not devices:
        return None
    return min(devices, key=_rank)


def profiling_queue(ctx_or_device: Any = None) -> Any:
    """A new ``pyopencl.CommandQueue`` created with ``PROFILING_ENABLE``, so kprof can time it.

    ``ctx_or_device``: a ``Context`` (its first device), a ``Device`` (a new context for it),
    an existing ``CommandQueue`` (same context and device; profiling cannot be switched on for
    an existing queue), or ``None`` for the default device (see :func:`default_device`).
    """
    import pyopencl as cl

    props: Any = cl.command_queue_properties.PROFILING_ENABLE  # an int at runtime
    target = ctx_or_device
    if target is None:
        device = default_device()
        if device is None:
            raise RuntimeError(
                "kprof_opencl.profiling_queue: OpenCL finds no device here. Install one that "
                "runs on any CPU: pip install pocl-binary-distribution"
            )
        return cl.CommandQueue(cl.Context([device]), device, properties=props)
    if isinstance(target, cl.CommandQueue):
        return cl.CommandQueue(target.context, target.device, properties=target.properties | props)
    if isinstance(target, cl.Context):
        return cl.CommandQueue(target, target.devices[0], properties=props)
    if isinstance(target, cl.Device):
        return cl.CommandQueue(cl.Context([target]), target, properties=props)
    raise TypeError(
        "profiling_queue takes a pyopencl Context, Device or CommandQueue, or None, "
        f"not {type(target).__name__}"
    )
