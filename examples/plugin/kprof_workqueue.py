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


# Step 3: names for the report, and the device clock placed on the host's.
@kp.hookimpl
def queue_info(backend: kp.Backend, queue: workqueue.Queue) -> kp.QueueInfo:
    return kp.QueueInfo(device="workqueue worker", label=queue.name, device_key="worker")


@kp.hookimpl
def align_clock(
    backend: kp.Backend, token: workqueue.Timestamp, launch_window: tuple[int, int]
) -> kp.Alignment:
    # Read the device clock between two host readings: the offset is known to half the gap.
    h0, d, h1 = kp.now(), workqueue.device_clock(), kp.now()
    offset = (h0 + h1) // 2 - d
    return kp.Alignment(
        host_ns=token.device_ns + offset,
        error_ns=(h1 - h0 + 1) // 2,
        method="device_clock read between two host readings",
    )


# Step 4: capture. While a profile runs, the library's launches and copies are recorded.
def _record(backend, kind, name, nbytes, original, queue, *args):
    """Call the library's own function; inside a profile, also time it and report it."""
    rec = kp.active()
    if rec is None:  # no profile in this context: call straight through
        return original(queue, *args)
    t0 = kp.now()
    start = queue.timestamp(workqueue.Timestamp()) if rec.device else None
    result = original(queue, *args)  # the work is enqueued, not done
    stop = queue.timestamp(workqueue.Timestamp()) if rec.device else None
    rec.launch(backend, kind, name, queue, t0, kp.now(), start, stop, nbytes)
    return result


@kp.hookimpl
def install_capture(backend: kp.Backend) -> None:
    Queue = workqueue.Queue
    launch, write, read = Queue.launch, Queue.write, Queue.read  # the library's own

    def launch_recorded(queue: workqueue.Queue, fn: object, *args: object) -> None:
        name = getattr(fn, "__name__", "kernel")
        _record(backend, kp.KERNEL, name, -1, launch, queue, fn, *args)

    def write_recorded(queue: workqueue.Queue, buffer: workqueue.Buffer, data: bytes) -> None:
        copy = kp.RowNames.HOST_TO_DEVICE
        _record(backend, kp.COPY, copy, len(data), write, queue, buffer, data)

    def read_recorded(queue: workqueue.Queue, buffer: workqueue.Buffer, out: bytearray) -> None:
        copy = kp.RowNames.DEVICE_TO_HOST
        _record(backend, kp.COPY, copy, buffer.nbytes, read, queue, buffer, out)

    patcher = kp.Patcher()
    patcher.patch(Queue, "launch", launch_recorded)
    patcher.patch(Queue, "write", write_recorded)
    patcher.patch(Queue, "read", read_recorded)
    backend.state["patcher"] = patcher  # backend.state: a dict for the plugin's own data


@kp.hookimpl
def remove_capture(backend: kp.Backend) -> None:
    patcher = backend.state.pop("patcher", None)
    if patcher is not None:
        patcher.restore()  # the library's very same functions are back


@kp.hookimpl
def synchronize(backend: kp.Backend, queue: workqueue.Queue | None) -> None:
    queue = queue or workqueue.current()
    if queue is not None:
        queue.finish()  # kprof times a launch without tokens on the host, after this
