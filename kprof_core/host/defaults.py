"""kprof's built-in plugin: the hooks' defaults, which report no support.

Registered like any plugin but consulted last: a backend's own implementation always wins.
"""

from __future__ import annotations

import itertools
import weakref
from typing import Any

from kprof_core.host.backend import (
    Alignment,
    Backend,
    BackendInfo,
    QueueInfo,
    TimestampsUnsupported,
)
from kprof_core.host.markers import hookimpl


@hookimpl(trylast=True)
def describe_backend(backend: Backend) -> BackendInfo | None:
    return None


@hookimpl(trylast=True)
def record_timestamp(backend: Backend) -> Any | None:
    return None


@hookimpl(trylast=True)
def elapsed_time(backend: Backend, start: Any, stop: Any) -> int:
    raise TimestampsUnsupported(f"backend {backend.name!r} has no device timestamps")


@hookimpl(trylast=True)
def timestamp_done(backend: Backend, token: Any) -> bool | None:
    return None


@hookimpl(trylast=True)
def device_times(backend: Backend, start: Any, stop: Any) -> tuple[int, int] | None:
    return None


@hookimpl(trylast=True)
def device_times_batch(
    backend: Backend, starts: tuple[Any, ...], stops: tuple[Any, ...]
) -> tuple[Any, Any] | None:
    return None


@hookimpl(trylast=True)
def release_timestamp(backend: Backend, token: Any) -> None:
    return None


@hookimpl(trylast=True)
def current_queue(backend: Backend) -> Any | None:
    return None


@hookimpl(trylast=True)
def queue_info(backend: Backend, queue: Any) -> QueueInfo | None:
    # Number queues in the order kprof first sees them. Weakly held, so that a process that
    # makes queues without end does not grow this; objects that can't be (or can't be hashed)
    # are numbered by id, which stays unique while the profile asking holds the queue.
    numbers = backend.state.setdefault("kprof.queue_numbers", weakref.WeakKeyDictionary())
    by_id = backend.state.setdefault("kprof.queue_numbers_by_id", {})
    counter = backend.state.setdefault("kprof.queue_counter", itertools.count(1))
    try:
        n = numbers.get(queue)
        if n is None:
            n = numbers[queue] = next(counter)
    except TypeError:
        n = by_id.get(id(queue))
        if n is None:
            n = by_id[id(queue)] = next(counter)
    return QueueInfo(device="device", label=f"queue {n}")


@hookimpl(trylast=True)
def synchronize(backend: Backend, queue: Any) -> None:
    return None


@hookimpl(trylast=True)
def install_capture(backend: Backend) -> None:
    return None


@hookimpl(trylast=True)
def remove_capture(backend: Backend) -> None:
    return None


@hookimpl(trylast=True)
def align_clock(backend: Backend, token: Any, launch_window: tuple[int, int]) -> Alignment | None:
    return None


@hookimpl(trylast=True)
def range_push(backend: Backend, name: str) -> None:
    return None


@hookimpl(trylast=True)
def range_pop(backend: Backend) -> None:
    return None


@hookimpl(trylast=True)
def demo_workload(backend: Backend, size: int) -> Any | None:
    return None


# -- activity records (issue 14) ----------------------------------------------------------------


@hookimpl(trylast=True)
def activity_scope_enter(backend: Backend, scope: int) -> bool | None:
    return None


@hookimpl(trylast=True)
def activity_scope_exit(backend: Backend, scope: int) -> None:
    return None


@hookimpl(trylast=True)
def activity_flush(backend: Backend, scopes: tuple[int, ...], timeout: float) -> int | None:
    return None


@hookimpl(trylast=True)
def activity_align(backend: Backend, queue: Any, device_ns: int) -> Alignment | None:
    return None


@hookimpl(trylast=True)
def report_notes(backend: Backend) -> list[str] | None:
    return None


@hookimpl(trylast=True)
def launch_config(backend: Backend, config: Any) -> str | None:
    return None


@hookimpl(trylast=True)
def exec_environment(backend: Backend) -> dict[str, str] | None:
    return None


@hookimpl(trylast=True)
def capture_modules(backend: Backend) -> list[str] | None:
    return None


@hookimpl(trylast=True)
def memory_install(backend: Backend) -> bool | None:
    return None


@hookimpl(trylast=True)
def memory_remove(backend: Backend) -> None:
    return None
