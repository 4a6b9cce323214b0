"""kprof backend plugin 'testnots': no timestamp hooks at all, so kprof times it on the host."""

from __future__ import annotations

from typing import Any

from kprof import plugin as kp

from . import device


@kp.hookimpl
def describe_backend(backend: kp.Backend) -> kp.BackendInfo:
    return kp.BackendInfo(
        library="kprof-testbackend",
        library_version="1.0.0",
        devices=("testdev 0 (no timestamps)",),
        timestamps=False,
    )


@kp.hookimpl
def current_queue(backend: kp.Backend) -> Any:
    q = device.current()
    return q if isinstance(q, device.PlainQueue) else None


@kp.hookimpl
def synchronize(backend: kp.Backend, queue: Any) -> None:
    q = queue or device.current()
    if q is not None:
        q.finish()


@kp.hookimpl
def install_capture(backend: kp.Backend) -> None:
    patcher = backend.state["patcher"] = kp.Patcher()
    original = device.PlainQueue.launch

    def launch(self: device.PlainQueue, name: str, duration_us: float = 0.0) -> None:
        rec = kp.active()
        if rec is None:
            return original(self, name, duration_us)
        t0 = kp.now()
        original(self, name, duration_us)
        rec.launch(backend, kp.KERNEL, name, self, t0, kp.now())

    patcher.patch(device.PlainQueue, "launch", launch)


@kp.hookimpl
def remove_capture(backend: kp.Backend) -> None:
    patcher = backend.state.pop("patcher", None)
    if patcher is not None:
        patcher.restore()
