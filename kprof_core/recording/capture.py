"""The API a backend plugin's capture code uses on the launch path.

A patched launch function looks like this (see ``kprof_opencl.capture`` for a real one, and
the ``install_capture`` hookspec for the contract)::

    from kprof import capture

    def launch(queue, kernel, *args):
        rec = capture.active()
        if rec is None:                      # no profile in this context: call straight through
            return original(queue, kernel, *args)
        t0 = capture.now()
        # On the launch's own queue, with the plugin's own code: the record_timestamp hook
        # takes no queue (it is for kprof.range, on the thread's current queue).
        start = record_on(queue) if rec.device else None
        result = original(queue, kernel, *args)
        stop = record_on(queue) if rec.device else None
        rec.launch(backend, capture.KERNEL, kernel_name, queue, t0, capture.now(), start, stop)
        return result

``KERNEL`` and ``COPY`` are the kinds ``rec.launch`` takes; ``now`` is the host clock
(``time.perf_counter_ns``); ``active()`` the calling context's recorder, or None outside a
profile; ``Patcher`` replaces library attributes and restores the very same objects.
``rec.launch`` appends and returns; it never blocks except when a profile has so much pending
work that it must wait for the oldest (which bounds the live device events).
"""

from __future__ import annotations

from kprof_core.host.patching import Patcher
from kprof_core.recording.activity import (
    ActivityColumns,
    DeviceRecord,
    deliver,
    deliver_columns,
    dropped,
)
from kprof_core.recording.activity import stats as activity_stats
from kprof_core.recording.recorder import COPY, KERNEL, Recorder, active, now

__all__ = [
    "COPY",
    "KERNEL",
    "ActivityColumns",
    "DeviceRecord",
    "Patcher",
    "Recorder",
    "active",
    "activity_stats",
    "deliver",
    "deliver_columns",
    "dropped",
    "now",
]
