"""kprof backend plugin for workqueue: a complete small plugin (the docs' plugin tutorial shows it).

Device timing: record_timestamp puts a pooled Timestamp on the current queue; device_times
reads the device clock (absolute, so no elapsed_time is needed); align_clock maps that clock
to the host's. Capture: Queue.launch is patched while a profile is active.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import workqueue

from kprof import plugin as kp

_pool: list[workqueue.Timestamp] = []
_pool_lock = threading.Lock()


def _take() -> workqueue.Timestamp:
    with _pool_lock:
        return _pool.pop() if _pool else workqueue.Timestamp()


@kp.hookimpl
def describe_backend(backend: kp.Backend) -> kp.BackendInfo:
    return kp.BackendInfo(
        library="workqueue", library_version=workqueue.__version__, devices=("workqueue worker",)
    )


@kp.hookimpl
def current_queue(backend: kp.Backend) -> Any:
    return workqueue.current()


@kp.hookimpl
def record_timestamp(backend: kp.Backend) -> Any:
    q = workqueue.current()
    return None if q is None else q.timestamp(_take())  # enqueued: it does not wait


@kp.hookimpl
def timestamp_done(backend: kp.Backend, token: workqueue.Timestamp) -> bool:
    return token.reached.is_set()


@kp.hookimpl
def device_times(
    backend: kp.Backend, start: workqueue.Timestamp, stop: workqueue.Timestamp
) -> tuple[int, int]:
    return start.device_ns, stop.device_ns


@kp.hookimpl
def release_timestamp(backend: kp.Backend, token: workqueue.Timestamp) -> None:
    if token.reached.is_set():  # one kprof gave up on is still queued: never hand it out again
        with _pool_lock:
            _pool.append(token)


@kp.hookimpl
def queue_info(backend: kp.Backend, queue: workqueue.Queue) -> kp.QueueInfo:
    return kp.QueueInfo(device="workqueue worker", label=queue.name, device_key="worker")


@kp.hookimpl
def synchronize(backend: kp.Backend, queue: workqueue.Queue | None) -> None:
    q = queue or workqueue.current()
    if q is not None:
        q.finish()


@kp.hookimpl
def align_clock(
    backend: kp.Backend, token: workqueue.Timestamp, launch_window: tuple[int, int]
) -> kp.Alignment:
    # Read the device clock between two host readings: the offset is known to half the gap.
    h0, d, h1 = time.perf_counter_ns(), time.monotonic_ns(), time.perf_counter_ns()
    offset = (h0 + h1) // 2 - d
    return kp.Alignment(
        host_ns=token.device_ns + offset,
        error_ns=(h1 - h0 + 1) // 2,
        method="monotonic_ns read between two perf_counter_ns",
    )


@kp.hookimpl
def install_capture(backend: kp.Backend) -> None:
    original = workqueue.Queue.launch

    def launch(self: workqueue.Queue, fn: Any, *args: Any) -> None:
        rec = kp.active()
        if rec is None:  # not profiling in this context: call straight through
            return original(self, fn, *args)
        t0 = kp.now()
        start = self.timestamp(_take()) if rec.device else None  # on the launch's own queue
        original(self, fn, *args)
        stop = self.timestamp(_take()) if rec.device else None
        name = getattr(fn, "__name__", "kernel")
        rec.launch(backend, kp.KERNEL, name, self, t0, kp.now(), start, stop)

    backend.state["patcher"] = patcher = kp.Patcher()
    patcher.patch(workqueue.Queue, "launch", launch)


@kp.hookimpl
def remove_capture(backend: kp.Backend) -> None:
    patcher = backend.state.pop("patcher", None)
    if patcher is not None:
        patcher.restore()  # the very same function object is back
