"""Placing CUDA event times on the host clock (``time.perf_counter_ns``).

CUDA events carry device times that can only be compared with each other
(``cudaEventElapsedTime``). To place them on the host timeline, the plugin *calibrates*: it
records an event on an idle private stream and spins on ``cudaEventQuery`` while reading
``perf_counter_ns``. The device stamped the event after the record call began and before the
first query that saw it done returned, so its host time lies in that interval: the estimate is
the interval's middle and the error bound its half width (the best of a few tries is kept).

A token is then placed at ``calibration + elapsed(calibration event, token)``. The plugin
calibrates when it first sees a device while capture is installed and again when a profile
ends, and interpolates between the two, which removes a linear drift between the two clocks.
The error bound adds the calibrations' bounds, the events' resolution (NVIDIA documents about
0.5 µs) and the rounding of ``cudaEventElapsedTime``'s single-precision milliseconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kprof.plugin import Alignment

from .events import Stamp

__all__ = ["METHOD", "Calibration", "align", "calibrate"]

METHOD = "CUDA event calibrated against perf_counter_ns (record, spin on cudaEventQuery)"
#: Resolution of a CUDA event timestamp, per NVIDIA's cudaEventElapsedTime documentation.
EVENT_RESOLUTION_NS = 500

_now = time.perf_counter_ns


@dataclass
class Calibration:
    """A completed event and where it lies on the host clock."""

    stamp: Stamp
    host_ns: int
    error_ns: int


def calibrate(
    stamp_for: Callable[[], Stamp],
    release: Callable[[Stamp], None],
    record: Callable[[int, int], Any],
    query: Callable[[int], int],
    stream_ptr: int,
    error: Callable[[int], BaseException],
    tries: int = 3,
    timeout_s: float = 5.0,
) -> Calibration:
    """Record events on an idle stream and bracket when the device stamped each one.

    ``record(event_ptr, stream_ptr)`` and ``query(event_ptr) -> status`` are CuPy's
    ``runtime.eventRecord``/``eventQuery``; ``stamp_for()`` gives a pooled event of the device
    that owns ``stream_ptr``, and ``release`` takes back the ones not kept.
    """
    best: Calibration | None = None
    for _ in range(tries):
        stamp = stamp_for()
        t0 = _now()
        record(stamp.ptr, stream_ptr)
        deadline = t0 + int(timeout_s * 1e9)
        while True:
            status = query(stamp.ptr)
            t1 = _now()
            if status == 0:
                break
            if status != 600:  # cudaErrorNotReady: anything else is a real error
                release(stamp)
                raise error(status)
            if t1 > deadline:
                release(stamp)
                raise TimeoutError(
                    f"a CUDA event on an idle stream did not complete within {timeout_s:g} s; "
                    f"the device may be hung"
                )
            if t1 - t0 > 1_000_000:  # past 1 ms something holds the device: stop hogging
                time.sleep(0.0005)
        half = (t1 - t0 + 1) // 2
        cal = Calibration(stamp, t0 + half, half)
        if best is None or cal.error_ns < best.error_ns:
            if best is not None:
                release(best.stamp)
            best = cal
        else:
            release(stamp)
    assert best is not None
    return best


def f32_rounding_ns(ns: int) -> int:
    """Worst rounding of a duration read as float32 milliseconds (24-bit significand)."""
    return abs(ns) >> 23


def align(
    token_ns_from: Callable[[Stamp], int], first: Calibration | None, last: Calibration
) -> Alignment:
    """Host time of the token whose elapsed time from a calibration event
    ``token_ns_from(stamp)`` gives, from the calibrations before (``first``) and after
    (``last``) the profile."""
    from_last = token_ns_from(last.stamp)
    if first is None:
        host = last.host_ns + from_last
        err = last.error_ns + 2 * EVENT_RESOLUTION_NS + f32_rounding_ns(from_last)
        return Alignment(host, err, METHOD)
    from_first = token_ns_from(first.stamp)
    span_dev = from_first - from_last  # device time from the first calibration to the last
    span_host = last.host_ns - first.host_ns
    if 0 <= from_first <= span_dev and span_dev > 0:
        # Interpolate: corrects a constant rate difference between the two clocks. This is a
        # weighted mean of the two calibrations, so its error is at most the larger of theirs.
        host = first.host_ns + round(from_first * span_host / span_dev)
    else:
        near, off = (first, from_first) if abs(from_first) <= abs(from_last) else (last, from_last)
        host = near.host_ns + off
    err = (
        max(first.error_ns, last.error_ns)
        + 2 * EVENT_RESOLUTION_NS
        + f32_rounding_ns(from_first)
        + f32_rounding_ns(from_last)
    )
    return Alignment(host, err, METHOD)
