"""``kprof.testing``: the conformance kit a backend plugin's author runs against their plugin.

Subclass :class:`BackendConformance` in a test module of the plugin's, point it at the
backend and a small workload, and pytest runs every check of the hookspecs' contract::

    from kprof.testing import BackendConformance

    class TestMyDevice(BackendConformance):
        backend_name = "mydevice"            # the entry point's name (or set ``plugin`` too)

        def make_workload(self, backend):    # one step: enqueue launches, without waiting
            q = mylib.Queue()
            return lambda: q.launch(my_kernel)

        def queue_context(self):             # make a queue current on the calling thread
            return mylib.using(self.queue)

        def stall(self):                     # optional: hold the current queue; return release
            gate = mylib.UserEvent()
            self.queue.wait_for(gate)
            return gate.set

A failure names the hook and the rule it broke (``kprof.testing.RULES`` lists them),
for example ``ConformanceError: record_timestamp: does not block: ...``. The clock check
records the alignment's method and error bound as the test's ``clock`` property and prints it.
The checks need pytest only here; ``kprof_core.conformance`` runs them without it.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kprof_core.conformance import (
    RULES,
    ClockReport,
    Conformance,
    ConformanceError,
    Skipped,
    Subject,
)
from kprof_core.host.backend import Backend

__all__ = [
    "RULES",
    "BackendConformance",
    "ClockReport",
    "Conformance",
    "ConformanceError",
    "Subject",
]


def _run(check: Callable[[], Any]) -> Any:
    try:
        return check()
    except Skipped as exc:
        pytest.skip(str(exc))


class BackendConformance:
    """Base class of a plugin's conformance tests (pytest collects subclasses named ``Test*``).

    Set ``backend_name``; override ``make_workload`` unless the plugin implements
    ``demo_workload``, ``queue_context`` unless a workload step leaves the calling thread with
    a current queue, and ``stall`` to enable the checks that need the device to be behind.
    ``plugin``: the plugin object, registered as ``backend_name`` for the class's tests when
    it is not installed through an entry point (then it is found there).

    Settings: ``steps`` (workload calls per profile), ``records_per_step`` (records one step
    makes; None: learned from one step), ``tolerance_ns`` (for sums of device times: clock
    resolution), ``blocking_timeout_s`` (how long ``record_timestamp`` may take with the queue
    held before it counts as blocking), ``done_timeout_s`` (how long a token may take to
    complete), ``require_available`` (fail, rather than skip, when the backend is not
    available here), ``own_modules`` and ``rerecord_supersedes`` (see
    :class:`kprof_core.conformance.Subject`).
    """

    backend_name: str = ""
    plugin: object | None = None
    steps: int = 5
    records_per_step: int | None = None
    tolerance_ns: int = 1_000
    blocking_timeout_s: float = 10.0
    done_timeout_s: float = 30.0
    require_available: bool = True
    own_modules: tuple[str, ...] = ()
    rerecord_supersedes: bool = False

    def make_workload(self, backend: Backend) -> Callable[[], Any]:
        """One workload step, set up (buffers, compilation) before it is returned. The
        default is the plugin's ``demo_workload``."""
        step: Callable[[], Any] | None = backend.demo_workload(backend, 1 << 12)
        if step is None:
            raise TypeError(
                f"backend {backend.name!r} has no demo_workload: override "
                f"make_workload() in {type(self).__name__} to give the kit a "
                f"workload step"
            )
        return step

    def queue_context(self) -> contextlib.AbstractContextManager[Any]:
        """A context in which the calling thread has a current queue of the backend (the one
        the workload launches on). The default does nothing."""
        return contextlib.nullcontext()

    def allocate(self) -> tuple[int, Callable[[], None]]:
        """Allocate device memory through the vendor library, as a user would, and return
        ``(nbytes, free)``. Not overridden: the memory check checks only the hooks' answers."""
        raise NotImplementedError

    def stall(self) -> Callable[[], None]:
        """Hold the current queue: work enqueued after this call does not run until the
        returned callable is called (from any thread). Not overridden: those checks skip."""
        raise NotImplementedError

    @pytest.fixture(scope="class")
    @classmethod
    def conformance(cls) -> Iterator[Conformance]:
        """The checks, on the backend and workload this class names; the author's methods run
        on one instance, made here, that keeps their state for the whole class."""
        import kprof

        self = cls()
        if not self.backend_name:
            raise TypeError(f"{type(self).__name__}: set backend_name to the backend to check")
        known = {b.name: b.plugin for b in kprof.backends()}
        # A plugin installed through its entry point is found there: registered only if not.
        registered = self.plugin is not None and known.get(self.backend_name) is not self.plugin
        if registered:
            kprof.register_backend(self.plugin, self.backend_name)
        try:
            backend = kprof.get_backend(self.backend_name)
            stall = None if type(self).stall is BackendConformance.stall else self.stall
            overridden = type(self).allocate is not BackendConformance.allocate
            yield Conformance(
                Subject(
                    backend=backend,
                    make_workload=lambda: self.make_workload(backend),
                    queue_context=self.queue_context,
                    stall=stall,
                    allocate=self.allocate if overridden else None,
                    **{name: getattr(self, name) for name in _SETTINGS},
                )
            )
        finally:
            if registered:
                kprof.unregister_backend(self.backend_name)

    # -- the checks ---------------------------------------------------------------------------

    def test_describe_backend(self, conformance: Conformance) -> None:
        """describe_backend never raises and returns a kprof.plugin.BackendInfo (or None)."""
        _run(conformance.check_describe_backend)
        _run(conformance.require_available)

    def test_queue_info_is_stable(self, conformance: Conformance) -> None:
        """queue_info returns a kprof.plugin.QueueInfo, the same for one queue every time."""
        _run(conformance.check_queue_info)

    def test_timestamps_read_as_ordered_ints(self, conformance: Conformance) -> None:
        """elapsed_time/device_times return ints, non-negative and additive for ordered
        tokens on one queue, and agree with each other where both exist."""
        _run(conformance.check_tokens_read)

    def test_record_timestamp_does_not_block(self, conformance: Conformance) -> None:
        """With the queue held, record_timestamp returns, its token is not done, and it
        completes once the queue goes."""
        _run(conformance.check_record_does_not_block)

    def test_tokens_are_released_exactly_once(self, conformance: Conformance) -> None:
        """Through a profile, every token is released once and never handed out twice."""
        _run(conformance.check_tokens_released_once)

    def test_tokens_are_not_reused_before_the_device_reached_them(
        self, conformance: Conformance
    ) -> None:
        """Tokens kprof gave up on are not handed out again before the device reached them."""
        _run(conformance.check_tokens_not_reused_early)

    def test_n_calls_give_n_records(self, conformance: Conformance) -> None:
        """N workload calls give exactly N times the records of one, device-timed, and a
        thread outside the profile records nothing."""
        _run(conformance.check_records_per_call)

    def test_launch_configs(self, conformance: Conformance) -> None:
        """With ``launch_config`` implemented, kernels carry launch configurations
        (``rec.launch(..., config=...)``), made text without failing."""
        _run(conformance.check_launch_configs)

    def test_remove_capture_restores_the_same_objects(self, conformance: Conformance) -> None:
        """install_capture then remove_capture leaves every module and class attribute the
        very same object."""
        _run(conformance.check_capture_restores)

    def test_memory_events(self, conformance: Conformance) -> None:
        """memory_install answers True, False or None; an allocation and its free (``allocate``)
        are one event each in a profile; memory_remove restores the very same objects."""
        _run(conformance.check_memory)

    def test_clock_alignment(
        self, conformance: Conformance, record_property: Callable[[str, object], None]
    ) -> None:
        """align_clock places a token where the device reached it, within its error bound;
        the method and bound are reported."""
        report = _run(conformance.check_clock_alignment)
        record_property("clock", str(report))
        print(f"kprof conformance, backend {conformance.b.name!r}: {report}")


# The author's settings, forwarded to the checks by name: every field of Subject that the
# class exposes as an attribute (the others are made in ``conformance`` or keep their default).
_SETTINGS = tuple(
    f.name
    for f in dataclasses.fields(Subject)
    if f.name not in ("backend", "make_workload", "queue_context", "stall", "allocate")
    and hasattr(BackendConformance, f.name)
)
