"""The hooks a kprof backend plugin implements: this module is the plugin author's reference.

A backend plugin is a module (or any object) with functions decorated ``@kprof.hookimpl``,
registered under the entry-point group ``kprof.backends``; the entry point's name is the
backend's name::

    [project.entry-points."kprof.backends"]
    mydevice = "kprof_mydevice.plugin"

``kprof.register_backend(plugin, "mydevice")`` registers one that is not installed (a notebook,
a test). ``examples/plugin/kprof_workqueue.py`` is a complete small plugin, and
``kprof.testing.BackendConformance`` checks a plugin against the rules below.

Every hook receives the :class:`kprof.Backend` that kprof made for the plugin (its ``name``,
and a ``state`` dict the plugin may use). A plugin implements only the hooks it can; each
missing hook falls back to kprof's built-in defaults (``kprof_core.host.defaults``), which report
no support. An implementation may take a subset of the spec's arguments, by name.

Which hooks a backend needs. Device timing needs ``record_timestamp`` (put a timestamp) and a
hook that reads tokens: ``elapsed_time`` (durations between two tokens, as CUDA and HIP events
give) or ``device_times`` (absolute device-clock times, as OpenCL, Vulkan and WebGPU give), or
both. A plugin with ``record_timestamp`` and neither is warned about at registration and timed
on the host. Then, in order of how much they matter: ``timestamp_done`` (without it kprof
can only read a token by waiting in the reading hook, so it reads none while the profile runs
until too many are pending, and at the end it waits for such a read in a separate thread,
which it abandons at the timeout),
``current_queue`` (without it ``kprof.range`` and ``kprof.kernel`` never reach the backend),
``queue_info`` (device names and which queues share a clock), ``release_timestamp`` (pools),
``align_clock`` (a real host correlation), ``install_capture``/``remove_capture`` (automatic
capture), ``synchronize`` (host timing). A plugin that implements no timestamp hooks still
profiles: its launches are synchronized and timed on the host, and marked ``*`` in the report.

How kprof calls these hooks. Hooks are resolved once per backend: kprof looks up the
implementation in the backend's own plugin (or the default), binds it as an attribute of the
``Backend`` and calls it directly, as ``backend.elapsed_time(backend, start, stop)``: a call
costs what a plain Python call costs (~0.1 µs) rather than a pluggy dispatch (~3.5 µs). As a
consequence hook wrappers and ``tryfirst``/``trylast`` have no effect on these hooks, and a
plugin never sees calls meant for another backend. A plugin's own capture code may call its
hooks the same way (``backend.release_timestamp(backend, token)``), or simply call its own
functions.

Capture wrappers and the queue they know. ``record_timestamp`` takes no queue: it is for
``kprof.range`` and ``kprof.kernel``, which time the calling thread's current queue. A capture
wrapper knows the queue of the launch it wraps, so it puts its timestamps there with the
plugin's own code (for example ``_record_on(queue)``, or the launch's own event), and hands
them to ``recorder.launch(...)`` (see ``install_capture``). Tokens from either path go to the
same reading hooks, so they must be of a kind those accept.

Threads. Hooks on the launch path (``record_timestamp``, ``current_queue``, ``range_push``,
``range_pop``, and the plugin's capture wrappers) run on the user's thread, once or twice per
launch: keep them short. Hooks that read results (``timestamp_done``, ``elapsed_time``,
``device_times``, ``release_timestamp``, ``queue_info``, ``align_clock``) run when kprof
harvests completed work, on whichever thread harvests (a launching thread once enough work is
pending, the thread that ends the profile), possibly while other threads launch. So they must
be thread-safe, and a token may be read on another thread than the one that recorded it.

Tokens. A token is whatever object the plugin returns: kprof never looks inside, and holds it
until it calls ``release_timestamp`` for it, exactly once (a launch whose ``start`` and
``stop`` are the same object counts once; a token whose read kprof abandoned at the timeout,
still waiting in the reading hook, is never given back). Until then the plugin must not hand the same object
out again; after it, a token the device has not reached yet (kprof gave up on
it) must not be handed out again until the device has reached it, unless recording it again
makes it forget the pending record (as CUDA and HIP events do). A token must stay readable
on its own: kprof may read it after the user's queue, buffers or command buffer are gone.

Queues. kprof holds a strong reference to every queue object handed to it (by a capture or
``current_queue``) until the profile that got it ends, so that ``id(queue)`` stays unique
meanwhile: a plugin need not keep queues alive for kprof, and must not rely on kprof keeping
them past the profile's end.

The order of a record's life. ``record_timestamp`` (or a capture's own timestamps) on the
user's thread; then, at a harvest, ``timestamp_done(stop)``; once it is ``True``,
``device_times(start, stop)`` or ``elapsed_time(start, stop)`` (and ``elapsed_time(ref, stop)``
for placement, ``ref`` being the device's reference token: see ``align_clock``), then
``release_timestamp`` for each token. At the end of the profile, ``align_clock`` once per
device, then the reference tokens are released.

Deferred submission (Vulkan, WebGPU, Metal: commands are recorded into a command buffer, then
submitted to a queue). "The launch" is the call that records the command (a dispatch, a copy
into the encoder): its host interval is what ``recorder.launch`` gets, and its queue is the
queue the command buffer will be submitted to. That is sound because no work can start before
it is recorded; the device times come from timestamps written around the command in the same
command buffer (``writeTimestamp``, timestamp queries), and are only done once the buffer was
submitted, has run and its query results were read back. ``timestamp_done`` returns ``False``
until then. When the plugin learns that the work will never be submitted (the command buffer or
encoder was dropped, submission failed, the device was lost), ``timestamp_done`` raises
:class:`kprof.NeverSubmitted`: kprof then keeps the record as unresolved with that reason at
once, instead of waiting for it until the profile's timeout (60 s by default). For
``kprof.range``, ``current_queue`` returns ``None`` when no command encoder is open on the
calling thread, and ``record_timestamp`` writes into the open one.

An exception raised by a hook is caught by kprof: it warns once, naming the plugin and the
error, stops using that backend for the rest of the process, and keeps everything recorded
(records it can no longer time are kept as unresolved, with the reason). A hook that returns
the wrong type counts as raising. Exceptions are made where falling back is right:

- ``timestamp_done``, ``elapsed_time`` and ``device_times`` raising while kprof resolves a
  record is a device error (a failed command, an invalid event): that record is kept as
  unresolved with the reason, and the backend stays in use for the next ones;
  :class:`kprof.NeverSubmitted` is the same without the warning;
- ``queue_info`` and ``align_clock``: kprof warns and falls back (a generic queue name;
  placement by launch time) but keeps the backend.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from kprof_core.host.backend import Alignment, Backend, BackendInfo, QueueInfo

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
    when a profile starts (a profile only uses backends whose status is ``"available"``), and
    must not import the vendor library at ``import kprof`` time: import it here, lazily.
    ``timestamps=True`` is shown only when the plugin implements the hooks device timing needs
    (``record_timestamp`` and ``elapsed_time`` or ``device_times``). kprof caches the answer
    (``Backend.info(refresh=True)`` asks again). An exception or a wrong type is reported as
    status ``"error: ..."`` with a warning. The default returns ``None``: kprof then shows the
    backend as available, with no details.
    """


