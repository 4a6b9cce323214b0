"""The harvest's batch reader of OpenCL events (the ``device_times_batch`` hook).

For a run of pending launches, the status, ``START`` and ``END`` of each event, up to the first
one not complete. Compiled (``_clnative``): through ``clGetEventInfo`` and
``clGetEventProfilingInfo`` of the OpenCL library PyOpenCL has loaded, called on each event's
``int_ptr``. Otherwise, or if that library cannot be found: through PyOpenCL's own methods,
mapped over the run (no Python frame per event). Both give the numbers ``device_times`` gives.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from itertools import takewhile
from operator import methodcaller
from typing import Any

from kprof import plugin as kp

from . import clock

_STATUS = methodcaller("get_info", 0x11D3)  # CL_EVENT_COMMAND_EXECUTION_STATUS
_START = methodcaller("get_profiling_info", clock.START)
_END = methodcaller("get_profiling_info", clock.END)
_COMPLETE = (0).__eq__  # CL_COMPLETE; running states are > 0, failed commands < 0

# (the compiled reader or None, why) once looked for; the OpenCL library stays loaded.
_compiled: tuple[Any, str] | None = None


def opencl_library() -> str | None:
    """The path of the OpenCL library this process has loaded (PyOpenCL's), where it can be
    told; else the name the platform's loader would find."""
    if sys.platform.startswith("linux"):
        try:
            with open("/proc/self/maps") as maps:
                for line in maps:
                    path = line.rsplit(None, 1)[-1] if "/" in line else ""
                    if path.rsplit("/", 1)[-1].startswith("libOpenCL"):
                        return path
        except OSError:
            pass
    if sys.platform == "darwin":
        return "/System/Library/Frameworks/OpenCL.framework/OpenCL"
    if sys.platform == "win32":
        return "OpenCL.dll"
    return ctypes.util.find_library("OpenCL")


def compiled_reader() -> Any:
    """The compiled reader, bound to the OpenCL library; None where unavailable (see why())."""
    global _compiled
    if not kp.compiled_enabled():
        return None
    if _compiled is None:
        _compiled = _bind()
    return _compiled[0]


def why() -> str:
    """Which reader the harvest uses, for ``kprof backends``."""
    if compiled_reader() is not None:
        return "compiled"
    return "PyOpenCL methods" + (f" ({_compiled[1]})" if _compiled and _compiled[1] else "")


def _bind() -> tuple[Any, str]:
    mod = kp.load_plugin_part("kprof_opencl", "_clnative")
    if mod is None:
        return None, "kprof_opencl._clnative is not built"
    import pyopencl  # noqa: F401  (loads the OpenCL library first, so that it is the one found)

    path = opencl_library()
    if path is None:
        return None, "no OpenCL library found"
    try:
        lib = ctypes.CDLL(path)
        info = ctypes.cast(lib.clGetEventInfo, ctypes.c_void_p).value
        prof = ctypes.cast(lib.clGetEventProfilingInfo, ctypes.c_void_p).value
        mod.bind(info, prof)
    except Exception as exc:
        return None, f"{path}: {type(exc).__name__}: {exc}"
    return mod, ""


def device_times_batch(starts: tuple[Any, ...], stops: tuple[Any, ...]) -> tuple[Any, Any]:
    """``(begins, ends)`` of the longest prefix of complete events (the hook's contract)."""
    reader = compiled_reader()
    if reader is not None:
        begins, ends = reader.read(starts, stops)
        return begins, ends
    k = len(list(takewhile(_COMPLETE, map(_STATUS, stops))))
    if k < len(stops):
        starts, stops = starts[:k], stops[:k]
    return list(map(_START, starts)), list(map(_END, stops))
