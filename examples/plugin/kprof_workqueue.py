"""kprof backend plugin for workqueue: a complete small plugin (kprof's README shows it).

Device timing: record_timestamp puts a pooled Timestamp on the current queue; device_times
reads the device clock (absolute, so no elapsed_time is needed); align_clock maps that clock
to the host's. Capture: Queue.launch is patched while a profile is active.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import workqueue

import kprof
from kprof import capture

_pool: list[workqueue.Timestamp] = []
_pool_lock = threading.Lock()


def _take() -> workqueue.Timestamp:
    with _pool_lock:
        return _pool.pop() if _pool else workqueue.Timestamp()


@kprof.hookimpl
def describe_backend(backend: kprof.Backend) -> kprof.BackendInfo:
    return kprof.BackendInfo(
        library="workqueue", library_version=workqueue.__version__, devices=("workqueue worker",)
    )


@kprof.hookimpl
def current_queue(backend: kprof.Backend) -> Any:
    return workqueue.current()


@kprof.hookimpl
def record_timestamp(backend: kprof.Backend) -> Any:
    q = workqueue.current()
    return None if q is None else q.timestamp(_take())  # enqueued: it does not wait


@kprof.hookimpl
def timestamp_done(backend: kprof.Backend, token: workqueue.Timestamp) -> bool:
    return token.reached.is_set()


@kprof.hookimpl
def device_times(
    backend: kprof.Backend, start: workqueue.Timestamp, stop: workqueue.Timestamp
) -> tuple[int, int]:
    return start.device_ns, stop.device_ns


@kprof.hookimpl
def release_timestamp(backend: kprof.Backend, token: workqueue.Timestamp) -> None:
    if token.reached.is_set():  # one kprof gave up on is still queued: never hand it out again
        with _pool_lock:
            _pool.append(token)


@kprof.hookimpl
def queue_info(backend: kprof.Backend, queue: workqueue.Queue) -> kprof.QueueInfo:
    return kprof.QueueInfo(device="workqueue worker", label=queue.name, device_key="worker")


@kprof.hookimpl
def synchronize(backend: kprof.Backend, queue: workqueue.Queue | None) -> None:
    q = queue or workqueue.current()
    if q is not None:
        q.finish()


@kprof.hookimpl
def align_clock(
    backend: kprof.Backend, token: workqueue.Timestamp, launch_window: tuple[int, int]
) -> kprof.Alignment:
    # Read the device clock between two host readings: the offset is known to half the gap.
    h0, d, h1 = time.perf_counter_ns(), time.monotonic_ns(), time.perf_counter_ns()
    offset = (h0 + h1) // 2 - d
    return kprof.Alignment(
        host_ns=token.device_ns + offset,
        error_ns=(h1 - h0 + 1) // 2,
        method="monotonic_ns read between two perf_counter_ns",
    )


@kprof.hookimpl
def install_capture(backend: kprof.Backend) -> None:
    original = workqueue.Queue.launch

    def launch(self: workqueue.Queue, fn: Any, *args: Any) -> None:
        rec = capture.active()
        if rec is None:  # not profiling in this context: call straight through
            return original(self, fn, *args)
        t0 = capture.now()
        start = self.timestamp(_take()) if rec.device else None  # on the launch's own queue
        original(self, fn, *args)
        stop = self.timestamp(_take()) if rec.device else None
        name = getattr(fn, "__name__", "kernel")
        rec.launch(backend, capture.KERNEL, name, self, t0, capture.now(), start, stop)

    backend.state["patcher"] = patcher = capture.Patcher()
    patcher.patch(workqueue.Queue, "launch", launch)


@kprof.hookimpl
def remove_capture(backend: kprof.Backend) -> None:
    patcher = backend.state.pop("patcher", None)
    if patcher is not None:
        patcher.restore()  # the very same function object is back
