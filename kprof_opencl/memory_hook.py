"""Device memory through the dispatch-table hook (``_clhook``'s ``mem_hook``): transparent.

Every buffer of the process is made by the ICD's ``clCreateBuffer`` and every SVM allocation
by its ``clSVMAlloc``, whoever calls them (PyOpenCL, its memory pools, C libraries), so hooking
those entries sees them all without touching a Python class: ``pyopencl.Buffer`` stays
PyOpenCL's own (``isinstance``, ``type(Buffer.from_int_ptr(...))`` unchanged). An allocation
reaches ``kprof.plugin.allocated`` on the creating thread, with the Python caller's site where
the profile records sites. A buffer's end is its destruction, reported by the driver through
``clSetMemObjectDestructorCallback`` and queued in C (never Python on the driver's thread);
SVM's end is ``clSVMFree`` or ``clEnqueueSVMFree``. Queued ends reach ``freed`` with their
own times before the next allocation and at the profile's end.

A buffer the program releases while commands using it are in flight is destroyed when they
finish, on the driver's thread, a moment after kprof sees the work complete; the profile's end
waits for the destruction of the live buffers the program released (``_clhook.mem_released``),
at most ``END_GRACE_S``, so that they are not called live at the end (a race seen on 18 runs in
30 of a script ending with work in flight).

Not counted: sub-buffers (views of their parent's memory), images, buffers made before the
profile (their end is not registered: a buffer made before and freed inside the profile is
neither an allocation nor a free of it), ``clCreateBufferWithProperties`` (OpenCL 3.0: its
slot lies past the part of the table kprof checks is writable).
"""

from __future__ import annotations

import atexit
import time
from typing import Any

from kprof import plugin as kp

from . import hook
from .queues import device_name

#: The longest the profile's end waits for buffers the program released to be destroyed.
END_GRACE_S = 1.0


_clock = time.monotonic  # the wait's clock (a test replaces it)


def _pause() -> None:
    """Between two looks at the destructions the driver reported (a test replaces it)."""
    time.sleep(0.0005)


def context_device(names: dict[int, str], context: Any) -> str:
    """The device a context's buffers count against: its device, or its devices joined."""
    key = context.int_ptr
    name = names.get(key)
    if name is None:
        name = names[key] = " + ".join(device_name(d) for d in context.devices)
    return name


def install(backend: kp.Backend) -> bool:
    """Hook the memory entries of every platform; False (nothing changed) unless all allow it."""
    mod = hook.module()
    if mod is None:
        return False
    platforms = backend.state.pop("survey", None)  # the launch hook's, made just before
    if platforms is None:
        try:
            platforms = hook.survey()
        except Exception:
            return False
    if not platforms or any(p.table is None or p.version < 11 for p in platforms):
        return False
    import pyopencl as cl

    names: dict[int, str] = {}
    # address -> (device, the profile it was reported to), for the allocations seen: its end
    # goes to that profile, wherever and whenever the driver reports it.
    live: dict[int, tuple[str, Any]] = {}
    allocated, freed, drain, active = kp.allocated, kp.freed, mod.mem_drain, kp.active
    from_ptr = cl.Context.from_int_ptr

    def free(addr: int, t: int) -> None:
        got = live.pop(addr, None)
        if got is not None:
            freed(backend, got[0], addr, -1, t, got[1])

    def ended() -> None:
        for addr, t in drain():
            free(addr, t)

    def settle() -> None:
        """The ends still queued, and those of buffers released but not yet destroyed."""
        ended()
        waiting = set(mod.mem_released()).intersection(live)
        deadline = _clock() + END_GRACE_S
        while waiting and _clock() < deadline:
            _pause()
            ended()
            waiting.intersection_update(live)

    def alloc(ctx: int, addr: int, nbytes: int, t: int) -> None:
        rec = active()
        if rec is None:  # a thread outside the profile: not its memory
            return
        dev = names.get(ctx)
        if dev is None:
            dev = context_device(names, from_ptr(ctx, retain=True))
        live[addr] = (dev, rec)
        allocated(backend, dev, addr, nbytes, t)

    tables: list[int] = []
    try:
        for p in platforms:
            if p.table is not None and p.table not in tables:
                mod.mem_hook(p.table, p.version, alloc, free)
                tables.append(p.table)
    except Exception:
        for t in tables:
            mod.mem_unhook(t)
        return False
    backend.state["memory_tables"] = (tables, settle)
    _hooked.extend(tables)
    return True


def remove(backend: kp.Backend) -> bool:
    """Deliver the ends still queued and restore the entries; False where not installed."""
    got = backend.state.pop("memory_tables", None)
    if got is None:
        return False
    tables, settle = got
    mod = hook.module()
    settle()
    for t in tables:
        if t in _hooked:
            _hooked.remove(t)
            mod.mem_unhook(t)
    return True


# Tables whose memory entries are hooked now: restored at exit too, should a profile never end,
# so that no allocation calls into an interpreter that is going away.
_hooked: list[int] = []


@atexit.register
def _restore_at_exit() -> None:
    if _hooked:
        mod = hook.module()
        while _hooked:
            mod.mem_unhook(_hooked.pop())


__all__ = ["install", "remove"]
