"""Placing OpenCL profiling timestamps on the host clock (``time.perf_counter_ns``).

OpenCL timestamps are on a "device time counter" whose relation to host time the spec leaves
open. Three ways to relate them, tried in this order; each is accepted only if the reference
event's QUEUED time, converted, falls inside the host call that enqueued it:

1. PoCL's CPU drivers stamp events with ``CLOCK_MONOTONIC_RAW`` (``pocl_gettimemono_ns``) and
   PoCL 3.x lacks ``clGetDeviceAndHostTimer``: measure the offset of that clock from
   ``perf_counter_ns`` directly.
2. ``clGetDeviceAndHostTimer`` + ``clGetHostTimer`` (OpenCL 2.1+), bracketed by
   ``perf_counter_ns`` reads.
3. Otherwise, the host clocks a runtime commonly uses (``CLOCK_MONOTONIC_RAW``,
   ``CLOCK_MONOTONIC``, ``CLOCK_REALTIME``, as Oclgrind's ``gettimeofday``): the first whose
   offset makes QUEUED fall inside the launch window. Clocks that differ by more than the
   window can't both pass.

The error bound is the half-width of the bracketing reads plus the check's slack (the offset's
change since capture was installed, and the device timer's resolution).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from kprof.plugin import Alignment

from .queues import is_pocl_cpu

# OpenCL constants (Khronos headers).
QUEUED, SUBMIT, START, END = 0x1280, 0x1281, 0x1282, 0x1283
EVENT_COMMAND_QUEUE, EVENT_COMMAND_TYPE = 0x11D0, 0x11D1
COMMAND_MARKER, COMMAND_BARRIER = 0x11FE, 0x1205

#: kprof.range enqueues its first marker just before it reads the host clock, so a marker's
#: QUEUED time may precede its window's start by the cost of enqueueing it (a few µs).
MARKER_ALLOWANCE_NS = 1_000_000
_TRIES = 9
_perf = time.perf_counter_ns


def host_clocks() -> list[tuple[str, int]]:
    """The host clocks an OpenCL runtime may stamp events with, by name (Linux and BSDs)."""
    names = ("CLOCK_MONOTONIC_RAW", "CLOCK_MONOTONIC", "CLOCK_REALTIME")
    return [(n, getattr(time, n)) for n in names if hasattr(time, n)]


def bracket(read: Callable[[], int]) -> tuple[int, int]:
    """``(offset, half_width)``: ``perf_counter_ns() ≈ read() + offset``, from the tightest of
    several ``perf_counter_ns`` / ``read`` / ``perf_counter_ns`` brackets."""
    best_off, best_width = 0, -1
    for _ in range(_TRIES):
        a = _perf()
        r = read()
        b = _perf()
        if best_width < 0 or b - a < best_width:
            best_off, best_width = a + (b - a) // 2 - r, b - a
    return best_off, (best_width + 1) // 2


def raw_offset() -> tuple[int, int] | None:
    """The offset of CLOCK_MONOTONIC_RAW from perf_counter_ns, or None where it is missing."""
    clock = getattr(time, "CLOCK_MONOTONIC_RAW", None)
    if clock is None or not sys.platform.startswith("linux"):
        return None
    return bracket(lambda: time.clock_gettime_ns(clock))


def _fits(queued: int, offset: int, tol: int, window: tuple[int, int], marker: bool) -> bool:
    t = queued + offset
    lo = window[0] - tol - (MARKER_ALLOWANCE_NS if marker else 0)
    return lo <= t <= window[1] + tol


def align(
    token: Any, window: tuple[int, int], raw_at_install: tuple[int, int] | None
) -> Alignment | None:
    """Map ``token`` (a completed ``pyopencl.Event``) to host time, or None if no way checks out."""
    queued = token.get_profiling_info(QUEUED)
    start = token.get_profiling_info(START)
    try:
        marker = token.get_info(EVENT_COMMAND_TYPE) in (COMMAND_MARKER, COMMAND_BARRIER)
    except Exception:
        marker = False
    device = token.get_info(EVENT_COMMAND_QUEUE).device
    try:
        resolution = int(device.profiling_timer_resolution)
    except Exception:
        resolution = 1

    if is_pocl_cpu(device):
        measured = raw_offset()
        if measured is not None:
            offset, hw = measured
            drift = abs(offset - raw_at_install[0]) if raw_at_install is not None else 0
            tol = hw + drift + resolution
            if _fits(queued, offset, tol, window, marker):
                return Alignment(start + offset, tol, "CLOCK_MONOTONIC_RAW (PoCL CPU device)")

    try:
        host_off, hw = bracket(device.host_timer)
        dev_ns, host_ns = device.device_and_host_timer()
    except Exception:  # OpenCL < 2.1, or the runtime does not implement it (PoCL < 6)
        pass
    else:
        offset = host_ns - dev_ns + host_off
        tol = hw + resolution
        if _fits(queued, offset, tol, window, marker):
            return Alignment(start + offset, tol, "clGetDeviceAndHostTimer")

    for name, clock in host_clocks():
        offset, hw = bracket(lambda c=clock: time.clock_gettime_ns(c))  # type: ignore[misc]
        tol = hw + resolution
        if _fits(queued, offset, tol, window, marker):
            return Alignment(
                start + offset,
                tol,
                f"{name} (matched: the event's QUEUED time fell inside its launch)",
            )
    return None
