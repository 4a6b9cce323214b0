"""kprof_workqueue: a kprof backend plugin for workqueue, a toy device library."""

import workqueue

from kprof import plugin as kp


# Step 1: name the backend. `kprof backends` shows what this returns.
@kp.hookimpl
def describe_backend(backend: kp.Backend) -> kp.BackendInfo:
    return kp.BackendInfo(
        library="workqueue",
        library_version=workqueue.__version__,
        devices=("workqueue worker",),
    )


# Step 2: device timestamps. kprof.kernel and kprof.range put them on the current queue.
@kp.hookimpl
def current_queue(backend: kp.Backend) -> workqueue.Queue | None:
    return workqueue.current()  # the queue of this thread's innermost `with queue:`


@kp.hookimpl
def record_timestamp(backend: kp.Backend) -> workqueue.Timestamp | None:
    queue = workqueue.current()
    if queue is None:
        return None
    return queue.timestamp(workqueue.Timestamp())  # enqueued: it does not wait


@kp.hookimpl
def timestamp_done(backend: kp.Backend, token: workqueue.Timestamp) -> bool:
    return token.reached.is_set()


@kp.hookimpl
def device_times(
    backend: kp.Backend, start: workqueue.Timestamp, stop: workqueue.Timestamp
) -> tuple[int, int]:
    return start.device_ns, stop.device_ns