# ---------------------------------------------------------------------------------------------
# Device timestamps
# ---------------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def record_timestamp(backend: Backend) -> Any | None:
    """Put a timestamp on the calling thread's current queue and return a token for it.

    Must not block: the timestamp is taken when the device reaches it (a marker, an event),
    not when this call returns. The token is opaque to kprof; it is later passed to
    ``timestamp_done``, ``elapsed_time``/``device_times``, ``align_clock`` and, exactly once,
    ``release_timestamp``. Return ``None`` when the backend has no device timestamps, or when
    the calling thread has no current queue: kprof then times on the host.

    kprof calls it for ``kprof.range`` and ``kprof.kernel`` only, on backends where
    ``current_queue`` returned a queue, once at entry (the range's ``start``) and once at exit
    (its ``stop``). The host interval of the range encloses both calls: it starts before the
    first and ends after the second, however long they take. Capture wrappers do not need this
    hook (it takes no queue): they put timestamps on the queue of the launch they wrap.

    Draw tokens from a pool (see ``release_timestamp``): creating a device event per call is
    what made the reference implementation cost 6 µs more per launch.
    The default returns ``None``.
    """


@hookspec(firstresult=True)
def elapsed_time(backend: Backend, start: Any, stop: Any) -> int:
    """Return the device time in nanoseconds from token ``start`` to token ``stop``, as an int.

    kprof asks only after ``timestamp_done`` said ``stop`` is done, unless it returned ``None``
    (it cannot tell); then this hook must wait for the work itself, cooperatively: poll, sleep
    or release the GIL so that other threads keep running. Raise an exception on a device error
    (the record is kept as unresolved, with the message), or :class:`kprof.NeverSubmitted`;
    never return a wrong number. The result may be negative when ``stop`` ran before ``start``
    (tokens on different queues of one device); for tokens recorded in order on one queue it
    is never negative.

    kprof calls it twice per record unless the plugin implements ``device_times``: once for the
    duration (``start``, ``stop``), once for placement (``ref``, ``stop``), where ``ref`` is
    the device's reference token (the ``start`` of the first record read on that device in the
    profile, which kprof keeps unreleased until the end). So tokens on queues with the same
    ``device_key`` must be comparable.

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
    for placement), which matters at a million launches, and it is enough on its own: a plugin
    with ``record_timestamp`` and ``device_times`` is device-timed without ``elapsed_time``.
    ``begin <= end`` for tokens recorded in order on one queue; where the plugin implements
    both hooks, ``end - begin`` equals ``elapsed_time(start, stop)``.

    Asked once ``stop`` is done (or, when ``timestamp_done`` returns ``None``, it must wait
    cooperatively, as ``elapsed_time`` does). Raise on a device error, or
    :class:`kprof.NeverSubmitted`. Anything but a tuple of two ints is a plugin error.
    OpenCL's profiling counters are such a clock (and Vulkan's and WebGPU's timestamp queries,
    once multiplied by the timestamp period); CUDA's and HIP's events are not (they only give
    elapsed times), so their plugins leave this hook out. There is no default behaviour.
    """


