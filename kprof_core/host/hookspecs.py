"""The hooks a kprof backend plugin implements. Each hook's docstring is its reference.

A plugin is a module or an object with functions decorated ``@kprof.plugin.hookimpl``,
registered under the entry-point group ``kprof.backends`` (the entry point's name is the
backend's), or with ``kprof.register_backend(plugin, name)``. It implements only the hooks it
can: a missing one falls back to a default (``kprof_core/host/defaults.py``) that reports no
support, and an implementation may take a subset of the spec's arguments, by name.
``examples/plugin/kprof_workqueue.py`` is a complete small plugin;
``kprof.testing.BackendConformance`` checks one against these rules.

How kprof calls them. Resolved once per backend into attributes of its
:class:`kprof.plugin.Backend`, called directly (``backend.elapsed_time(backend, start, stop)``):
a plain call (~0.1 µs) rather than a pluggy dispatch (~3.5 µs), so hook wrappers and
``tryfirst``/``trylast`` have no effect, and a plugin never sees another backend's calls.

Threads. ``record_timestamp``, ``current_queue``, ``range_push``/``range_pop`` and the
plugin's capture wrappers run on the user's thread, once or twice per launch: keep them short.
The reading hooks (``timestamp_done``, ``elapsed_time``, ``device_times``,
``device_times_batch``, ``release_timestamp``, ``queue_info``, ``align_clock``) run on
whichever thread harvests, while others launch: make them thread-safe.

A record's life. Tokens are put on the user's thread (``record_timestamp`` or a capture's own);
at a harvest kprof asks ``timestamp_done(stop)``, then reads ``device_times(start, stop)``, or
``elapsed_time(start, stop)`` and ``elapsed_time(ref, stop)`` (``ref``: the device's reference
token, see ``align_clock``), then calls ``release_timestamp`` once per token. At the profile's
end: ``align_clock`` once per device, then the reference tokens are released. A token is opaque
to kprof and must stay readable on its own (after the user's queue and buffers are gone). At
the end every hook call is made before the profile's deadline (``timeout``): past it
``align_clock`` is not asked, and tokens are given back only until the releases took a tenth
of the timeout (the rest are left to the plugin, said once in a warning).

Values. Everything a hook hands back is checked where it is recorded: times and durations are
ints within ±2**59 ns, an end is never before its begin, byte counts are -1 or a count; a
record with a value outside these is kept unresolved, with the reason. An ``Alignment`` with a
bad field counts as ``align_clock`` failing; a ``QueueInfo`` whose ``device`` or ``label`` is
not a str, or whose ``device_key`` is not hashable, as ``queue_info`` failing. A name that is
not a str is kept under its ``repr``.

Errors. A hook that raises or returns the wrong type makes kprof warn once, stop using the
backend for the rest of the process and keep everything recorded (unresolved, with the
reason). Except: ``timestamp_done``, ``elapsed_time``, ``device_times`` raising while a record
is resolved is a device error that costs that record only (:class:`kprof.plugin.NeverSubmitted`
the same, without the warning); ``queue_info`` and ``align_clock`` failing make kprof warn and
fall back (a generic queue name; placement by launch time), keeping the backend.

The activity hooks (``activity_scope_enter`` ... ``activity_align``), for vendor tools that
report device work after it ran, are in ``hookspecs_activity.py``; the optional ones (mirroring
ranges, the demo, the environment ``kprof run`` starts with, notes for the report, device
memory, launch configurations as text) in ``hookspecs_optional.py``.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

# The activity hooks and the optional ones live beside this module, each group with its own
# introduction (the reference's sections); imported here, they are part of the hooks kprof
# resolves.
from kprof_core.host.hookspecs_activity import (  # noqa: F401
    activity_align,
    activity_flush,
    activity_scope_enter,
    activity_scope_exit,
)
from kprof_core.host.hookspecs_optional import (  # noqa: F401
    capture_modules,
    demo_workload,
    exec_environment,
    launch_config,
    memory_install,
    memory_remove,
    range_pop,
    range_push,
    report_notes,
)
from kprof_core.host.markers import PROJECT, hookspec

if TYPE_CHECKING:
    from kprof_core.host.backend import Alignment, Backend, BackendInfo, QueueInfo

# -- Describing the backend (used by ``kprof backends`` and when a profile starts) -------------


@hookspec(firstresult=True)
def describe_backend(backend: Backend) -> BackendInfo | None:
    """Say what this backend is and whether it can run here.

    Must not raise for a missing library or device (report it), and must not import the vendor
    library at ``import kprof`` time: import it here, lazily. Cheap enough to run when a
    profile starts; kprof caches the answer (``Backend.info(refresh=True)`` asks again).
    ``timestamps=True`` is shown only when the plugin implements the hooks device timing needs.
    An exception or a wrong type is reported as status ``"error: ..."``, with a warning.

    :param backend: The :class:`kprof.plugin.Backend` kprof made for the plugin (every hook
        gets it: its ``name``, and ``state``, a dict for the plugin's own data).
    :returns: A :class:`kprof.plugin.BackendInfo`: ``status`` (``"available"``, ``"not
        installed"``, ``"no device"`` or ``"error: <why>"``; profiles use only available
        backends), ``library``, ``library_version``, ``devices``, ``timestamps`` and
        ``detail`` (why, in words a user can act on). Default: ``None``, shown as available
        with no details.
    """


# -- Device timestamps -------------------------------------------------------------------------


@hookspec(firstresult=True)
def record_timestamp(backend: Backend) -> Any | None:
    """Put a timestamp on the calling thread's current queue, without blocking.

    Called for ``kprof.range`` and ``kprof.kernel`` only, on backends where ``current_queue``
    returned a queue: at entry (the range's ``start``) and at exit (its ``stop``); not where
    the backend delivers the profile's activity records (its work then times the range). The
    range's host interval encloses both calls, however long they take. Capture wrappers do not
    use it (it takes no queue): they put timestamps on their launch's queue with the plugin's
    code.
    Draw tokens from a pool: a device event created per call cost the reference
    implementation 6 µs per launch. A token with an attribute ``approximate = True`` is read
    as host-observed times (see ``install_capture``), and its range is marked ``~``.

    :param backend: The plugin's :class:`kprof.plugin.Backend`.
    :returns: An opaque token, later given to ``timestamp_done``, the reading hooks,
        ``align_clock`` and, exactly once, ``release_timestamp``; or ``None`` (no device
        timestamps, or no current queue): kprof then times on the host. Default: ``None``.
    """


@hookspec(firstresult=True)
def elapsed_time(backend: Backend, start: Any, stop: Any) -> int:
    """The device time in nanoseconds from when ``start``'s work began to when ``stop``'s ended.

    Asked once ``timestamp_done(stop)`` is true; when ``timestamp_done`` returned ``None``,
    wait for the work here, cooperatively (poll, sleep or release the GIL). Without
    ``device_times`` kprof calls it twice per record: for the duration (``start``, ``stop``)
    and for placement (``ref``, ``stop``, ``ref`` being the device's reference token), so
    tokens on queues with one ``device_key`` must be comparable.

    :param backend: The plugin's :class:`kprof.plugin.Backend`.
    :param start: A token; may be ``stop`` itself (a launch whose own event spans its work,
        as OpenCL's): then return that work's duration.
    :param stop: A token that is done.
    :returns: An int (``numpy.int64`` and other integer types too), never negative for tokens
        recorded in order on one queue (it may be for tokens on different queues). Anything
        else is a plugin error.
    :raises: Any exception on a device error (that record is kept unresolved, with the
        message; never return a wrong number), or :class:`kprof.plugin.NeverSubmitted`.
        The default raises :class:`kprof.plugin.TimestampsUnsupported`.
    """
    raise NotImplementedError  # a specification: plugins implement it


@hookspec(firstresult=True)
def device_times(backend: Backend, start: Any, stop: Any) -> tuple[int, int] | None:
    """For absolute device clocks: when ``start``'s work began and ``stop``'s work ended.

    One call per record instead of two ``elapsed_time`` calls, which matters at a million
    launches; enough on its own for device timing (with ``record_timestamp``). OpenCL's
    profiling counters are such a clock (Vulkan's and WebGPU's timestamp queries too, times
    the timestamp period); CUDA's and HIP's events are not. Asked once ``stop`` is done, or,
    when ``timestamp_done`` returns ``None``, it waits cooperatively as ``elapsed_time`` does.

    :param backend: The plugin's :class:`kprof.plugin.Backend`.
    :param start: A token (may be ``stop`` itself).
    :param stop: A token that is done.
    :returns: ``(begin_ns, end_ns)``, two ints on the device's own clock, comparable across
        queues with the same ``device_key``; ``begin <= end`` for tokens recorded in order on
        one queue; ``end - begin == elapsed_time(start, stop)`` where both are implemented.
        Anything but a pair of ints is a plugin error. No default.
    :raises: As ``elapsed_time``: a device error, or :class:`kprof.plugin.NeverSubmitted`.
    """


@hookspec(firstresult=True)
def device_times_batch(
    backend: Backend, starts: tuple[Any, ...], stops: tuple[Any, ...]
) -> tuple[Any, Any] | None:
    """Optional, with ``device_times``: read a run of pending launches at once.

    Called off the launch path, once per run (up to a few thousand), so that a plugin can read
    them in compiled code (the OpenCL plugin does, on each event's ``int_ptr``) instead of one
    Python call per token. Without it kprof maps ``timestamp_done`` and ``device_times``.

    :param backend: The plugin's :class:`kprof.plugin.Backend`.
    :param starts: The runs' ``start`` tokens.
    :param stops: Their ``stop`` tokens, as many.
    :returns: ``(begins, ends)``, two equally long sequences of ints (lists, tuples or
        ``array('q')``): what ``device_times`` would return, for the longest prefix of pairs
        whose ``stop`` is done and readable. Stop at the first that is not done, failed or
        cannot be read: kprof asks about it alone, through ``timestamp_done`` and
        ``device_times``, which say what went wrong. No default.
    """


@hookspec(firstresult=True)
def timestamp_done(backend: Backend, token: Any) -> bool | None:
    """Whether the device has reached ``token``, without blocking.

    kprof polls it to harvest while a profile runs (so that a long profile holds a bounded
    number of live tokens) and to wait, cooperatively and up to the profile's timeout, at its
    end. It asks about a record's ``stop`` only: one queue completes in order.

    Deferred submission (Vulkan, WebGPU, Metal): "the launch" is the call that records the
    command into a command buffer, its queue the one the buffer will be submitted to; the
    tokens are timestamp writes around the command in the same buffer, and this hook returns
    ``False`` until the buffer was submitted, ran and its results were read back.

    :param backend: The plugin's :class:`kprof.plugin.Backend`.
    :param token: A token kprof holds.
    :returns: ``True`` once the device has reached it (also when the command failed: the
        reading hook then raises and says why), ``False`` while not, ``None`` if the backend
        cannot tell: kprof then reads such a token only when it must (too many pending, the
        profile's end), through the reading hook, which must wait itself; at the end that read
        is made in a separate thread, abandoned (its tokens never released) at the timeout.
        Default: ``None``.
    :raises: :class:`kprof.plugin.NeverSubmitted` for work that will never reach the device (a
        command buffer dropped unsubmitted, a failed submission, a lost device): the record is
        given up at once, unresolved with that reason, instead of waited for until the
        timeout. Any other exception is a device error for that record.
    """


@hookspec(firstresult=True)
def release_timestamp(backend: Backend, token: Any) -> None:
    """Give a token back (to the backend's pool): kprof has read every time it needs from it.

    Called on the harvesting thread, exactly once for every token ``record_timestamp`` returned
    or a capture handed to ``recorder.launch`` (a launch whose ``start`` and ``stop`` are one
    object counts once), after the last read that uses it (reference tokens after
    ``align_clock``), or when the profile is abandoned; never for a token whose read kprof
    abandoned at the timeout. Until then the plugin must not hand the token out again. It may
    come before the device reached the token (kprof gave up, a device error, work reported
    after its profile ended): a pool must then not hand it out again before the device has
    reached it, unless recording it again makes it forget the pending record (as CUDA and HIP
    events do). Tokens a capture made but never handed over (the native launch raised) are the
    plugin's to give back.

    :param backend: The plugin's :class:`kprof.plugin.Backend`.
    :param token: The token. Default: nothing is done (kprof drops its reference: right for
        tokens that are not pooled, such as OpenCL events).
    """


# -- Queues and attribution --------------------------------------------------------------------


@hookspec(firstresult=True)
def current_queue(backend: Backend) -> Any | None:
    """The calling thread's current queue (stream) on this backend.

    ``kprof.range`` and ``kprof.kernel`` put timestamps only on backends where there is one,
    with ``record_timestamp`` on that same queue. Called on the launch path at every range
    entry: keep it to a thread-local lookup. kprof holds a strong reference to every queue
    handed to it (by this hook or a capture) until the profile that got it ends.

    :param backend: The plugin's :class:`kprof.plugin.Backend`.
    :returns: The queue object (later given to ``queue_info`` and ``synchronize``), or
        ``None`` when the user's code is not using this backend (for example when the vendor
        library was not imported: check ``sys.modules`` rather than importing it), or, with
        deferred submission, when no command encoder is open. Default: ``None``.
    """


@hookspec(firstresult=True)
def queue_info(backend: Backend, queue: Any) -> QueueInfo | None:
    """Describe a queue object that a capture or ``current_queue`` handed to kprof.

    Called once per distinct queue per profile, on the harvesting thread (it may be slow). The
    answer for one queue must not change while the queue lives: records are grouped by
    ``device_key``, and tokens compared only within one. A failure makes kprof warn and name
    the queue generically, keeping the backend.

    :param backend: The plugin's :class:`kprof.plugin.Backend`.
    :param queue: The queue object.
    :returns: A :class:`kprof.plugin.QueueInfo`: the ``device`` name, a short ``label``
        (``"stream 2"``) and a hashable ``device_key`` shared by queues whose timestamps are
        comparable (``None``: the device name is the key). Default: ``"queue 1"``, ... in
        the order seen, on one device called ``"device"``.
    """


@hookspec(firstresult=True)
def synchronize(backend: Backend, queue: Any) -> None:
    """Block until all work enqueued on ``queue`` is done.

    Used for host timing on backends without timestamps (after a captured launch, at the end of
    a ``kprof.range``) and for ``profile(synchronize=True)``, on the user's thread. If the work
    can be gated on something the program does next, wait at most the active profile's
    ``timeout`` (``kprof.plugin.active().timeout``).

    :param backend: The plugin's :class:`kprof.plugin.Backend`.
    :param queue: The queue, or ``None`` for the calling thread's current one. Default:
        nothing is done, so host timing then measures the enqueue alone.
    """


# -- Automatic capture -------------------------------------------------------------------------


@hookspec(firstresult=True)
def install_capture(backend: Backend) -> None:
    """Start capturing the vendor library's launches and copies.

    Called when the first profile that uses this backend starts (again after the last one
    ended and another starts). A discovered plugin's first call in a process runs on a thread
    of kprof's, bounded by ``KPROF_DISCOVERY_TIMEOUT`` (a wedged driver disables the backend
    instead of hanging the profile's start); once it answered, later calls run on the
    thread that starts the profile. Patch the launch and copy entry points with
    :class:`kprof.plugin.Patcher` (it restores the very same objects), with wrappers that keep
    ``backend`` in a closure and do::

        rec = kp.active()                   # kprof.plugin; None outside a profile
        if rec is None:
            return original(*args)          # straight through, nothing else
        t0 = kp.now()
        start = record_on(queue) if rec.device else None     # the plugin's own code
        try:
            result = original(*args)
        except BaseException:
            if start is not None:
                backend.release_timestamp(backend, start)    # never handed to kprof
            raise
        stop = record_on(queue) if rec.device else None
        rec.launch(backend, kp.KERNEL, name, queue, t0, kp.now(), start, stop, nbytes)
        return result

    ``rec.launch(backend, kind, name, queue, start_ns, end_ns, start=None, stop=None,
    nbytes=-1)``: ``kind`` is ``kp.KERNEL`` or ``kp.COPY``; ``start_ns``/``end_ns`` bracket
    the native call on the host clock (``kp.now()``) and are the launch's host interval;
    ``start``/``stop`` are tokens around the work on the launch's own queue (one object for a
    launch whose own event spans it), or ``None``: kprof then synchronizes the queue and times
    on the host. It appends, returns, and releases every token it was handed. Put timestamps
    around the native enqueue alone (compilation and argument handling are not device time),
    and report each launch once (a wrapper calls the native function, never another wrapper).
    On a queue without timestamps whose completion the host can observe,
    ``rec.launch_observed(backend, kind, name, queue, start_ns, end_ns, token, nbytes)`` times
    without synchronizing: ``timestamp_done(token)`` says whether the host saw the work
    complete, ``device_times(token, token)`` returns when it began and ended on the host clock,
    and rows are marked approximate (``~``); ``kprof_opencl/observed.py`` does it.

    :param backend: The plugin's :class:`kprof.plugin.Backend`. Default: nothing is done (no
        automatic capture: users time work with ``kprof.range`` and ``kprof.kernel``).
    """


@hookspec(firstresult=True)
def remove_capture(backend: Backend) -> None:
    """Undo ``install_capture`` exactly: every patched attribute gets back the very same object.

    Called when the last profile that uses this backend ends, also with an exception, and after
    an ``install_capture`` that raised (undo what it did). Afterwards unprofiled code runs the
    library's own functions.

    :param backend: The plugin's :class:`kprof.plugin.Backend`. Default: nothing is done.
    """


# -- Clocks ------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def align_clock(backend: Backend, token: Any, launch_window: tuple[int, int]) -> Alignment | None:
    """Map a device's reference token to host time, to place its work on the host timeline.

    Called once per ``device_key`` at the end of a profile, on the thread ending it. kprof
    places every other token of the device by ``elapsed_time`` (or ``device_times``) from this
    one, then makes sure no work appears to start before its launch. A failure makes kprof warn
    and place by launch time, keeping the backend.

    :param backend: The plugin's :class:`kprof.plugin.Backend`.
    :param token: The reference token: the ``start`` of the first record kprof read on the
        device in the profile (normally the first launched), unreleased until this returns.
    :param launch_window: ``(start_ns, end_ns)``, the host interval of the call that enqueued
        the token's work, for checking the correlation (an OpenCL event's ``QUEUED`` time must
        fall inside it).
    :returns: A :class:`kprof.plugin.Alignment`: the host time (``time.perf_counter_ns``) at
        which the device reached ``token``, an honest error bound (the true time lies within
        ``host_ns ± error_ns``; reported with every profile, in ``Profile.clocks``), and the
        method's name (``"clGetDeviceAndHostTimer"``). Or ``None`` without a real
        correlation: the first work on each device is assumed to start at its launch, and the
        report says so. Default: ``None``.
    """


def _spec_arguments() -> dict[str, tuple[str, ...]]:
    """Every hook of this module (the imported groups included) with its arguments in order."""
    return {
        name: tuple(inspect.signature(fn).parameters)
        for name, fn in list(globals().items())
        if callable(fn) and hasattr(fn, f"{PROJECT}_spec")
    }


#: The hooks kprof resolves per backend, with their spec's arguments in order: read from the
#: hookspecs, the one place the hook list is written.
RESOLVED_HOOKS: dict[str, tuple[str, ...]] = _spec_arguments()
