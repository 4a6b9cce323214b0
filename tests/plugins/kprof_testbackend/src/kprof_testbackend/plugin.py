"""kprof backend plugin 'testdev': device timestamps from pooled markers, automatic capture."""

from __future__ import annotations

from typing import Any

from kprof import plugin as kp

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


@kp.hookimpl
def describe_backend(backend: kp.Backend) -> kp.BackendInfo:
    return kp.BackendInfo(
        library="kprof-testbackend", library_version="1.0.0", devices=("testdev 0",)
    )


@kp.hookimpl
def record_timestamp(backend: kp.Backend) -> Any:
    q = device.current()
    if q is None:
        return None
    return q.record(_take())


@kp.hookimpl
def timestamp_done(backend: kp.Backend, token: device.Marker) -> bool:
    return token.done


@kp.hookimpl
def elapsed_time(backend: kp.Backend, start: device.Marker, stop: device.Marker) -> int:
    if not stop.done:
        stop.wait()
    return stop.time_ns - start.time_ns


@kp.hookimpl
def release_timestamp(backend: kp.Backend, token: device.Marker) -> None:
    live.discard(id(token))
    # A token kprof gave up on (a timeout) is still queued: the device will stamp it later, so
    # it must not be handed out again. Real pools do the same with pending events.
    if token.done:
        token.reset()
        pool.append(token)


@kp.hookimpl
def current_queue(backend: kp.Backend) -> Any:
    q = device.current()
    return q if type(q) is device.Queue else None


@kp.hookimpl
def queue_info(backend: kp.Backend, queue: device.Queue) -> kp.QueueInfo:
    return kp.QueueInfo(device="testdev 0", label=f"queue {queue.index}")


@kp.hookimpl
def synchronize(backend: kp.Backend, queue: device.Queue | None) -> None:
    q = queue or device.current()
    if q is not None:
        q.finish()


@kp.hookimpl
def align_clock(
    backend: kp.Backend, token: device.Marker, launch_window: tuple[int, int]
) -> kp.Alignment:
    # Markers are stamped with the host's own perf_counter_ns: the mapping is exact.
    return kp.Alignment(host_ns=token.time_ns, error_ns=0, method="host clock (test device)")


@kp.hookimpl
def launch_config(backend: kp.Backend, config: Any) -> str:
    """``(grid, block)`` as reports show it: ``"grid 4x1x1 block 256x1x1"``."""
    grid, block = config
    text = "grid " + "x".join(map(str, grid))
    return text if block is None else f"{text} block {'x'.join(map(str, block))}"


@kp.hookimpl
def install_capture(backend: kp.Backend) -> None:
    patcher = backend.state["patcher"] = kp.Patcher()
    original = device.Queue.launch

    def launch(
        self: device.Queue,
        name: str,
        duration_us: float = 0.0,
        grid: tuple[int, ...] | None = None,
        block: tuple[int, ...] | None = None,
    ) -> None:
        rec = kp.active()
        if rec is None:
            return original(self, name, duration_us, grid, block)
        t0 = kp.now()
        start = self.record(_take()) if rec.device else None
        try:
            original(self, name, duration_us, grid, block)
        except BaseException:
            if start is not None:  # the launch failed: nothing will report this token
                release_timestamp(backend, start)
            raise
        stop = self.record(_take()) if rec.device else None
        # The launch configuration as the call has it (made text once, by launch_config).
        config = None if grid is None else (grid, block)
        rec.launch(backend, kp.KERNEL, name, self, t0, kp.now(), start, stop, -1, config)

    patcher.patch(device.Queue, "launch", launch)


@kp.hookimpl
def remove_capture(backend: kp.Backend) -> None:
    patcher = backend.state.pop("patcher", None)
    if patcher is not None:
        patcher.restore()


@kp.hookimpl
def memory_install(backend: kp.Backend) -> bool:
    patcher = backend.state["memory_patcher"] = kp.Patcher()
    original_alloc, original_free = device.alloc, device.Allocation.free

    def alloc(nbytes: int, address: int | None = None) -> device.Allocation:
        a = original_alloc(nbytes, address)
        kp.allocated(backend, "testdev 0", a.address, a.nbytes)
        return a

    def free(self: device.Allocation) -> None:
        original_free(self)
        kp.freed(backend, "testdev 0", self.address)

    patcher.patch(device, "alloc", alloc)
    patcher.patch(device.Allocation, "free", free)
    return True


@kp.hookimpl
def memory_remove(backend: kp.Backend) -> None:
    patcher = backend.state.pop("memory_patcher", None)
    if patcher is not None:
        patcher.restore()


@kp.hookimpl
def demo_workload(backend: kp.Backend, size: int) -> Any:
    q = device.Queue("demo")

    def step() -> None:
        with q:
            q.launch("mul2", 100)
            q.launch("add", 150)

    return step