@hookspec(firstresult=True)
def device_times_batch(
    backend: Backend, starts: tuple[Any, ...], stops: tuple[Any, ...]
) -> tuple[Any, Any] | None:
    """Optional, with ``device_times``: read many tokens at once, for the harvest.

    Return ``(begins, ends)``, two equally long sequences of ints (lists, tuples or
    ``array('q')``): what ``device_times(starts[i], stops[i])`` would return, for the longest
    prefix of the pairs whose ``stop`` is done and readable. Stop at the first one that is not
    done, has failed or cannot be read: kprof then asks about that one alone, through
    ``timestamp_done`` and ``device_times``, which report what went wrong. Called off the
    launch path, once per run of pending launches (up to a few thousand), so a plugin can read
    them in compiled code (the OpenCL plugin does) instead of one Python call per token.
    There is no default behaviour.
    """


@hookspec(firstresult=True)
def timestamp_done(backend: Backend, token: Any) -> bool | None:
    """Return whether the device has reached ``token``, without blocking.

    kprof polls this to harvest completed timestamps while a profile runs, so that a long
    profile holds a bounded number of live device events, and to wait cooperatively (with a
    bounded, configurable timeout, shared by all records) at the end. It asks about a record's
    ``stop`` token only (work on one queue completes in order, so ``start`` is done too).

    Return ``True`` once the device has reached the token (also when the command failed: the
    reading hook then raises and says why), ``False`` while it has not. Return ``None`` if the
    backend cannot tell: kprof then reads such a token only when it must (too many pending, or
    the profile's end) by calling the reading hook, which must wait itself; at the end such a
    read is made in a separate thread and abandoned, still running, at the profile's timeout. Raise :class:`kprof.NeverSubmitted` for a token whose work will never
    reach the device (see "Deferred submission" above): the record is given up at once.
    Any other exception is a device error for that record. The default returns ``None``.
    """


@hookspec(firstresult=True)
def release_timestamp(backend: Backend, token: Any) -> None:
    """Give a token back (to the backend's pool) once kprof has read every time it needs.

    Called exactly once for every token ``record_timestamp`` returned and every token kprof was
    handed by a capture (``recorder.launch``), after the last ``elapsed_time``/``device_times``
    that uses it (reference tokens after ``align_clock``), or when the profile is abandoned;
    never for a token whose read kprof abandoned at the timeout while the reading hook was
    still waiting for it (``timestamp_done`` returned ``None``): it may still be in use.
    It may be called for a token the device has not reached yet (kprof gave up waiting for it,
    ``NeverSubmitted``, a device error, or the work was reported after its profile ended): a
    pool must not hand such a token out again before the device has reached it, unless
    recording it again makes it forget the pending record (CUDA and HIP events: an event
    recorded again reports its newest record only). Tokens that a
    capture made but never handed to kprof (the native launch raised) are the plugin's own to
    give back. Called on the harvesting thread. The default does nothing; without this hook
    kprof just drops its reference (right for tokens that are not pooled, such as OpenCL
    events).
    """


