"""kprof's built-in plugin: the hooks' defaults, which report no support.

Registered like any plugin but consulted last: a backend's own implementation always wins.
Two defaults do something: ``elapsed_time`` says the backend has no device timestamps, and
``queue_info`` numbers queues. Every other hook's default answers ``None`` (no answer, or
nothing to do); those are made from the hookspecs, the one place the hook list is written.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable
from typing import Any

from kprof_core.host.backend import ANY_ARGUMENTS, Backend, QueueInfo, TimestampsUnsupported
from kprof_core.host.hookspecs import RESOLVED_HOOKS
from kprof_core.host.markers import hookimpl


@hookimpl(trylast=True)
def elapsed_time(backend: Backend, start: Any, stop: Any) -> int:
    raise TimestampsUnsupported(f"backend {backend.name!r} has no device timestamps")


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


def _answer_none(name: str) -> Callable[..., None]:
    # pluggy passes it none of the spec's arguments (it names none); kprof's direct calls pass
    # them all, which it takes as they are (ANY_ARGUMENTS: no adapter on the call).
    def default(*_args: Any) -> None:
        return None

    default.__name__ = default.__qualname__ = name
    setattr(default, ANY_ARGUMENTS, True)
    return hookimpl(trylast=True)(default)


for _name in RESOLVED_HOOKS:
    if _name not in globals():
        globals()[_name] = _answer_none(_name)
del _name
