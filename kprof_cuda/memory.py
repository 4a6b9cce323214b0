"""Device memory on CUDA, from one of two sources (never both: the pool's blocks lie inside
the allocations that hold them, and would be counted twice).

- Where CUPTI is on (kernels recorded one by one): CUPTI's MEMORY2 records, read by kprof's
  CUPTI readers with the rest (``activity.CuptiActivity.memory_start``): every allocation and
  free of the device (``cudaMalloc`` by CuPy's pool and any other library, managed and
  async allocations; pinned host memory on a device of its own), each in the profile whose
  scope made the call. CUPTI wins.
- Where it is not: CuPy's memory pool through CuPy's documented hook API
  (``cupy.cuda.memory_hook.MemoryHook``): each block the pool hands out
  (``malloc_postprocess``: its pointer and rounded size) is an allocation, each block given
  back (``free_postprocess``) a free: what arrays hold, not the pool's reserve. CuPy keeps hooks
  per thread: the hook is entered on the thread that starts the first profile, so allocations
  made on other threads are not seen.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from kprof import plugin as kp

#: The memory device pinned and pageable host allocations (MEMORY2) count against.
HOST = "CUDA pinned host memory"


def cupti_label(device_label: Callable[[int], str]) -> Callable[[int, int], str]:
    """A MEMORY2 row's memory device: CUPTI's device id and memory kind -> its label."""
    from .cupti_abi import MEMORY_KIND_HOST

    labels: dict[int, str] = {}

    def label(device: int, kind: int) -> str:
        if kind in MEMORY_KIND_HOST:
            return HOST
        got = labels.get(device)
        if got is None:
            got = labels[device] = device_label(device)
        return got

    return label


def hook_base(mod: Any, name: str) -> Any | None:
    """CuPy's ``MemoryHook`` class, or None where this CuPy has none."""
    base = getattr(getattr(getattr(mod, "cuda", None), "memory_hook", None), "MemoryHook", None)
    if base is None:
        try:
            base = importlib.import_module(f"{name}.cuda.memory_hook").MemoryHook
        except (ImportError, AttributeError):
            return None
    return base


def install(backend: kp.Backend, mod: Any, name: str, label: Callable[[int], str]) -> Any | None:
    """Enter a hook reporting the pool's blocks on the calling thread; None without one."""
    base = hook_base(mod, name)
    if base is None:
        return None
    allocated, freed = kp.allocated, kp.freed
    labels: dict[int, str] = {}

    def device(dev: int) -> str:
        got = labels.get(dev)
        if got is None:
            got = labels[dev] = label(dev)
        return got

    class KprofMemoryHook(base):  # type: ignore[misc, valid-type]
        name = "kprof"

        def malloc_postprocess(self, **kw: Any) -> None:
            ptr = kw.get("mem_ptr", 0)
            if ptr:  # 0: the allocation failed
                allocated(backend, device(kw["device_id"]), ptr, kw["mem_size"])

        def free_postprocess(self, **kw: Any) -> None:
            freed(backend, device(kw["device_id"]), kw["mem_ptr"], kw["mem_size"])

    hook = KprofMemoryHook()
    hook.__enter__()
    return hook


def remove(hook: Any) -> None:
    try:
        hook.__exit__(None, None, None)
    except Exception:  # left on another thread than it was entered: CuPy's is thread-local
        pass
