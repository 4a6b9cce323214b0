"""CUPTI's clock put on kprof's (``perf_counter_ns``), and CUPTI's ids of CUDA handles.

The compiled reader registers a timestamp callback (``CLOCK_MONOTONIC``, perf_counter_ns's
clock): records are then on the host clock as they are. Otherwise ``cuptiGetTimestamp`` is
sampled against perf_counter_ns and the narrowest bracket kept.
"""

from __future__ import annotations

import ctypes
import time
from typing import Any

from kprof import plugin as kp

from .cupti_lib import Cupti

#: Clock samples per calibration (the narrowest bracket is kept).
CLOCK_SAMPLES = 7


def on_host_clock(reader: Any) -> bool:
    """Whether ``reader``'s records carry perf_counter_ns's clock (kprof's timestamp callback)."""
    return reader is not None and bool(reader.compiled) and bool(reader.timestamp_callback)


def clock_name(reader: Any) -> str:
    if on_host_clock(reader):
        return "CLOCK_MONOTONIC (kprof's timestamp callback)"
    return "CUPTI's default (CLOCK_REALTIME on Linux)"


class Clock:
    """One CUPTI client's clock offset: calibrated when the kinds are enabled and again at each
    alignment while they are; the last one kept for alignments after."""

    def __init__(self) -> None:
        self.offset: tuple[int, int] | None = None

    def calibrate(self, c: Cupti) -> tuple[int, int]:
        """CUPTI's clock against perf_counter_ns: (offset, error), the narrowest of a few
        brackets."""
        best: tuple[int, int, int] | None = None
        for _ in range(CLOCK_SAMPLES):
            t0 = time.perf_counter_ns()
            ts = c.timestamp()
            t1 = time.perf_counter_ns()
            if best is None or t1 - t0 < best[0]:
                best = (t1 - t0, (t0 + t1) // 2 - ts, ts)
        assert best is not None
        self.offset = (best[1], (best[0] + 1) // 2)
        return self.offset

    def align(self, reader: Any, device_ns: int, active: Cupti | None) -> kp.Alignment:
        """``device_ns`` on the host clock; ``active``: the CUPTI to calibrate against now
        (None when the kinds are off: the last offset is used)."""
        if on_host_clock(reader):
            return kp.Alignment(
                device_ns,
                0,
                "CUPTI timestamps from kprof's timestamp callback "
                "(cuptiActivityRegisterTimestampCallback): CLOCK_MONOTONIC, perf_counter_ns's "
                "clock, no drift and no wall-clock steps",
            )
        offset, error = self.calibrate(active) if active is not None else (self.offset or (0, 0))
        why = (
            "the pure-Python reader registers no timestamp callback (it would run Python "
            "for every timestamp)"
            if reader is None or not reader.compiled
            else "this CUPTI has no cuptiActivityRegisterTimestampCallback"
        )
        # The readers hand CUPTI's default clock less their base (see cupti_join.rebase).
        base = int(getattr(reader, "time_base", 0) or 0)
        return kp.Alignment(
            device_ns + base + offset,
            error,
            f"cuptiGetTimestamp sampled against perf_counter_ns "
            f"(narrowest of {CLOCK_SAMPLES} brackets; {why})",
        )


def stream_id(c: Cupti, context: int, stream_ptr: int, per_thread: bool) -> int | None:
    """CUPTI's id of a stream handle (to put records on the queue events use)."""
    if c.GetStreamIdEx is None:
        return None
    sid = ctypes.c_uint32(0)
    if c.GetStreamIdEx(context or None, stream_ptr or None, int(per_thread), ctypes.byref(sid)):
        return None
    return sid.value


def context_id(c: Cupti, context: int) -> int | None:
    """CUPTI's id of a context handle (records carry it; streams of two contexts may share
    a stream id)."""
    if c.GetContextId is None:
        return None
    cid = ctypes.c_uint32(0)
    if c.GetContextId(context or None, ctypes.byref(cid)):
        return None
    return cid.value
