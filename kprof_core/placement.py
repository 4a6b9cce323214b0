"""Placement: device times put on the host timeline (``perf_counter_ns``), once per device.

Rows leave the harvest with ``start`` relative to their device's reference token (the first
work seen on that device in the profile). At the end, each device's reference is mapped to the
host clock by the backend's ``align_clock``, or else assumed to start at its launch; then the
whole device is shifted, if needed, so that no work starts before its launch.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from dataclasses import dataclass
from itertools import compress
from operator import add, mul, sub
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
    Column by column: the loops per row are ``map`` over ``array`` columns, in C (a million
    rows in a fraction of a second; a Python loop per row cost 0.36 µs each).
    """
    t = table
    n = len(t)
    if not n:
        return {}
    # Each row's device as a small code: 0 for rows already placed (host-timed, unresolved,
    # merged from a nested profile), else 1 + the device's index in `devices`.
    devices = list(dict.fromkeys(q.device_key for q in queues))
    if len(devices) > 254:  # more than a byte can number: one pass per device, still in C
        return _place_each(t, queues, refs, hook_failed)
    code_of_queue = bytes(devices.index(q.device_key) + 1 for q in queues)
    unplaced = bytes(map(_UNPLACED.__getitem__, map(PLACED.__and__, t.flags)))  # 1: not yet
    codes = bytes(map(mul, map(code_of_queue.__getitem__, t.queue), unplaced))
    early = array("q", map(sub, t.launch_start, t.start))  # launch start - relative start
    clocks: dict[str, DeviceClock] = {}
    offset = [0] * (len(devices) + 1)  # what to add to `start`, per code
    for d, dkey in enumerate(devices, 1):
        rows = codes.count(d)
        if not rows:
            continue
        first = codes.index(d)
        backend, tok, h0, h1 = refs[dkey]
        base, method, error = _base(backend, tok, h0, h1, hook_failed)
        # No work may start before its launch: shift the whole device if any would.
        mine = early if rows == n else compress(early, map(d.__eq__, codes))
        shift = max(0, max(mine) - base)
        offset[d] = base + shift
        q = queues[t.queue[first]]
        clocks[dkey] = DeviceClock(q.backend, q.device, method, error, shift)
    if clocks:
        t.start[:] = array("q", map(add, t.start, map(offset.__getitem__, codes)))
        t.flags[:] = array("q", map(PLACED.__or__, t.flags))
    return clocks


_UNPLACED = bytes(1 if i == 0 else 0 for i in range(PLACED + 1))  # by f & PLACED


def _base(backend: Backend, tok: Any, h0: int, h1: int,
          hook_failed: Callable[..., str]) -> tuple[int, str, int | None]:
    """Where the device's reference token lies on the host clock, how it was found, and the
    error bound."""
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
        return alignment.host_ns, alignment.method, alignment.error_ns
    return h0, "first work on the device assumed to start at its launch", None


def _place_each(t: DeviceTable, queues: Sequence[QueueRecord],
                refs: dict[str, tuple[Backend, Any, int, int]],
                hook_failed: Callable[..., str]) -> dict[str, DeviceClock]:
    """``place`` for tables with more devices than a byte can number: row by row."""
    clocks: dict[str, DeviceClock] = {}
    rows_by_device: dict[str, list[int]] = {}
    for i in range(len(t)):
        if not t.flags[i] & PLACED:
            rows_by_device.setdefault(queues[t.queue[i]].device_key, []).append(i)
    for dkey, rows in rows_by_device.items():
        backend, tok, h0, h1 = refs[dkey]
        base, method, error = _base(backend, tok, h0, h1, hook_failed)
        shift = max(0, max(t.launch_start[i] - (base + t.start[i]) for i in rows))
        base += shift
        for i in rows:
            t.start[i] += base
            t.flags[i] |= PLACED
        q = queues[t.queue[rows[0]]]
        clocks[dkey] = DeviceClock(q.backend, q.device, method, error, shift)
    return clocks
