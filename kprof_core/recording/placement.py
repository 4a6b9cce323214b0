"""Placement: device times put on the host timeline (``perf_counter_ns``), once per device.

Rows leave the harvest with ``start`` relative to their device's reference token (the first
work seen on that device in the profile). At the end, each device's reference is mapped to the
host clock by the backend's ``align_clock``, or else assumed to start at its launch; then the
whole device is shifted, if needed, so that no work starts before its launch.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from itertools import compress, repeat
from operator import add, and_, eq, getitem, mul, not_, or_, sub
from typing import TYPE_CHECKING, Any

from kprof_core import _clock
from kprof_core.data.records import PLACED, DeviceClock, DeviceTable, QueueRecord
from kprof_core.data.values import is_time
from kprof_core.host.backend import Alignment, Backend, BadReturn
from kprof_core.low_level import native

if TYPE_CHECKING:
    from collections.abc import Sequence


def place(
    table: DeviceTable,
    queues: Sequence[QueueRecord],
    refs: dict[str, tuple[Backend, Any, int, int]],
    hook_failed: Callable[..., str],
    deadline: float | None = None,
) -> dict[str, DeviceClock]:
    """Place every unplaced row of ``table`` on the host clock; returns each device's clock.

    ``refs`` maps a device key to (backend, reference token, its launch's host start and end).
    Column by column: the loops per row are ``map`` over ``array`` columns (builtins, so the
    loop runs in C), or the compiled recorder's helpers where built; a Python loop per row
    cost 0.36 µs each, these 0.2 µs (pure) and 0.02 µs (compiled) per row.
    """
    t = table
    n = len(t)
    if not n:
        return {}
    devices = [*{q.device_key: None for q in queues}]  # not fromkeys: see sites.Skipper
    if len(devices) > 254:  # more than a byte can number
        return _place_each(t, queues, refs, hook_failed, deadline)
    # Each row's device as a code: 0 for rows already placed (host-timed, unresolved, merged
    # from a nested profile), else 1 + the device's index in `devices`. The common case (one
    # device, nothing placed yet) needs no codes at all.
    # (flags.count(0) == n: every row unplaced and unflagged, in C; else look at each.)
    if len(devices) == 1 and (t.flags.count(0) == n or not any(map(and_, t.flags, repeat(PLACED)))):
        codes = None
        present = [1]
    else:
        code_of_queue = bytes(devices.index(q.device_key) + 1 for q in queues)
        unplaced = map(not_, map(and_, t.flags, repeat(PLACED)))
        codes = bytes(map(mul, map(getitem, repeat(code_of_queue), t.queue), unplaced))
        present = [d for d in range(1, len(devices) + 1) if d in codes]
    mod = native.compiled()  # the same arithmetic in C, where built
    if mod is not None:
        ls_b, st_b = t.launch_start.tobytes(), t.start.tobytes()
    clocks: dict[str, DeviceClock] = {}
    offset = [0] * (len(devices) + 1)  # what to add to `start`, per code
    for d in present:
        dkey = devices[d - 1]
        first = 0 if codes is None else codes.index(d)
        backend, tok, h0, h1 = refs[dkey]
        base, method, error = _base(backend, tok, h0, h1, hook_failed, deadline)
        # No work may start before its launch: shift the whole device if any would.
        if mod is not None:
            latest = mod.max_diff(ls_b, st_b, codes, d)
        else:
            early = map(sub, t.launch_start, t.start)
            latest = max(early if codes is None else compress(early, map(eq, codes, repeat(d))))
        shift = max(0, latest - base)
        offset[d] = base + shift
        q = queues[t.queue[first]]
        clocks[dkey] = DeviceClock(q.backend, q.device, method, error, shift)
    if mod is not None:
        if clocks:
            t.start[:] = array("q", mod.add_codes(st_b, codes, tuple(offset)))
        t.flags[:] = array("q", mod.or_const(t.flags.tobytes(), PLACED))
    else:
        if codes is None:
            t.start[:] = array("q", map(add, t.start, repeat(offset[1], n)))
        elif clocks:
            t.start[:] = array("q", map(add, t.start, map(getitem, repeat(offset), codes)))
        t.flags[:] = array("q", map(or_, t.flags, repeat(PLACED, n)))
    return clocks


def checked_alignment(hook: str, a: Any) -> None:
    """Raise ``BadReturn`` unless ``a`` is None or an ``Alignment`` kprof can keep: an int
    ``host_ns`` within ±2**59 ns, an int ``error_ns`` not negative (or None: unknown), a str
    ``method``. Anything else would place a whole device at a wrong time or make a profile
    that cannot be saved (an overflowing sum, a file the loader refuses)."""
    if a is None:
        return
    if not isinstance(a, Alignment):
        raise BadReturn(f"{hook} returned {type(a).__name__}, expected kprof.plugin.Alignment")
    err = a.error_ns
    if not is_time(a.host_ns):
        raise BadReturn(f"{hook} returned host_ns={a.host_ns!r:.40}, not int ns within ±2**59")
    if err is not None and not (is_time(err) and err >= 0):
        raise BadReturn(f"{hook} returned error_ns={err!r:.40}, not an int ≥ 0 (or None)")
    if type(a.method) is not str:
        raise BadReturn(f"{hook} returned method={a.method!r:.40}, not a str")


def _base(
    backend: Backend,
    tok: Any,
    h0: int,
    h1: int,
    hook_failed: Callable[..., str],
    deadline: float | None = None,
) -> tuple[int, str, int | None]:
    """Where the device's reference token lies on the host clock, how it was found, and the
    error bound."""
    alignment: Alignment | None = None
    try:
        if deadline is not None and _clock.monotonic() >= deadline:
            # Every hook call at the end is made within the profile's timeout.
            return (
                h0,
                "first work on the device assumed to start at its launch (align_clock "
                "not asked: the resolve timeout had passed)",
                None,
            )
        alignment = backend.align_clock(backend, tok, (h0, h1))
        checked_alignment("align_clock", alignment)
    except Exception as exc:
        hook_failed(backend, "align_clock", exc, disable=False)
        alignment = None
    if alignment is not None:
        return alignment.host_ns, alignment.method, alignment.error_ns
    return h0, "first work on the device assumed to start at its launch", None


def _place_each(
    t: DeviceTable,
    queues: Sequence[QueueRecord],
    refs: dict[str, tuple[Backend, Any, int, int]],
    hook_failed: Callable[..., str],
    deadline: float | None = None,
) -> dict[str, DeviceClock]:
    """``place`` for tables with more devices than a byte can number: row by row."""
    clocks: dict[str, DeviceClock] = {}
    rows_by_device: dict[str, list[int]] = {}
    for i in range(len(t)):
        if not t.flags[i] & PLACED:
            rows_by_device.setdefault(queues[t.queue[i]].device_key, []).append(i)
    for dkey, rows in rows_by_device.items():
        backend, tok, h0, h1 = refs[dkey]
        base, method, error = _base(backend, tok, h0, h1, hook_failed, deadline)
        shift = max(0, max(t.launch_start[i] - (base + t.start[i]) for i in rows))
        base += shift
        for i in rows:
            t.start[i] += base
            t.flags[i] |= PLACED
        q = queues[t.queue[rows[0]]]
        clocks[dkey] = DeviceClock(q.backend, q.device, method, error, shift)
    return clocks
