"""The hooks of backends whose vendor tool hands over completed device work (activity
records): part of the hook reference, ``kprof_core/host/hookspecs.py``, which imports them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kprof_core.host.markers import hookspec

if TYPE_CHECKING:
    from kprof_core.host.backend import Alignment, Backend

# ---------------------------------------------------------------------------------------------
# Activity records: backends whose vendor tool hands over completed device work
# ---------------------------------------------------------------------------------------------
#
# Such a tool (CUPTI's Activity API; rocprofiler-sdk, Level Zero) sees every launch of the
# process and reports it after the device ran it, from its own thread. kprof opens a *scope*
# (an int) for each profile on each thread that runs its code; the backend tags work launched
# there with the innermost open scope and hands the completed records over with
# ``kprof.plugin.deliver(backend, records)`` (``kprof.plugin.DeviceRecord``s, times on the
# device's clock), or many at once, column-wise, with ``kprof.plugin.deliver_columns(backend,
# kprof.plugin.ActivityColumns(...))`` (no Python object per row), from any thread, while the
# profile runs and at ``activity_flush``; records the tracer lost are reported with
# ``kprof.plugin.dropped(backend, n, reason)``. Records of
# an ended profile are dropped and counted (``kprof.plugin.activity_stats()``); records of no
# kprof scope are not kprof's. Switch the tool on in ``install_capture``, off in
# ``remove_capture``. ``kprof_cuda.activity`` is a real one, ``kprof_testbackend.tracer`` a
# simulated one. In a profile where ``activity_scope_enter`` answered True, ranges on the
# backend put no timestamps and ask no ``current_queue``: a range's device row on each queue
# spans the records of the work launched inside it there (``range_push``/``range_pop`` still
# mirror it to the tool).


@hookspec(firstresult=True)
def activity_scope_enter(backend: Backend, scope: int) -> bool | None:
    """The calling thread starts running code of a profile's scope.

    Called on the user's thread, once per profile per thread (also where a
    ``kprof.propagate``-wrapped function starts). Scopes nest on a thread (a profile in a
    profile): the innermost open one owns the work (CUDA: pushed as an external correlation id).

    :param backend: The plugin's :class:`kprof.plugin.Backend`.
    :param scope: The scope, an int.
    :returns: ``True`` when the backend will deliver the records of the work this thread
        launches until the matching ``activity_scope_exit``; ``False`` or ``None`` when it
        cannot (its source is unavailable or taken): kprof then times the backend with
        timestamps. Default: ``None``.
    """


@hookspec(firstresult=True)
def activity_scope_exit(backend: Backend, scope: int) -> None:
    """The calling thread leaves ``scope``; work launched afterwards is not its.

    :param backend: The plugin's :class:`kprof.plugin.Backend`.
    :param scope: The scope of the matching ``activity_scope_enter`` (same thread, stack
        order). Default: nothing is done.
    """


@hookspec(firstresult=True)
def activity_flush(backend: Backend, scopes: tuple[int, ...], timeout: float) -> int | None:
    """A profile is ending: deliver every record of work launched in its scopes now.

    Called on the thread ending the profile, before kprof resolves it. Wait cooperatively
    (sleep between polls) until the device completed that work and its records were delivered;
    launches whose records the tracer dropped (``kprof.plugin.dropped``) are not waited for.

    :param backend: The plugin's :class:`kprof.plugin.Backend`.
    :param scopes: The profile's scopes.
    :param timeout: The most seconds to wait.
    :returns: How many launches of these scopes still had no record (kprof reports them), or
        ``None`` if the backend cannot tell. Default: ``None``.
    """


@hookspec(firstresult=True)
def activity_align(backend: Backend, queue: Any, device_ns: int) -> Alignment | None:
    """Where a time on the clock of a queue's device records lies on the host clock.

    Asked once per device per profile, for the first record's begin; that device's records are
    placed by the same offset.

    :param backend: The plugin's :class:`kprof.plugin.Backend`.
    :param queue: The queue of the record.
    :param device_ns: A time on the device's clock.
    :returns: A :class:`kprof.plugin.Alignment` with ``device_ns`` on ``time.perf_counter_ns``,
        its error bound and method (``"cuptiGetTimestamp sampled against perf_counter_ns"``),
        or ``None`` without a correlation: the first record is placed at the start of its
        scope, and the report says so. Default: ``None``.
    """
