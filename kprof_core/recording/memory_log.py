"""One profile's allocations and frees (``kprof.plugin.allocated``/``freed``, in
``memory.py``), kept in one flat ``array('q')``: no Python object per event is stored.

A plugin whose ``memory_install`` hook returned True calls these from its wrappers of the
vendor's allocation and free functions, on the thread that allocates; they record into the
calling context's profile (``kprof.plugin.active()``), like launches. One ``extend`` of a
tuple per event keeps the row whole when threads report at once (one C call under the GIL).
"""

from __future__ import annotations

import warnings
from array import array
from collections.abc import Sequence
from time import perf_counter_ns
from typing import TYPE_CHECKING

from kprof_core.data.memory import ALLOC, STRIDE, Memory, MemoryTable

if TYPE_CHECKING:
    from kprof_core.host.backend import Backend

_WRAP = 1 << 64
_HIGH = 1 << 63


class MemoryLog:
    """One profile's memory events: a flat row array (``STRIDE`` ints an event, columns in
    ``MemoryTable.COLUMNS``' order), the devices ((backend, device) -> index) and sites."""

    def __init__(self, backends: Sequence[Backend]) -> None:
        self.rows = array("q")
        self.backends = frozenset(backends)
        self.devices: dict[tuple[str, str], int] = {}
        self.sites: dict[str, int] = {}
        self.closed = False
        self.bad = 0  # events refused for a malformed value (warned once, at the end)
        self.bad_example = ""

    def add(
        self,
        backend: Backend,
        kind: int,
        device: str,
        address: int,
        nbytes: int,
        time_ns: int | None,
        site: str | None,
    ) -> None:
        if self.closed or backend not in self.backends:
            return
        if (
            type(address) is not int
            or type(nbytes) is not int
            or nbytes < -1
            or (kind == ALLOC and nbytes < 0)
            or not -_HIGH <= address < _WRAP
        ):
            self._refuse(backend, f"address {address!r:.40}, nbytes {nbytes!r:.40}")
            return
        key = (backend.name, device)
        dev = self.devices.get(key)
        if dev is None:
            if type(device) is not str:
                self._refuse(backend, f"device {device!r:.40} is not a str")
                return
            dev = self.devices.setdefault(key, len(self.devices))
        s = -1
        if site is not None:
            s = self.sites.get(site, -1)
            if s < 0:
                s = self.sites.setdefault(str(site), len(self.sites))
        if address >= _HIGH:
            address -= _WRAP
        if time_ns is None:
            time_ns = perf_counter_ns()
        elif type(time_ns) is not int:
            self._refuse(backend, f"time_ns {time_ns!r:.40} is not an int")
            return
        self.rows.extend((time_ns, dev, kind, nbytes, address, s))

    def _refuse(self, backend: Backend, what: str) -> None:
        self.bad += 1
        self.bad_example = self.bad_example or f"backend {backend.name!r}: {what}"

    def absorb(self, child: MemoryLog) -> None:
        """A finished nested profile's events, so that the outer profile has them too."""
        if self.closed or not child.rows:
            return
        dmap = [self.devices.setdefault(k, len(self.devices)) for k in child.devices]
        smap = [self.sites.setdefault(k, len(self.sites)) for k in child.sites]
        rows = child.rows
        for i in range(0, len(rows), STRIDE):
            t, d, k, n, a, s = rows[i : i + STRIDE]
            self.rows.extend((t, dmap[d], k, n, a, -1 if s < 0 else smap[s]))

    def close(self, start_ns: int) -> Memory:
        """The profile ended: later events are dropped; its events as a ``Memory``."""
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
        return Memory(
            MemoryTable.from_rows(self.rows[:n]),
            list(self.devices),
            list(self.sites),
            start_ns,
        )


__all__ = ["MemoryLog"]
