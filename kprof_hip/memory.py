"""Device memory of HIP allocations (the ``memory_install`` hook).

While installed, hip-python's allocation and free entry points are wrapped on every module
object users call HIP through (as ``capture.py`` wraps launches): each successful
``hipMalloc``, ``hipMallocManaged``, ``hipExtMallocWithFlags`` and ``hipMallocAsync`` is an
allocation on its device (the calling thread's current device; the stream's for
``hipMallocAsync``), each successful ``hipFree`` and ``hipFreeAsync`` a free, reported with
``kprof.plugin.allocated``/``freed``. ``hipHostMalloc``/``hipHostFree`` (pinned host memory)
count against a device of their own, ``HIP pinned host memory``, not a GPU's.

Times are host times of the calls: a ``hipFreeAsync`` is reported when it is enqueued, not
when its stream reaches it (HIP reports neither). A free names only the pointer, so the
device each live allocation was reported on is remembered (``live``: address -> device) to
report its free on the same device; a free of memory allocated before the profile is
reported on the current device, and matches nothing (``Memory.unmatched_frees``). Entry
points imported by name before the profile (``from hip.hip import hipMalloc``) are not seen.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kprof import plugin as kp

from . import runtime

ALLOC_ENTRY_POINTS = (
    "hipMalloc",
    "hipMallocManaged",
    "hipExtMallocWithFlags",
    "hipMallocAsync",
    "hipHostMalloc",
)
FREE_ENTRY_POINTS = ("hipFree", "hipFreeAsync", "hipHostFree")
#: The memory device pinned host allocations (``hipHostMalloc``) count against.
PINNED = "HIP pinned host memory"

_labels: dict[int, str] = {}


def device_label(index: int) -> str:
    """A device as ``queue_info`` names it, ``"HIP 0 (name)"`` (cached)."""
    got = _labels.get(index)
    if got is None:
        try:
            name = runtime.device_name(index)
        except Exception:
            name = "name unknown"
        got = _labels[index] = f"HIP {index} ({name})"
    return got


def _current() -> str:
    if runtime.device_count <= 1:  # one device: no hipGetDevice call
        got = _labels.get(0)
        return got if got is not None else device_label(0)
    return device_label(runtime.current_device())


def memory_wrappers(
    backend: kp.Backend, originals: dict[str, Any], live: dict[int, str]
) -> dict[str, Callable[..., Any]]:
    """Wrappers for the allocation and free entry points in ``originals``.

    The common path of each is inline (one ``active()`` lookup, the native call, one helper
    call): about 1 µs a ``hipMalloc``/``hipFree`` pair is what is left (BENCHMARKS.md)."""
    import functools

    active, allocated, freed = kp.active, kp.allocated, kp.freed
    address, stream_of = runtime.address, runtime.stream_of
    out: dict[str, Callable[..., Any]] = {}

    def wrap(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            if name in originals:
                out[name] = functools.wraps(originals[name])(fn)
            return fn

        return register

    def took(result: Any, dev: str | None, size: Any, stream: Any = None) -> None:
        """Report a successful allocation's pointer (NULL: size 0, nothing to report) on
        ``dev`` (None: the stream's device)."""
        if result[0] or result[1] is None:
            return
        try:
            addr = int(result[1])
            if dev is None:
                dev = device_label(stream_of(stream).device)
        except Exception:  # kprof's own failure must not cost the user's allocation
            return
        if addr:
            live[addr] = dev
            allocated(backend, dev, addr, int(size))

    def gave(addr: int, dev: str | None, result: Any, fallback: Callable[[], str]) -> None:
        """After a free of ``addr`` (its device ``dev`` popped from ``live`` before the call,
        as the address may be reused right after): report it, or put ``dev`` back if it
        failed."""
        if result[0]:  # nothing was freed
            if dev is not None:
                live[addr] = dev
            return
        if addr and (dev is not None or active() is not None):
            try:
                freed(backend, dev if dev is not None else fallback(), addr)
            except Exception:
                pass

    def addr_of(ptr: Any) -> int:
        try:
            return address(ptr)
        except Exception:
            return 0

    # The wrappers repeat hip-python's parameter names so keyword calls keep working.
    o_malloc: Any = originals.get("hipMalloc")

    @wrap("hipMalloc")
    def hipMalloc(size: Any) -> Any:
        # took() inline: the common call is worth the repetition (BENCHMARKS.md).
        if active() is None or backend.broken is not None:
            return o_malloc(size)
        result = o_malloc(size)
        if result[0] or result[1] is None:
            return result
        try:
            addr = int(result[1])
            dev = _current()
            if addr:
                live[addr] = dev
                allocated(backend, dev, addr, int(size))
        except Exception:  # kprof's own failure must not cost the user's allocation
            pass
        return result

    o_managed: Any = originals.get("hipMallocManaged")

    @wrap("hipMallocManaged")
    def hipMallocManaged(size: Any, flags: Any) -> Any:
        if active() is None or backend.broken is not None:
            return o_managed(size, flags)
        result = o_managed(size, flags)
        took(result, _current(), size)
        return result

    o_ext: Any = originals.get("hipExtMallocWithFlags")

    @wrap("hipExtMallocWithFlags")
    def hipExtMallocWithFlags(sizeBytes: Any, flags: Any) -> Any:
        if active() is None or backend.broken is not None:
            return o_ext(sizeBytes, flags)
        result = o_ext(sizeBytes, flags)
        took(result, _current(), sizeBytes)
        return result

    o_malloc_async: Any = originals.get("hipMallocAsync")

    @wrap("hipMallocAsync")
    def hipMallocAsync(size: Any, stream: Any) -> Any:
        if active() is None or backend.broken is not None:
            return o_malloc_async(size, stream)
        result = o_malloc_async(size, stream)
        took(result, None, size, stream)
        return result

    o_host_malloc: Any = originals.get("hipHostMalloc")

    @wrap("hipHostMalloc")
    def hipHostMalloc(size: Any, flags: Any) -> Any:
        if active() is None or backend.broken is not None:
            return o_host_malloc(size, flags)
        result = o_host_malloc(size, flags)
        took(result, PINNED, size)
        return result

    o_free: Any = originals.get("hipFree")

    @wrap("hipFree")
    def hipFree(ptr: Any) -> Any:
        if not live and active() is None:
            return o_free(ptr)
        try:
            addr = int(ptr)  # a pointer object or an int: address()'s first try, inline
        except Exception:
            addr = addr_of(ptr)
        dev = live.pop(addr, None)
        result = o_free(ptr)
        if dev is not None and not result[0]:  # the common case: gave() inline
            try:
                freed(backend, dev, addr)
            except Exception:
                pass
            return result
        gave(addr, dev, result, _current)
        return result

    o_free_async: Any = originals.get("hipFreeAsync")

    @wrap("hipFreeAsync")
    def hipFreeAsync(dev_ptr: Any, stream: Any) -> Any:
        if not live and active() is None:
            return o_free_async(dev_ptr, stream)
        addr = addr_of(dev_ptr)
        dev = live.pop(addr, None)
        result = o_free_async(dev_ptr, stream)
        gave(addr, dev, result, lambda: device_label(stream_of(stream).device))
        return result

    o_host_free: Any = originals.get("hipHostFree")

    @wrap("hipHostFree")
    def hipHostFree(ptr: Any) -> Any:
        if not live and active() is None:
            return o_host_free(ptr)
        addr = addr_of(ptr)
        dev = live.pop(addr, None)
        result = o_host_free(ptr)
        gave(addr, dev, result, lambda: PINNED)
        return result

    return out


def install(backend: kp.Backend) -> bool:
    """Wrap the allocation and free entry points present on every hip-python module."""
    from .capture import hip_modules

    try:
        mods = hip_modules()
    except Exception:
        return False
    patcher = backend.state["memory_patcher"] = kp.Patcher()
    live: dict[int, str] = backend.state.setdefault("memory_live", {})
    for mod in mods:
        originals = {
            n: getattr(mod, n) for n in (*ALLOC_ENTRY_POINTS, *FREE_ENTRY_POINTS) if hasattr(mod, n)
        }
        for name, wrapper in memory_wrappers(backend, originals, live).items():
            patcher.patch(mod, name, wrapper)
    return bool(mods)


def remove(backend: kp.Backend) -> None:
    """Restore the originals; forget the live allocations (no profile is left to free them in)."""
    patcher = backend.state.pop("memory_patcher", None)
    if patcher is not None:
        patcher.restore()
    live = backend.state.get("memory_live")
    if live is not None:
        live.clear()
