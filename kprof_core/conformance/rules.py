"""The conformance kit's rules, what a failure is, and what the author points the kit at."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kprof_core.host.backend import Backend

RULES = {
    "describe_backend": (
        "never raises",
        "returns a kprof.plugin.BackendInfo or None",
        "is available",
        "claims timestamps only with the hooks for them",
    ),
    "current_queue": ("gives a queue inside queue_context()",),
    "record_timestamp": ("returns a token where there is a current queue", "does not block"),
    "timestamp_done": (
        "returns True, False or None",
        "is not done before the device reached it",
        "becomes True once the device reached the token",
    ),
    "elapsed_time": (
        "returns an int",
        "is non-negative for ordered tokens on one queue",
        "adds up for ordered tokens on one queue",
    ),
    "device_times": (
        "returns a pair of ints",
        "begins before it ends for ordered tokens",
        "is consistent with elapsed_time",
    ),
    "release_timestamp": ("is called exactly once per token",),
    "token pool": (
        "a token is not handed out again while kprof holds it",
        "a token is not handed out again before the device reached it",
    ),
    "queue_info": ("returns a kprof.plugin.QueueInfo", "is stable for one queue"),
    "install_capture": (
        "N workload calls give exactly N times the records of one",
        "records nothing outside the profile's context",
        "records are device-timed",
        "hands each kernel's launch configuration (rec.launch(..., config=...))",
    ),
    "launch_config": (
        "makes every configuration its capture hands text",
        "returns a text that says something",
    ),
    "remove_capture": ("restores the very same objects",),
    "memory_install": (
        "returns True, False or None",
        "an allocation and its free are one event each, on a str device, with the size",
    ),
    "memory_remove": ("restores the very same objects",),
    "any hook": ("kprof never disables the backend",),
    "align_clock": (
        "returns a kprof.plugin.Alignment or None",
        "places the token where the device reached it, within its error bound",
        "needs no shift of the device in a profile beyond its error bound",
    ),
}


class ConformanceError(AssertionError):
    """A plugin broke a rule of the hookspecs' contract: ``hook``, ``rule`` and ``detail``."""

    __module__ = "kprof.testing"  # where authors meet it (pytest prints this name)

    def __init__(self, hook: str, rule: str, detail: str) -> None:
        super().__init__(f"{hook}: {rule}: {detail}")
        self.hook, self.rule, self.detail = hook, rule, detail


class Skipped(Exception):
    """A check that does not apply to this backend (the message says why)."""


def fail(hook: str, rule: str, detail: str) -> ConformanceError:
    assert rule in RULES[hook], f"unknown rule {hook}: {rule}"
    return ConformanceError(hook, rule, detail)


@dataclass
class Subject:
    """What the checks run against.

    ``backend``: the plugin's :class:`kprof.plugin.Backend`. ``make_workload``: returns one step,
    which enqueues the same launches each call without waiting (kprof's capture records them;
    a plugin without capture is timed with ``kprof.kernel`` around the step); called once,
    when a check first needs it, outside any profile. ``queue_context``: a context
    manager factory that makes a queue current on the calling thread (on any thread).
    ``stall``: hold the current queue (work enqueued after it does not run) and return a
    callable that lets it go, callable from any thread; None when the author cannot.
    ``records_per_step``: how many records one step makes, or None to learn it from one step.
    ``own_modules``: modules whose state the plugin may change for good when it installs its
    capture (default: the module defining the plugin; kprof's always); every other module's
    and class's attributes must be the very same objects after ``remove_capture``.
    ``rerecord_supersedes``: recording a token again makes it forget an earlier, pending
    record (CUDA and HIP events), so reusing one the device has not reached is safe.
    ``allocate``: allocates device memory through the vendor library (as the user would) and
    returns ``(nbytes, free)``, ``free`` a callable that frees it; None when the author gives
    none (the memory checks then check only ``memory_install``'s answer and removal).
    """

    backend: Backend
    make_workload: Callable[[], Callable[[], Any]]
    queue_context: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext
    stall: Callable[[], Callable[[], None]] | None = None
    records_per_step: int | None = None
    steps: int = 5
    tolerance_ns: int = 1_000
    blocking_timeout_s: float = 10.0
    done_timeout_s: float = 30.0
    give_up_s: float = 0.2
    require_available: bool = True
    own_modules: tuple[str, ...] = ()
    rerecord_supersedes: bool = False
    allocate: Callable[[], tuple[int, Callable[[], None]]] | None = None


@dataclass
class ClockReport:
    """What the alignment check found: the method and error bound ``align_clock`` gives (or
    None without a correlation), and how the profile placed the device."""

    method: str | None
    error_ns: int | None
    profile_clocks: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        if self.method is None:
            head = "align_clock: no correlation (devices placed by launch time)"
        else:
            head = f"align_clock: {self.method}, error bound {self.error_ns} ns"
        return "; ".join([head, *self.profile_clocks])
