"""kprof backend plugin 'testdev': device timestamps from pooled markers, automatic capture."""

from __future__ import annotations

from typing import Any

import kprof
from kprof import capture

from . import device

pool: list[device.Marker] = []
live: set[int] = set()  # ids of markers handed to kprof and not yet released


def _take() -> device.Marker:
    try:  # not "pool.pop() if pool": another thread may take the last one in between
        m = pool.pop()
    except IndexError:
        m = device.Marker()
    live.add(id(m))
    return m


@kprof.hookimpl
def describe_backend(backend: kprof.Backend) -> kprof.BackendInfo:
    return kprof.BackendInfo(
        library="kprof-testbackend", library_version="1.0.0", devices=("testdev 0",)
    )


@kprof.hookimpl
def record_timestamp(backend: kprof.Backend) -> Any:
    q = device.current()
    if q is None:
        return None
    return q.record(_take())


@kprof.hookimpl
def timestamp_done(backend: kprof.Backend, token: device.Marker) -> bool:
    return token.done


@kprof.hookimpl
def elapsed_time(backend: kprof.Backend, start: device.Marker, stop: device.Marker) -> int:
    if not stop.done:
        stop.wait()
    return stop.time_ns - start.time_ns


@kprof.hookimpl
def release_timestamp(backend: kprof.Backend, token: device.Marker) -> None:
    live.discard(id(token))
    # A token kprof gave up on (a timeout) is still queued: the device will stamp it later, so
    # it must not be handed out again. Real pools do the same with pending events.
    if token.done:
        token.reset()
        pool.append(token)


@kprof.hookimpl
def current_queue(backend: kprof.Backend) -> Any:
    q = device.current()
    return q if type(q) is device.Queue else None


@kprof.hookimpl
def queue_info(backend: kprof.Backend, queue: device.Queue) -> kprof.QueueInfo:
    return kprof.QueueInfo(device="testdev 0", label=f"queue {queue.index}")


@kprof.hookimpl
def synchronize(backend: kprof.Backend, queue: device.Queue | None) -> None:
    q = queue or device.current()
    if q is not None:
        q.finish()


@kprof.hookimpl
def align_clock(
    backend: kprof.Backend, token: device.Marker, launch_window: tuple[int, int]
) -> kprof.Alignment:
    # Markers are stamped with the host's own perf_counter_ns: the mapping is exact.
    return kprof.Alignment(host_ns=token.time_ns, error_ns=0, method="host clock (test device)")


@kprof.hookimpl
def install_capture(backend: kprof.Backend) -> None:
    patcher = backend.state["patcher"] = capture.Patcher()
    original = device.Queue.launch

    def launch(self: device.Queue, name: str, duration_us: float = 0.0) -> None:
        rec = capture.active()
        if rec is None:
            return original(self, name, duration_us)
        t0 = capture.now()
        start = self.record(_take()) if rec.device else None
        try:
            original(self, name, duration_us)
        except BaseException:
            if start is not None:  # the launch failed: nothing will report this token
                release_timestamp(backend, start)
            raise
        stop = self.record(_take()) if rec.device else None
        rec.launch(backend, capture.KERNEL, name, self, t0, capture.now(), start, stop)

    patcher.patch(device.Queue, "launch", launch)


@kprof.hookimpl
def remove_capture(backend: kprof.Backend) -> None:
    patcher = backend.state.pop("patcher", None)
    if patcher is not None:
        patcher.restore()


@kprof.hookimpl
def demo_workload(backend: kprof.Backend, size: int) -> Any:
    q = device.Queue("demo")

    def step() -> None:
        with q:
            q.launch("mul2", 100)
            q.launch("add", 150)

    return step
