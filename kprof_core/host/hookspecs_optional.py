"""The optional hooks: mirroring ranges into the vendor's tools, the demo, the environment
``kprof run`` starts a program with, and notes for the report. Part of the hook reference,
``kprof_core/host/hookspecs.py``, which imports them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kprof_core.host.markers import hookspec

if TYPE_CHECKING:
    from kprof_core.host.backend import Backend


# -- Mirroring ranges into the vendor's tools (optional) ---------------------------------------


@hookspec(firstresult=True)
def range_push(backend: Backend, name: str) -> None:
    """A ``kprof.range`` (or ``kprof.kernel`` call) begins on the calling thread: mirror it.

    For plugins that mirror ranges into the vendor's tools (NVTX for Nsight, rocTX for
    rocprof). Called on the user's thread, in a profile, on backends where the thread has a
    current queue, just before the range's start timestamp; matched by one ``range_pop`` on the
    same thread, in stack order. Keep it short. Called only where implemented.

    :param backend: The plugin's :class:`kprof.plugin.Backend`.
    :param name: The range's name.
    """


@hookspec(firstresult=True)
def range_pop(backend: Backend) -> None:
    """The range of the matching ``range_push`` ends (after its stop timestamp).

    :param backend: The plugin's :class:`kprof.plugin.Backend`.
    """


# -- The demo ----------------------------------------------------------------------------------


@hookspec(firstresult=True)
def demo_workload(backend: Backend, size: int) -> Any | None:
    """One step of ``kprof demo``'s reference workload, set up and ready to run.

    One step enqueues, without waiting, ``mul2`` (``x *= 2``) then ``add`` (``z = x + y``), launched so
    that the plugin's capture (or ``kprof.kernel``) records them. Set up buffers and compile
    before returning, so that a step measures launches only. ``kprof demo`` uses the first
    available backend that returns one; ``kprof.testing.BackendConformance`` its default
    workload.

    :param backend: The plugin's :class:`kprof.plugin.Backend`.
    :param size: The number of float32 elements.
    :returns: A callable taking no arguments, or ``None``. Default: ``None``.
    """


# -- The program's environment and the report ---------------------------------------------------


@hookspec(firstresult=True)
def exec_environment(backend: Backend) -> dict[str, str] | None:
    """Environment variables the profiled program must be started with, which cannot be set
    once it runs.

    For example ``LD_PRELOAD`` of an interposer the backend needs where it cannot hook the
    vendor library at run time. ``kprof run`` asks every usable backend before it runs the
    script and, where one asks for a value the environment lacks, starts itself again once
    with it (same interpreter, flags and arguments; ``KPROF_RUN_RESTARTED=1`` marks the
    restarted process). ``kprof.profile()`` in a running program cannot: the backend then says what it
    could not see (``report_notes``).

    :param backend: The plugin's :class:`kprof.plugin.Backend`.
    :returns: Variable names and values, or ``None`` (nothing needed). Default: ``None``.
    """


@hookspec(firstresult=True)
def report_notes(backend: Backend) -> list[str] | None:
    """Lines the report of a profile that is ending should carry: what the backend knows it may
    have missed, and how to fix it (e.g. OpenCL work launched from C where kprof has no hook).

    Called once per profile that used the backend, on the thread that ends it, before
    ``remove_capture``. The lines go to ``Profile.meta["notes"]`` and are printed under the
    summary, marked ``!``.

    :param backend: The plugin's :class:`kprof.plugin.Backend`.
    :returns: The lines, or ``None`` (nothing to say). Default: ``None``.
    """
