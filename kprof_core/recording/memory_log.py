"""One profile's allocations and frees (``kprof.plugin.allocated``/``freed``, in
``memory.py``), kept in one flat ``array('q')``: no Python object per event is stored.

A plugin whose ``memory_install`` hook returned True calls these from its wrappers of the
vendor's allocation and free functions, on the thread that allocates; they record into the
calling context's profile (``kprof.plugin.active()``), like launches. One ``extend`` of a
tuple per event keeps the row whole when threads report at once (one C call under the GIL).
"""

from __future__ import annotations

import struct
import warnings
from array import array
from collections.abc import Callable, Sequence
from time import perf_counter_ns
from typing import TYPE_CHECKING

from kprof_core.data.memory import ALLOC, STRIDE, Memory, MemoryTable
from kprof_core.recording.sites import site_of

if TYPE_CHECKING:
    from kprof_core.host.backend import Backend

_WRAP = 1 << 64
_HIGH = 1 << 63


class MemoryLog:
    """One profile's memory events: a flat row array (``STRIDE`` ints an event, columns in
    ``MemoryTable.COLUMNS``' order), the devices ((backend, device) -> index) and sites.

    Sites: a plugin may name one (a str, interned: index >= 0); otherwise, with
    ``profile(sites=True)``, ``catch`` (the recorder's launch-site catcher) finds the user's
    line of an allocating call (not of a free), kept as its raw id ``r`` coded ``-2 - r`` until ``close``
    resolves it to ``Site.label``; -1: none.
    """

    def __init__(self, backends: Sequence[Backend]) -> None:
        self.rows = array("q")
        # Per backend the profile uses: device name -> index. Emptied when the profile ends,
        # so one lookup answers "is this the profile's backend, still open?".
        self._open: dict[Backend, dict[str, int]] = {b: {} for b in backends}
        self.devices: dict[tuple[str, str], int] = {}
        self.closed = False
        self.sites: dict[str, int] = {}
        self.bad = 0  # events refused for a malformed value (warned once, at the end)
        self.bad_example = ""
        # One C call appends a whole row (atomic under the GIL, so threads reporting at once
        # cannot interleave columns); packing checks every value is an int64 on the way.
        self._put = self.rows.frombytes
        self._pack = struct.Struct(f"{STRIDE}q").pack
        #: The launch-site catcher's ``capture`` (raw id or -1) with sites on, else None.
        self.catch: Callable[[], int] | None = None

    def add_backend(self, backend: Backend) -> None:
        """Record ``backend``'s events too (its capture started while the profile ran)."""
        if not self.closed:
            self._open.setdefault(backend, {})

    def add(
        self,
        backend: Backend,
        kind: int,
        device: str,
        address: int,
        nbytes: int,
        time_ns: int | None,
        site: str | None,
        catch: bool = True,
        raw: int = -1,
    ) -> None:
        """Record one event (``catch``: False for events reported away from the allocating
        call, such as an activity API's: the calling frames are not the allocation's; ``raw``:
        then the raw site id caught on the allocating thread, -1 none)."""
        devs = self._open.get(backend)
        if devs is None:  # not the profile's backend, or the profile ended
            return
        dev = devs.get(device)
        if dev is None:
            if type(device) is not str:
                self._refuse(backend, f"device {device!r:.40} is not a str")
                return
            dev = devs[device] = self.devices.setdefault((backend.name, device), len(self.devices))
        if site is not None:
            s = self.sites.setdefault(str(site), len(self.sites))
        elif catch and self.catch is not None and kind == ALLOC:  # where it was allocated
            s = -2 - self.catch()  # -1 (unknown) stays -1
        elif raw >= 0 and kind == ALLOC and self.catch is not None:  # caught at the call
            s = -2 - raw
        else:
            s = -1
        if time_ns is None:
            time_ns = perf_counter_ns()
        try:
            if nbytes < 0 and (kind == ALLOC or nbytes != -1):
                raise ValueError
            self._put(self._pack(time_ns, dev, kind, nbytes, address, s))
        except (struct.error, TypeError, ValueError):
            # An address above 2**63 (a 64-bit pointer's top half) is kept, as int64 wraps it.
            if type(address) is int and _HIGH <= address < _WRAP and type(nbytes) is int:
                try:
                    self._put(self._pack(time_ns, dev, kind, nbytes, address - _WRAP, s))
                    return
                except (struct.error, TypeError, ValueError):
                    pass
            self._refuse(
                backend, f"address {address!r:.40}, nbytes {nbytes!r:.40}, time {time_ns!r:.40}"
            )

    def _refuse(self, backend: Backend, what: str) -> None:
        self.bad += 1
        self.bad_example = self.bad_example or f"backend {backend.name!r}: {what}"

    def absorb(self, child: MemoryLog) -> None:
        """A finished nested profile's events, so that the outer profile has them too."""
        if not self._open or not child.rows:
            return
        dmap = [self.devices.setdefault(k, len(self.devices)) for k in child.devices]
        smap = [self.sites.setdefault(k, len(self.sites)) for k in child.sites]
        rows = child.rows
        for i in range(0, len(rows), STRIDE):
            t, d, k, n, a, s = rows[i : i + STRIDE]
            # Caught raw ids (< -1) are the process's: they stay as they are.
            self.rows.extend((t, dmap[d], k, n, a, s if s < 0 else smap[s]))

    def close(self, start_ns: int) -> Memory:
        """The profile ended: later events are dropped; its events as a ``Memory``."""
        self._open = {}
        self.closed = True
        if self.bad:
            warnings.warn(
                f"kprof: {self.bad} memory event(s) refused for a malformed value (first: "
                f"{self.bad_example}); the plugin must pass an int address, a byte count >= 0 "
                f"and a str device",
                RuntimeWarning,
                stacklevel=3,
            )
        # Rows are whole (one extend each); a row begun by another thread cannot be cut.
        n = len(self.rows) - len(self.rows) % STRIDE
        table = MemoryTable.from_rows(self.rows[:n])
        if any(s < -1 for s in table.site):
            table.site = self._resolve(table.site)
        return Memory(table, list(self.devices), list(self.sites), start_ns)

    def _resolve(self, column: array[int]) -> array[int]:
        """Caught sites (raw ids, coded ``-2 - r``) as indexes into ``sites`` (their labels)."""
        index: dict[int, int] = {}
        for s in set(column):
            if s < -1:
                label = site_of(-2 - s).label
                index[s] = self.sites.setdefault(label, len(self.sites))
        return array("q", [index.get(s, s) for s in column])


__all__ = ["MemoryLog"]
