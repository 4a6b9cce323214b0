"""Backends as the profiler sees them: a plugin's hooks resolved once into direct calls."""

from __future__ import annotations

import dataclasses
import itertools
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

STATUSES = ("available", "not installed", "no device")
_slots = itertools.count()
_disable_lock = threading.Lock()


class TimestampsUnsupported(NotImplementedError):
    """Raised by the default ``elapsed_time``: the backend has no device timestamps."""


class NeverSubmitted(Exception):
    """Raised by a plugin's ``timestamp_done`` (or ``elapsed_time``/``device_times``) for a
    token whose work will never reach the device: a command buffer dropped without being
    submitted, a failed submission, a lost device (APIs with deferred submission: Vulkan,
    WebGPU, Metal).

    kprof gives the record up at once, instead of waiting for it until the profile's timeout:
    it is kept as unresolved, with this exception's message as the reason, without a warning,
    the token is released as usual, and the backend stays in use.
    """


class KprofError(RuntimeError):
    """An error in kprof's own configuration or input that the user can fix."""


@dataclass(frozen=True)
class BackendInfo:
    """What ``describe_backend`` reports about a backend (see ``kprof backends``).

    ``status``: ``"available"``, ``"not installed"``, ``"no device"`` or ``"error: <why>"``
    (a profile uses only available backends); ``library`` and ``library_version``: the vendor
    library (version None when it is not installed); ``devices``: the names of the devices it
    sees; ``timestamps``: whether it times on the device (shown only when the plugin also
    implements the hooks for it); ``detail``: why, in words a user can act on; ``capture``:
    how kprof captures device work there now (e.g. ``"CUPTI activity records"`` or ``"CUDA
    events"``) and ``capture_detail``: why that path (both shown by ``kprof backends``).
    """

    status: str = "available"
    library: str | None = None
    library_version: str | None = None
    devices: tuple[str, ...] = ()
    timestamps: bool = True
    detail: str | None = None
    #: How kprof captures device work on this backend now (e.g. ``"CUPTI activity records"``
    #: or ``"CUDA events"``), and why that path (shown by ``kprof backends``).
    capture: str | None = None
    capture_detail: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.status, str):
            raise TypeError(f"BackendInfo.status must be a str, not {type(self.status).__name__}")
        if self.status not in STATUSES and not self.status.startswith("error"):
            raise ValueError(
                f"BackendInfo.status must be one of {', '.join(STATUSES)} or 'error: ...', "
                f"not {self.status!r}"
            )
        # Checked here, so a wrongly typed answer is the plugin's error, not a crash of
        # `kprof backends` (which joins, measures and prints these).
        if not isinstance(self.devices, (list, tuple)) or not all(
            isinstance(d, str) for d in self.devices
        ):
            raise TypeError(f"BackendInfo.devices must be a list of str, not {self.devices!r:.60}")
        for name in ("library", "library_version", "detail"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise TypeError(
                    f"BackendInfo.{name} must be a str or None, not {type(value).__name__}"
                )
        if not isinstance(self.timestamps, bool):
            raise TypeError(
                f"BackendInfo.timestamps must be True or False, not {self.timestamps!r:.30}"
            )
        object.__setattr__(self, "devices", tuple(self.devices))


@dataclass(frozen=True)
class QueueInfo:
    """What ``queue_info`` reports about one queue (stream) of a backend.

    ``device``: the device's name as reports show it; ``label``: the queue's, short
    (``"stream 2"``); ``device_key``: hashable, the same for every queue whose timestamps are
    comparable (one clock), or None to use ``device``.
    """

    device: str
    label: str
    device_key: Any = None

    def key(self) -> Any:
        """What records are grouped by: ``device_key``, or ``device`` when it is None."""
        return self.device if self.device_key is None else self.device_key


def checked_queue_info(info: Any) -> None:
    """Raise ``BadReturn`` unless ``info`` is None or a ``QueueInfo`` every view can show:
    ``device`` and ``label`` str, ``device_key`` hashable (refused once, where it is read,
    rather than failing in each view)."""
    if info is None:
        return
    if not isinstance(info, QueueInfo):
        raise BadReturn(
            f"queue_info returned {type(info).__name__}, expected kprof.plugin.QueueInfo"
        )
    try:
        hash(info.key())
        ok = type(info.device) is str and type(info.label) is str
    except Exception:
        ok = False
    if not ok:
        raise BadReturn(
            f"queue_info returned {info!r:.120}: device and label must be str, device_key hashable"
        )


@dataclass(frozen=True)
class Alignment:
    """Where a device timestamp lies on the host clock (``time.perf_counter_ns``).

    What ``align_clock`` returns: ``host_ns``, the host time at which the device reached the
    token; ``error_ns``, a bound on how far that may be off (reported with the profile);
    ``method``, the correlation's name (``"clGetDeviceAndHostTimer"``).
    """

    host_ns: int
    error_ns: int
    method: str


#: Set on a hook implementation that takes whatever arguments it is given (``*args``), so that
#: kprof calls it as it is rather than through an adapter.
ANY_ARGUMENTS = "kprof_any_arguments"


def _adapt(
    fn: Callable[..., Any], argnames: tuple[str, ...], spec: tuple[str, ...]
) -> Callable[..., Any]:
    """Return a callable taking the spec's arguments positionally.

    pluggy lets an implementation accept a subset of the spec's arguments; the direct call
    must pass exactly those, so we adapt once here rather than on every call.
    """
    if argnames == spec or getattr(fn, ANY_ARGUMENTS, False):
        return fn
    positions = [spec.index(a) for a in argnames]

    def call(*args: Any) -> Any:
        return fn(*[args[i] for i in positions])

    call.__wrapped__ = fn  # type: ignore[attr-defined]
    return call


class Backend:
    """One backend: its name, its plugin, and its hooks as plain callables.

    Plugins receive this object as the ``backend`` argument of every hook. ``state`` is a dict
    the plugin may keep its own data in (pools, patched originals); kprof never reads it.
    Each hook is an attribute holding the plugin's implementation (or the default), called as
    ``backend.elapsed_time(backend, start, stop)``.

    ``name``: the backend's (its entry point's) name; ``plugin``: the plugin object;
    ``distribution``/``version``: the distribution that installed it, if any;
    ``implemented``: the names of the hooks the plugin implements; ``broken``: why kprof
    stopped using it, or None. kprof's own: ``slot`` (the number pending launches carry),
    ``mirrors_ranges`` (it implements ``range_push``), ``has_device_times`` (it implements
    ``device_times``), ``has_batch_times`` (it implements ``device_times_batch`` too),
    ``pools_tokens`` (it implements ``release_timestamp``), ``has_activity`` (it delivers
    activity records: implements ``activity_scope_enter``), ``has_memory`` (it may report
    device memory: implements ``memory_install``).
    """

    # Resolved hook callables, filled in by ``resolve``: one per hookspec, in its order (a test
    # checks these annotations against ``hookspecs.RESOLVED_HOOKS``; mypy needs them written out).
    activity_align: Callable[..., Any]
    activity_flush: Callable[..., Any]
    activity_scope_enter: Callable[..., Any]
    activity_scope_exit: Callable[..., Any]
    capture_modules: Callable[..., Any]
    demo_workload: Callable[..., Any]
    exec_environment: Callable[..., Any]
    launch_config: Callable[..., Any]
    memory_install: Callable[..., Any]
    memory_remove: Callable[..., Any]
    range_pop: Callable[..., Any]
    range_push: Callable[..., Any]
    report_notes: Callable[..., Any]
    describe_backend: Callable[..., Any]
    record_timestamp: Callable[..., Any]
    elapsed_time: Callable[..., Any]
    device_times: Callable[..., Any]
    device_times_batch: Callable[..., Any]
    timestamp_done: Callable[..., Any]
    release_timestamp: Callable[..., Any]
    current_queue: Callable[..., Any]
    queue_info: Callable[..., Any]
    synchronize: Callable[..., Any]
    install_capture: Callable[..., Any]
    remove_capture: Callable[..., Any]
    align_clock: Callable[..., Any]

    def __init__(
        self, name: str, plugin: object, distribution: str | None = None, version: str | None = None
    ) -> None:
        self.name = name
        self.plugin = plugin
        self.distribution = distribution
        self.version = version
        self.state: dict[str, Any] = {}
        self.implemented: frozenset[str] = frozenset()
        #: A number of its own, which pending launch entries carry instead of the object.
        self.slot = next(_slots)
        #: Whether the plugin mirrors ranges (implements ``range_push``): checked per range.
        self.mirrors_ranges = False
        self.has_device_times = False
        self.has_batch_times = False
        #: Whether the plugin delivers activity records (implements ``activity_scope_enter``).
        self.has_activity = False
        self.pools_tokens = False
        #: Whether the plugin may report device memory (implements ``memory_install``).
        self.has_memory = False
        self.broken: str | None = None
        self._info: BackendInfo | None = None

    def __repr__(self) -> str:
        return f"<kprof.plugin.Backend {self.name!r}>"

    # -- resolution -------------------------------------------------------------------------

    def resolve(
        self,
        impls: dict[str, tuple[Callable[..., Any], tuple[str, ...]]],
        defaults: dict[str, tuple[Callable[..., Any], tuple[str, ...]]],
        specs: dict[str, tuple[str, ...]],
    ) -> None:
        """Bind each hook of ``specs`` (hook -> its arguments in order) to this plugin's
        implementation, or to the default one."""
        for hook, spec in specs.items():
            fn, argnames = impls.get(hook) or defaults[hook]
            setattr(self, hook, _adapt(fn, argnames, spec))
        self.implemented = frozenset(impls)
        self.mirrors_ranges = "range_push" in self.implemented
        self.has_device_times = "device_times" in self.implemented
        # The batch reader stands for device_times over many tokens: only with it.
        self.has_batch_times = self.has_device_times and "device_times_batch" in self.implemented
        self.has_activity = "activity_scope_enter" in self.implemented
        self.has_memory = "memory_install" in self.implemented
        # Without release_timestamp there is nothing to give back: skip the call per record.
        self.pools_tokens = "release_timestamp" in self.implemented
        if "record_timestamp" in self.implemented and not self.reads_timestamps:
            warnings.warn(
                f"kprof: backend {self.name!r} ({self.plugin_label}) implements record_timestamp "
                f"but neither elapsed_time nor device_times, so kprof cannot read its "
                f"timestamps: it is timed on the host (implement one of them to time on the "
                f"device)",
                RuntimeWarning,
                stacklevel=2,
            )

    @property
    def reads_timestamps(self) -> bool:
        """Whether the plugin can read its tokens: ``elapsed_time`` or ``device_times``."""
        return "elapsed_time" in self.implemented or self.has_device_times

    @property
    def has_timestamps(self) -> bool:
        """Whether the backend is timed on the device: it puts timestamps
        (``record_timestamp``) and reads them (``elapsed_time`` or ``device_times``)."""
        return "record_timestamp" in self.implemented and self.reads_timestamps

    # -- description -----------------------------------------------------------------------

    def info(self, refresh: bool = False) -> BackendInfo:
        """The plugin's ``describe_backend`` answer; errors become an ``error: ...`` status,
        as does a hook failure that disabled the backend (``broken``)."""
        if self.broken is not None:
            return dataclasses.replace(
                self._info or BackendInfo(), status=f"error: {self.broken}", timestamps=False
            )
        if self._info is not None and not refresh:
            return self._info
        try:
            info = self.describe_backend(self)
            if info is None:
                info = BackendInfo(timestamps=self.has_timestamps)
            elif not isinstance(info, BackendInfo):
                raise TypeError(
                    f"describe_backend returned {type(info).__name__}, expected kprof.plugin.BackendInfo"
                )
            if not self.has_timestamps and info.timestamps:
                info = dataclasses.replace(info, timestamps=False)
        except Exception as exc:  # a broken plugin is reported, never fatal
            info = BackendInfo(status=f"error: {type(exc).__name__}: {exc}", timestamps=False)
            warnings.warn(
                f"kprof: backend {self.name!r} ({self.plugin_label}) failed to describe itself: "
                f"{type(exc).__name__}: {exc}",
                RuntimeWarning,
                stacklevel=2,
            )
        self._info = info
        return info

    @property
    def plugin_label(self) -> str:
        """The plugin as messages name it: its distribution and version, or its module."""
        if self.distribution:
            return f"{self.distribution} {self.version or ''}".strip()
        return getattr(self.plugin, "__name__", type(self.plugin).__name__)

    def disable(self, reason: str) -> None:
        """Stop using this backend for the rest of the process, after a hook misbehaved."""
        with _disable_lock:  # threads may fail at once: one of them warns
            if self.broken is not None:
                return
            self.broken = reason
        warnings.warn(
            f"kprof: backend {self.name!r} ({self.plugin_label}) disabled: {reason}",
            RuntimeWarning,
            stacklevel=3,
        )


class BadReturn(TypeError):
    """A hook returned a value of the wrong type (the message says which and what was expected)."""
