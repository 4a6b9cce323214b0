"""Device memory of CuPy's memory pool, through CuPy's documented hook API
(``cupy.cuda.memory_hook.MemoryHook``): each block the pool hands out (``malloc_postprocess``:
its pointer and rounded size) is an allocation, each block given back (``free_postprocess``) a
free. What arrays hold, not the pool's own reserve (``cudaMalloc``, CUPTI's MEMORY2, which
kprof does not read yet). CuPy keeps hooks per thread: the hook is entered on the thread that
starts the first profile, so allocations made on other threads are not seen.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from kprof import plugin as kp


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
