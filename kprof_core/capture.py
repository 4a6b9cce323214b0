"""The API a backend plugin's capture code uses on the launch path.

A patched launch function looks like this (see ``kprof_opencl.capture`` for a real one)::

    from kprof import capture

    def launch(queue, kernel, *args):
        rec = capture.active()
        if rec is None:                      # no profile in this context: call straight through
            return original(queue, kernel, *args)
        t0 = capture.now()
        start = backend.record_timestamp(backend)
        result = original(queue, kernel, *args)
        stop = backend.record_timestamp(backend)
        rec.launch(backend, capture.KERNEL, kernel_name, queue, t0, capture.now(), start, stop)
        return result

``rec.launch`` appends and returns; it never blocks except when a profile has so much pending
work that it must wait for the oldest (which bounds the live device events).
"""

from __future__ import annotations

from .activity import DeviceRecord, deliver
from .activity import stats as activity_stats
from .patching import Patcher
from .recorder import COPY, KERNEL, Recorder, active, now

__all__ = [
           "COPY",
           "KERNEL",
           "DeviceRecord",
           "Patcher",
           "Recorder",
           "active",
           "activity_stats",
           "deliver",
           "now",
]
