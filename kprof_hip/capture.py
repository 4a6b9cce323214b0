"""Automatic capture of hip-python launches and copies while a profile is active.

The wrappers replace attributes of the ``hip.hip`` module object (in hip-python 10 it *is*
``rocm.bindings.hip``; older versions have only ``hip.hip``), so calls written
``hip.hipModuleLaunchKernel(...)`` are captured. A function imported by name before the
profile started (``from hip.hip import hipModuleLaunchKernel``) is bound to the original
and escapes capture; so do launch entry points not listed in ``KERNEL_ENTRY_POINTS`` and
``COPY_ENTRY_POINTS`` (cooperative launches, ``hipMemcpyHtoD`` and friends, 2D/3D copies).

Each captured call records a pooled event on the stream the call names (not the thread's
current stream) before and after the native call, and hands both to
``Recorder.launch``. A call that returns an error code is returned to the caller unchanged;
nothing is recorded for it (it did no device work; the caller has the error), and its
events go back to the pool.
If kprof's own event record fails where the user's call succeeds, the backend is disabled
(kprof warns once); the user's call runs either way.

Kernel names come from ``hipModuleGetFunction``, which is wrapped too while capture is
installed: every name it hands out is remembered for the life of the process. Functions
obtained before the first profile are named ``kernel@0x...`` unless given a name with
``kprof_hip.name_function``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from kprof import plugin as kp

from .copies import copy_wrappers
from .kernels import kernel_wrappers
from .wrapping import COPY_ENTRY_POINTS, KERNEL_ENTRY_POINTS, make_run, registrar


def hip_modules() -> list[Any]:
    """The distinct module objects users call HIP through."""
    mods: list[Any] = []
    for name in ("hip.hip", "rocm.bindings.hip"):
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        if all(mod is not m for m in mods):
            mods.append(mod)
    return mods


def make_wrappers(backend: kp.Backend, originals: dict[str, Any]) -> dict[str, Callable[..., Any]]:
    """Wrappers for the entry points in ``originals`` (name -> native function)."""
    wrappers: dict[str, Callable[..., Any]] = {}
    run, wrap = make_run(backend), registrar(originals, wrappers)
    kernel_wrappers(backend, originals, run, wrap)
    copy_wrappers(backend, originals, run, wrap)
    return wrappers


def install(backend: kp.Backend) -> None:
    """Patch every entry point present on every hip-python module object."""
    patcher = backend.state["patcher"] = kp.Patcher()
    for mod in hip_modules():
        originals = {
            n: getattr(mod, n)
            for n in (*KERNEL_ENTRY_POINTS, *COPY_ENTRY_POINTS, "hipModuleGetFunction")
            if hasattr(mod, n)
        }
        for name, wrapper in make_wrappers(backend, originals).items():
            patcher.patch(mod, name, wrapper)


def remove(backend: kp.Backend) -> list[str]:
    """Restore the originals; returns attributes someone else had replaced meanwhile."""
    patcher = backend.state.pop("patcher", None)
    return patcher.restore() if patcher is not None else []
