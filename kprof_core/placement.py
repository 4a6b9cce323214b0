"""Placement: device times put on the host timeline (``perf_counter_ns``), once per device.

Rows leave the harvest with ``start`` relative to their device's reference token (the first
work seen on that device in the profile). At the end, each device's reference is mapped to the
host clock by the backend's ``align_clock``, or else assumed to start at its launch; then the
whole device is shifted, if needed, so that no work starts before its launch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .backend import Alignment, Backend, BadReturn
from .records import PLACED, DeviceTable, QueueRecord

if TYPE_CHECKING:
    from collections.abc import Sequence


@dataclass
class DeviceClock:
    """How one device's timestamps were placed on the host timeline."""

    backend: str
    device: str
    method: str
    error_ns: int | None
    shift_ns: int = 0

    def describe(self) -> str:
        err = "unknown error bound" if self.error_ns is None else f"error ≤ {self.error_ns} ns"
        extra = f", shifted {self.shift_ns} ns so no work starts before its launch" if self.shift_ns else ""
        return f"{self.method} ({err}{extra})"



def place(table: DeviceTable, queues: Sequence[QueueRecord],
          refs: dict[str, tuple[Backend, Any, int, int]],
          hook_failed: Callable[..., str]) -> dict[str, DeviceClock]:
    """Place every unplaced row of ``table`` on the host clock; returns each device's clock.

    ``refs`` maps a device key to (backend, reference token, its launch's host start and end).
    """
    t = table
    clocks: dict[str, DeviceClock] = {}
    rows_by_device: dict[str, list[int]] = {}
    for i in range(len(t)):
        if not t.flags[i] & PLACED:
            rows_by_device.setdefault(queues[t.queue[i]].device_key, []).append(i)
    for dkey, rows in rows_by_device.items():
        backend, tok, h0, h1 = refs[dkey]
        alignment: Alignment | None = None
        try:
            alignment = backend.align_clock(backend, tok, (h0, h1))
            if alignment is not None and not isinstance(alignment, Alignment):
                raise BadReturn(f"align_clock returned {type(alignment).__name__}, "
                                f"expected kprof.Alignment")
        except Exception as exc:
            hook_failed(backend, "align_clock", exc, disable=False)
            alignment = None
        if alignment is not None:
            base, method, error = alignment.host_ns, alignment.method, alignment.error_ns
        else:
            base, method, error = h0, "first work on the device assumed to start at its launch", None
        # No work may start before its launch: shift the whole device if any would.
        shift = 0
        for i in rows:
            early = t.launch_start[i] - (base + t.start[i])
            if early > shift:
                shift = early
        base += shift
        for i in rows:
            t.start[i] += base
            t.flags[i] |= PLACED
        q = queues[t.queue[rows[0]]]
        clocks[dkey] = DeviceClock(q.backend, q.device, method, error, shift)
    return clocks
