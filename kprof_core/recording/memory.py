"""What a plugin calls to report device memory: ``kprof.plugin.allocated`` and ``freed``.

A plugin whose ``memory_install`` hook returned True calls them from its wrappers of the
vendor's allocation and free functions, on the thread that allocates; they record into the
calling context's profile (``kprof.plugin.active()``), like launches, in its ``MemoryLog``.
"""

from __future__ import annotations

import struct
from time import perf_counter_ns
from typing import TYPE_CHECKING

from kprof_core.data.memory import ALLOC, FREE
from kprof_core.recording.recorder import active

if TYPE_CHECKING:
    from kprof_core.host.backend import Backend
    from kprof_core.recording.recorder import Recorder


def allocated(
    backend: Backend,
    device: str,
    address: int,
    nbytes: int,
    time_ns: int | None = None,
    site: str | None = None,
) -> None:
    """Report an allocation of ``nbytes`` at ``address`` on ``device`` to the calling
    context's profile (nothing outside one). ``device``: the device's name as the plugin's
    ``queue_info`` gives it; ``address``: the address or an int handle, unique among the
    device's live allocations; ``time_ns``: when (``kprof.plugin.now()``; default: now);
    ``site``: where in the user's code, when the plugin knows it."""
    rec = active()
    if rec is None:
        return
    # The common case inline (a device the profile knows, int values, no site to find): one
    # Python call less per event than ``MemoryLog.add``, which does everything else.
    log = rec.memory
    devs = log._open.get(backend)
    if devs is None:
        return
    dev = devs.get(device)
    if dev is not None and site is None and log.catch is None:
        try:
            if nbytes >= 0:
                t = perf_counter_ns() if time_ns is None else time_ns
                log._put(log._pack(t, dev, ALLOC, nbytes, address, -1))
                return
        except (struct.error, TypeError):
            pass
    log.add(backend, ALLOC, device, address, nbytes, time_ns, site)


def freed(
    backend: Backend,
    device: str,
    address: int,
    nbytes: int = -1,
    time_ns: int | None = None,
    recorder: Recorder | None = None,
) -> None:
    """Report that the allocation at ``address`` on ``device`` was freed (``nbytes``: its
    size if the plugin knows it, else -1: kprof takes its allocation's). ``recorder``: the
    profile to report to (``active()`` where the allocation was made) when the free is
    learnt later or elsewhere (a driver's callback, delivered at the profile's end); default:
    the calling context's."""
    rec = active() if recorder is None else recorder
    if rec is None:
        return
    log = rec.memory
    devs = log._open.get(backend)
    if devs is None:
        return
    dev = devs.get(device)
    if dev is not None:
        try:
            if nbytes >= -1:
                t = perf_counter_ns() if time_ns is None else time_ns
                log._put(log._pack(t, dev, FREE, nbytes, address, -1))
                return
        except (struct.error, TypeError):
            pass
    log.add(backend, FREE, device, address, nbytes, time_ns, None)


__all__ = ["allocated", "freed"]
