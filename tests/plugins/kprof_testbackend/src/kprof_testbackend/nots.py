"""kprof backend plugin 'testnots': no timestamp hooks at all, so kprof times it on the host."""

from __future__ import annotations

from typing import Any

import kprof
from kprof import capture

from . import device


@kprof.hookimpl
def describe_backend(backend: kprof.Backend) -> kprof.BackendInfo:
    return kprof.BackendInfo(
        library="kprof-testbackend",
        library_version="1.0.0",
        devices=("testdev 0 (no timestamps)",),
        timestamps=False,
    )


@kprof.hookimpl
def current_queue(backend: kprof.Backend) -> Any:
    q = device.current()
    return q if isinstance(q, device.PlainQueue) else None


@kprof.hookimpl
def synchronize(backend: kprof.Backend, queue: Any) -> None:
    q = queue or device.current()
    if q is not None:
        q.finish()


@kprof.hookimpl
def install_capture(backend: kprof.Backend) -> None:
    patcher = backend.state["patcher"] = capture.Patcher()
    original = device.PlainQueue.launch

    def launch(self: device.PlainQueue, name: str, duration_us: float = 0.0) -> None:
        rec = capture.active()
        if rec is None:
            return original(self, name, duration_us)
        t0 = capture.now()
        original(self, name, duration_us)
        rec.launch(backend, capture.KERNEL, name, self, t0, capture.now())

    patcher.patch(device.PlainQueue, "launch", launch)


@kprof.hookimpl
def remove_capture(backend: kprof.Backend) -> None:
    patcher = backend.state.pop("patcher", None)
    if patcher is not None:
        patcher.restore()