# ---------------------------------------------------------------------------------------------
# Queues and attribution
# ---------------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def current_queue(backend: Backend) -> Any | None:
    """Return the calling thread's current queue (stream) on this backend, or ``None``.

    ``kprof.range`` and ``kprof.kernel`` record device timestamps only on backends where the
    calling thread has a current queue, so return ``None`` when the user's code is not using
    this backend (for example when the vendor library has not been imported: check
    ``sys.modules`` rather than importing it). The returned object is passed to
    ``queue_info`` and ``synchronize``, and ``record_timestamp`` must put its timestamps on
    that same queue. Called on the launch path, at every range entry: keep it to a
    thread-local lookup. The default returns ``None``.
    """


@hookspec(firstresult=True)
def queue_info(backend: Backend, queue: Any) -> QueueInfo | None:
    """Describe a queue object that a capture or ``current_queue`` handed to kprof.

    Return a :class:`kprof.QueueInfo` with the ``device`` name, a stable ``device_key`` (the
    timestamps of queues with the same key are comparable) and a short ``label`` such as
    ``"stream 2"``. Called once per distinct queue per profile, off the launch path (on the
    harvesting thread), so it may be slow. Its answer for one queue must not change while the
    queue lives: records are grouped by ``device_key``, and tokens are compared only within
    one. A ``device_key`` must be hashable (a string or a tuple of them is best); ``None``
    means the ``device`` name is the key. An exception or a wrong type makes kprof warn and
    name the queue generically, but keeps the backend. The default numbers queues in the order
    it sees them (``"queue 1"``) on one device called ``"device"``.
    """


@hookspec(firstresult=True)
def synchronize(backend: Backend, queue: Any) -> None:
    """Block until all work enqueued on ``queue`` (or, if ``None``, the current one) is done.

    Used for host timing on backends without timestamps (right after a captured launch, and
    at the end of a ``kprof.range``), and for ``profile(synchronize=True)``. Called on the
    user's thread. Wait at most the active profile's ``timeout``
    (``kprof.capture.active().timeout``) if the work can be gated on something the program
    does next. The default does nothing, so host timing then measures the enqueue alone.
    """


# ---------------------------------------------------------------------------------------------
# Automatic capture
# ---------------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def install_capture(backend: Backend) -> None:
    """Start capturing launches of the vendor library automatically.

    Called when the first profile that uses this backend starts (and again after the last one
    ended and another starts). Patch the library's launch and copy entry points with
    ``kprof.capture.Patcher`` (it restores the very same objects), with wrappers that keep the
    ``backend`` object in a closure and do::

        rec = capture.active()              # None outside a profile: call straight through
        if rec is None:
            return original(*args)
        t0 = capture.now()
        start = record_on(queue) if rec.device else None     # the plugin's own code
        try:
            result = original(*args)
        except BaseException:
            if start is not None:
                backend.release_timestamp(backend, start)    # never handed to kprof
            raise
        stop = record_on(queue) if rec.device else None
        rec.launch(backend, capture.KERNEL, name, queue, t0, capture.now(), start, stop, nbytes)
        return result

    ``recorder.launch(backend, kind, name, queue, start_ns, end_ns, start=None, stop=None,
    nbytes=-1)``: ``kind`` is ``capture.KERNEL`` or ``capture.COPY``; ``start_ns``/``end_ns``
    bracket the native call (``capture.now()``, the host clock ``time.perf_counter_ns``) and
    are the launch's host interval; ``start``/``stop`` are tokens around the work (the same
    object for a launch whose own event spans it), or ``None``: kprof then synchronizes the
    queue and times the launch on the host; ``nbytes`` is a copy's size. It appends and
    returns, and releases every token it was handed. Record timestamps around the
    native enqueue alone, so that compilation and argument handling are not counted as device
    time. A wrapper reports each launch once (a wrapper calls the native function it replaced,
    never another wrapper). On a queue without timestamps whose completion the host can
    observe, ``recorder.launch_observed(backend, kind, name, queue, start_ns, end_ns, token,
    nbytes)`` times the launch without synchronizing (rows marked approximate, ``~``). The default does nothing (no automatic capture: users time work
    with ``kprof.range`` and ``kprof.kernel``).
    """


