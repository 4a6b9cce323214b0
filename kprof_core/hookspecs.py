"""The hooks a kprof backend plugin implements: this module is the plugin author's reference.

A backend plugin is a module (or any object) with functions decorated ``@kprof.hookimpl``,
registered under the entry-point group ``kprof.backends``; the entry point's name is the
backend's name::

    [project.entry-points."kprof.backends"]
    mydevice = "kprof_mydevice.plugin"

Every hook receives the :class:`kprof.Backend` that kprof made for the plugin (its ``name``,
and a ``state`` dict the plugin may use). A plugin implements only the hooks it can; each
missing hook falls back to kprof's built-in defaults (``kprof_core.defaults``), which report
no support. A plugin that implements no timestamp hooks still profiles: its launches are
synchronized and timed on the host, and marked ``*`` in the report.

How kprof calls these hooks. Hooks are resolved once per backend: kprof looks up the
implementation in the backend's own plugin (or the default) and calls it directly, so a call
costs what a plain Python call costs (~0.1 µs) rather than a pluggy dispatch (~3.5 µs). As a
consequence hook wrappers and ``tryfirst``/``trylast`` have no effect on these hooks, and a
plugin never sees calls meant for another backend.

Hooks on the launch path (``record_timestamp``, ``current_queue``) run on the user's thread,
once or twice per launch: keep them short. Hooks that read results (``timestamp_done``,
``elapsed_time``, ``release_timestamp``, ``queue_info``, ``align_clock``) run when kprof
harvests completed work, on whichever thread harvests, possibly while other threads launch.

An exception raised by a hook is caught by kprof: it warns once, naming the plugin and the
error, stops using that backend for the rest of the process, and keeps everything recorded
(records it can no longer time are kept as unresolved, with the reason). A hook that returns
the wrong type counts as raising. Exceptions are made where falling back is right:

- ``timestamp_done``, ``elapsed_time`` and ``device_times`` raising while kprof resolves a
  record is a device error (a failed command, an invalid event): that record is kept as
  unresolved with the reason, and the backend stays in use for the next ones;
- ``queue_info`` and ``align_clock``: kprof warns and falls back (a generic queue name;
  placement by launch time) but keeps the backend.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from .backend import Alignment, Backend, BackendInfo, QueueInfo

PROJECT = "kprof"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

# ---------------------------------------------------------------------------------------------
# Describing the backend (used by ``kprof backends`` and when a profile starts)
# ---------------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def describe_backend(backend: Backend) -> BackendInfo | None:
    """Say what this backend is and whether it can run here.

    Return a :class:`kprof.BackendInfo`: the vendor ``library`` and ``library_version`` (or
    ``None`` when the library is not installed), the ``devices`` it sees, whether it has
    device ``timestamps``, and a ``status``: ``"available"``, ``"not installed"``,
    ``"no device"`` or ``"error: <what went wrong>"``. Say in ``detail`` why, in words a user
    can act on (for example ``cudaErrorNoDevice: no CUDA-capable device is detected``).

    Must not raise for a missing library or device: report it. Must be cheap enough to run
    when a profile starts (a profile only uses backends whose status is ``"available"``).
    The default returns ``None``: kprof then shows the backend as available, with no details.
    """


# ---------------------------------------------------------------------------------------------
# Device timestamps
# ---------------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def record_timestamp(backend: Backend) -> Any | None:
    """Put a timestamp on the calling thread's current queue and return a token for it.

    Must not block: the timestamp is taken when the device reaches it (a marker, an event).
    The token is opaque to kprof; it is later passed to ``timestamp_done``, ``elapsed_time``
    and ``release_timestamp``. Return ``None`` when the backend has no device timestamps,
    or when the calling thread has no current queue: kprof then times on the host.

    Draw tokens from a pool (see ``release_timestamp``): creating a device event per call is
    what made the reference implementation cost 6 µs more per launch.
    The default returns ``None``.
    """


@hookspec(firstresult=True)
def elapsed_time(backend: Backend, start: Any, stop: Any) -> int:
    """Return the device time in nanoseconds from token ``start`` to token ``stop``, as an int.

    kprof asks only after ``timestamp_done`` said ``stop`` is done, unless the backend does not
    implement it; then this hook must wait for the work itself, cooperatively: poll, sleep or
    release the GIL so that other threads keep running. Raise an exception on a device error;
    never return a wrong number. The result may be negative when ``stop`` ran before ``start``
    (tokens on different queues of one device).

    ``start`` and ``stop`` may be the same token: for a launch whose own event spans its work
    (an OpenCL event), return the work's duration. In general ``start`` stands for the moment
    its work began and ``stop`` for the moment its work ended.
    Anything but an int (or an integer type such as ``numpy.int64``) is a plugin error: kprof
    warns once and stops using the backend, as if the hook had raised.
    The default raises :class:`kprof.TimestampsUnsupported`.
    """
    raise NotImplementedError  # a specification: plugins implement it


@hookspec(firstresult=True)
def device_times(backend: Backend, start: Any, stop: Any) -> tuple[int, int] | None:
    """Optional, for backends whose timestamps are absolute: when ``start``'s work began and
    ``stop``'s work ended, in nanoseconds of the device's own clock, as a pair of ints.

    Times of tokens on queues with the same ``device_key`` must be comparable. kprof then uses
    this one call instead of two ``elapsed_time`` calls per record (one for the duration, one
    for placement), which matters at a million launches. Asked only once ``stop`` is done.
    OpenCL's profiling counters are such a clock; CUDA's and HIP's events are not (they only
    give elapsed times), so their plugins leave this hook out. There is no default behaviour.
    """


@hookspec(firstresult=True)
def timestamp_done(backend: Backend, token: Any) -> bool | None:
    """Return whether the device has reached ``token``, without blocking.

    kprof polls this to harvest completed timestamps while a profile runs, so that a long
    profile holds a bounded number of live device events, and to wait cooperatively (with a
    bounded, configurable timeout) at the end. Return ``None`` if the backend cannot tell.
    The default returns ``None``.
    """


@hookspec(firstresult=True)
def release_timestamp(backend: Backend, token: Any) -> None:
    """Give a token back (to the backend's pool) once kprof has read every time it needs.

    Called exactly once for every token ``record_timestamp`` returned and tokens kprof was
    handed by a capture, after the last ``elapsed_time`` that uses it (or when the profile is
    abandoned). It may be called for a token the device has not reached yet (kprof gave up
    waiting for it, or the work was reported after its profile ended): a pool must not hand
    such a token out again before the device has reached it. The default does nothing.
    """


# ---------------------------------------------------------------------------------------------
# Queues and attribution
# ---------------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def current_queue(backend: Backend) -> Any | None:
    """Return the calling thread's current queue (stream) on this backend, or ``None``.

    ``kprof.range`` and ``kprof.kernel`` record device timestamps only on backends where the
    calling thread has a current queue, so return ``None`` when the user's code is not using
    this backend (for example when the vendor library has not been imported). The returned
    object is passed to ``queue_info`` and ``synchronize``. Called on the launch path.
    The default returns ``None``.
    """


@hookspec(firstresult=True)
def queue_info(backend: Backend, queue: Any) -> QueueInfo | None:
    """Describe a queue object that a capture or ``current_queue`` handed to kprof.

    Return a :class:`kprof.QueueInfo` with the ``device`` name, a stable ``device_key`` (the
    timestamps of queues with the same key are comparable) and a short ``label`` such as
    ``"stream 2"``. Called once per distinct queue per profile, off the launch path.
    The default describes the queue by its ``repr``.
    """


@hookspec(firstresult=True)
def synchronize(backend: Backend, queue: Any) -> None:
    """Block until all work enqueued on ``queue`` (or, if ``None``, the current one) is done.

    Used for host timing on backends without timestamps and for ``profile(synchronize=True)``.
    The default does nothing, so host timing then measures the enqueue alone.
    """


# ---------------------------------------------------------------------------------------------
# Automatic capture
# ---------------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def install_capture(backend: Backend) -> None:
    """Start capturing launches of the vendor library automatically.

    Called when the first profile in the process starts. Patch the library's launch and copy
    entry points with wrappers that look up the active recorder with
    ``kprof.capture.active()`` and, when it is not ``None``, report each launch with
    ``recorder.launch(...)``; when it is ``None`` the wrapper must call straight through.
    Record timestamps around the native enqueue alone, so that compilation and argument
    handling are not counted as device time. The default does nothing (no automatic capture:
    users time work with ``kprof.range`` and ``kprof.kernel``).
    """


@hookspec(firstresult=True)
def remove_capture(backend: Backend) -> None:
    """Undo ``install_capture`` exactly: every patched attribute gets back the very same object.

    Called when the last profile in the process ends, also when it ends with an exception.
    The default does nothing.
    """


# ---------------------------------------------------------------------------------------------
# Clocks
# ---------------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def align_clock(
    backend: Backend, token: Any, launch_window: tuple[int, int]
) -> Alignment | None:
    """Map a completed token to host time, for placing device work on the host timeline.

    Return a :class:`kprof.Alignment`: the host time (``time.perf_counter_ns`` clock) at which
    the device reached ``token``, the error bound in nanoseconds, and the method's name (for
    example ``"CLOCK_MONOTONIC_RAW (PoCL CPU device)"`` or ``"clGetDeviceAndHostTimer"``).
    kprof places every other token on that device by ``elapsed_time`` from this one, and then
    makes sure no work appears to start before its launch. ``launch_window`` is the host
    interval ``(start_ns, end_ns)`` of the call that enqueued the token's work, for checking
    the correlation (an OpenCL event's ``QUEUED`` time must fall inside it). Return ``None`` if the backend has
    no real correlation: kprof then assumes the first work on each device started when it was
    launched, and says so. The default returns ``None``.
    """


# ---------------------------------------------------------------------------------------------
# Mirroring ranges into the vendor's tools (optional)
# ---------------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def range_push(backend: Backend, name: str) -> None:
    """A ``kprof.range`` (or a ``kprof.kernel`` call) named ``name`` begins on the calling thread.

    For plugins that mirror kprof's ranges into the vendor's own tools (NVTX ranges for Nsight,
    rocTX for rocprof). Called on the user's thread, inside a profile, only on backends where
    the thread has a current queue, just before the range's start timestamp; every call is
    matched by one ``range_pop`` on the same thread, in nested (stack) order. Keep it short.
    kprof calls it only on backends that implement it; there is no default behaviour.
    """


@hookspec(firstresult=True)
def range_pop(backend: Backend) -> None:
    """The range of the matching ``range_push`` ends (after its stop timestamp)."""


# ---------------------------------------------------------------------------------------------
# The demo
# ---------------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def demo_workload(backend: Backend, size: int) -> Any | None:
    """Return a callable that runs one step of ``kprof demo``'s reference workload, or ``None``.

    One step enqueues, without waiting, the two reference kernels on ``size`` float32
    elements: ``mul2`` (x *= 2) then ``add`` (z = x + y), launched so that the plugin's own
    capture (or ``kprof.kernel``) records them. Set up buffers and compile before returning, so
    a step measures launches only. ``kprof demo`` uses the first available backend that
    returns one. The default returns ``None``.
    """


# ---------------------------------------------------------------------------------------------
# Activity records: backends whose vendor tool hands over completed device work
# (CUPTI's Activity API; rocprofiler-sdk or Level Zero later). Added for issue 14.
# ---------------------------------------------------------------------------------------------
#
# Such a backend sees every kernel and copy of the process, whoever launched it, after the
# device ran it. kprof tells it which code belongs to which profile with *scopes*: a scope is
# one profile on one thread, an int that kprof opens on that thread when the profile starts
# (and when a ``kprof.propagate``-wrapped function starts in another thread) and closes when it
# ends. The backend ties the work launched on a thread to the innermost open scope there (CUPTI:
# an external correlation id pushed on the thread), and hands the completed records over with
# ``kprof.capture.deliver(backend, records)`` (a list of ``kprof.capture.DeviceRecord``), from
# any thread, while the profile runs and at ``activity_flush``. Records of a scope whose
# profile has ended are dropped, counted and reported; records of no kprof scope are not
# kprof's (the backend drops them itself). The vendor tool is switched on in
# ``install_capture`` and off in ``remove_capture``, so it runs only while a profile does.


@hookspec(firstresult=True)
def activity_scope_enter(backend: Backend, scope: int) -> bool | None:
    """The calling thread starts running code of the profile scope ``scope``.

    Return True when the backend will deliver the device records of the work this thread
    launches from now on (tagged with ``scope``) until the matching ``activity_scope_exit``;
    False or None when it cannot (its activity source is unavailable or taken): kprof then
    keeps timing that backend's work with timestamps (``kprof.range``, ``kprof.kernel``, and
    the plugin's own capture). Scopes nest on a thread (a profile inside a profile): the
    innermost open one owns the work. Called on the user's thread, once per profile per thread.
    The default returns None (no activity records).
    """


@hookspec(firstresult=True)
def activity_scope_exit(backend: Backend, scope: int) -> None:
    """The calling thread leaves ``scope`` (matched with ``activity_scope_enter``, in stack
    order, on the same thread). Work launched afterwards is no longer ``scope``'s.
    The default does nothing."""


@hookspec(firstresult=True)
def activity_flush(backend: Backend, scopes: tuple[int, ...], timeout: float) -> int | None:
    """Deliver every record of work launched in ``scopes`` (a profile that is ending) now.

    Wait cooperatively (sleep between polls) until the device has completed that work and its
    records were handed to ``kprof.capture.deliver``, at most ``timeout`` seconds. Return how
    many launches of these scopes still had no record by then (kprof reports them), or None
    if the backend cannot tell. Called on the thread that ends the profile, before kprof
    resolves it. The default returns None.
    """


@hookspec(firstresult=True)
def activity_align(backend: Backend, queue: Any, device_ns: int) -> Alignment | None:
    """Where the time ``device_ns`` of the clock of ``queue``'s device records lies on the
    host clock (``time.perf_counter_ns``), as a :class:`kprof.Alignment` with its error bound
    and method (for example ``"cuptiGetTimestamp sampled against perf_counter_ns"``).

    kprof asks once per device per profile, for the first record's begin, and places that
    device's records by the same offset. Return None when there is no correlation: kprof then
    places the first record at the start of its scope and says so. The default returns None.
    """