@hookspec(firstresult=True)
def remove_capture(backend: Backend) -> None:
    """Undo ``install_capture`` exactly: every patched attribute gets back the very same object.

    Called when the last profile in the process that uses this backend ends, also when it ends
    with an exception, and after an ``install_capture`` that raised (so undo what was done).
    Afterwards the library is exactly as before: unprofiled code runs its own functions.
    The default does nothing.
    """


# ---------------------------------------------------------------------------------------------
# Clocks
# ---------------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def align_clock(backend: Backend, token: Any, launch_window: tuple[int, int]) -> Alignment | None:
    """Map a completed token to host time, for placing device work on the host timeline.

    Called once per device (``device_key``) at the end of a profile, on the thread ending it,
    with that device's reference token: the ``start`` token of the first record kprof read on
    that device in the profile (the first harvested, so normally the first launched), kept
    unreleased until this call returns.

    Return a :class:`kprof.Alignment`: the host time (``time.perf_counter_ns`` clock) at which
    the device reached ``token``, the error bound in nanoseconds, and the method's name (for
    example ``"CLOCK_MONOTONIC_RAW (PoCL CPU device)"`` or ``"clGetDeviceAndHostTimer"``).
    kprof places every other token on that device by ``elapsed_time`` from this one, and then
    makes sure no work appears to start before its launch. ``launch_window`` is the host
    interval ``(start_ns, end_ns)`` of the call that enqueued the token's work, for checking
    the correlation (an OpenCL event's ``QUEUED`` time must fall inside it). Return ``None`` if the backend has
    no real correlation: kprof then assumes the first work on each device started when it was
    launched, and says so. ``error_ns`` is reported with every profile (``Profile.clocks``,
    the trace), so make it an honest bound: the reference token's true host time lies within
    ``host_ns ± error_ns``. An exception or a wrong type makes kprof warn and fall back to
    placement by launch time, keeping the backend. The default returns ``None``.
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
    returns one; ``kprof.testing.BackendConformance`` uses it as the default workload. The
    default returns ``None``.
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
# ``kprof.capture.deliver(backend, records)`` (a list of ``kprof.capture.DeviceRecord``), or
# many at once, column-wise, with ``kprof.capture.deliver_columns(backend,
# kprof.capture.ActivityColumns(...))`` (no Python object per row: what a tracer reading
# CUPTI, rocprofiler-sdk or PTI buffers uses), from any thread, while the profile runs and at
# ``activity_flush``. Records the tracer lost are reported with
# ``kprof.capture.dropped(backend, n, reason)``. Records of a scope whose
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
    records were handed to ``kprof.capture.deliver`` (or ``deliver_columns``), at most
    ``timeout`` seconds; launches whose records the tracer dropped (reported with
    ``kprof.capture.dropped``) are not waited for. Return how
    many launches of these scopes still had no record by then (kprof reports them), or None
    if the backend cannot tell. Called on the thread that ends the profile, before kprof
    resolves it. The default returns None.
    """


@hookspec(firstresult=True)
def exec_environment(backend: Backend) -> dict[str, str] | None:
    """Environment variables the profiled program must be started with, which cannot be set
    once it runs (e.g. ``LD_PRELOAD`` of an interposer the backend needs where it cannot hook
    the vendor library at run time). ``kprof run`` asks every usable backend before it runs the
    script and, where one asks for a value the environment lacks, starts itself again once with
    it. ``kprof.profile()`` in a running program cannot: the backend then says what it could
    not see (``report_notes``). The default returns None (nothing needed).
    """


@hookspec(firstresult=True)
def report_notes(backend: Backend) -> list[str] | None:
    """Lines the report of a profile that is ending should carry: what the backend knows it may
    have missed, and how to fix it (e.g. OpenCL work launched from C where kprof has no hook).

    Called once per profile that used the backend, on the thread that ends it, before
    ``remove_capture``. The lines go to ``Profile.meta["notes"]`` and are printed under the
    summary. The default returns None (nothing to say).
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
