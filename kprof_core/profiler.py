"""``kprof.profile()``: the entry point that starts capture and yields a ``Profile``."""

from __future__ import annotations

import functools
import os
import threading
import warnings
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from .backend import Backend, KprofError
from .plugins import registry
from .recorder import _ACTIVE, Recorder, now
from .session import Profile

F = TypeVar("F", bound=Callable[..., Any])

ENV_TIMEOUT = "KPROF_RESOLVE_TIMEOUT"
DEFAULT_TIMEOUT = 60.0

# Capture is installed while any profile is active, anywhere in the process.
_capture_lock = threading.Lock()
_capture_users = 0
_captured: list[Backend] = []


def resolve_timeout(value: float | None) -> float:
    if value is None:
        raw = os.environ.get(ENV_TIMEOUT)
        if raw is None or not raw.strip():
            return DEFAULT_TIMEOUT
        try:
            value = float(raw)
        except ValueError:
            raise KprofError(
                f"{ENV_TIMEOUT}={raw!r} is not a number of seconds; set it to a positive number "
                f"such as 30, or unset it for the default ({DEFAULT_TIMEOUT:g} s)"
            ) from None
        source = ENV_TIMEOUT
    else:
        source = "timeout"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{source} must be a number of seconds, not {type(value).__name__}")
    if not value > 0:
        raise ValueError(f"{source} must be a positive number of seconds, not {value!r}")
    return float(value)


def _install(backends: list[Backend]) -> None:
    global _capture_users
    with _capture_lock:
        _capture_users += 1
        if _capture_users > 1:
            return
        for b in backends:
            try:
                b.install_capture(b)
                _captured.append(b)
            except Exception as exc:
                b.disable(f"install_capture raised {type(exc).__name__}: {exc}")
                try:
                    b.remove_capture(b)
                except Exception:
                    pass


def _uninstall() -> None:
    global _capture_users
    with _capture_lock:
        _capture_users -= 1
        if _capture_users > 0:
            return
        while _captured:
            b = _captured.pop()
            try:
                b.remove_capture(b)
            except Exception as exc:
                warnings.warn(
                    f"kprof: backend {b.name!r} ({b.plugin_label}) failed to remove its capture: "
                    f"{type(exc).__name__}: {exc}",
                    RuntimeWarning,
                    stacklevel=3,
                )


def capture_installed() -> bool:
    """Whether automatic capture is installed right now (some profile is active)."""
    return _capture_users > 0


class profile:
    """Profile the code in a ``with`` block (or a decorated function).

    ``device``: time work on the device with timestamps (default). With ``False`` only host
    records are kept. ``trace``: print a chronological trace after the summary.
    ``synchronize``: synchronize after every launch (for debugging; perturbs what it measures).
    ``backends``: names of the backends to use (default: every available one).
    ``timeout``: how long, in seconds, to wait for one timestamp when resolving (default 60,
    or ``KPROF_RESOLVE_TIMEOUT``); past it the record is marked unresolved.

    Only the context that entered the profile is recorded: code it calls, asyncio tasks it
    creates, and threads that run their target through ``kprof.propagate``.
    """

    def __init__(self, device: bool = True, trace: bool = False, synchronize: bool = False,
                 backends: Iterable[str] | None = None, timeout: float | None = None) -> None:
        for arg, value in (("device", device), ("trace", trace), ("synchronize", synchronize)):
            if not isinstance(value, bool):
                raise TypeError(f"profile({arg}=...) must be True or False, not {value!r}")
        if isinstance(backends, str):
            backends = [backends]
        self._backend_names = None if backends is None else list(backends)
        if self._backend_names is not None:
            for n in self._backend_names:
                if not isinstance(n, str):
                    raise TypeError(f"backends must be names (str), not {type(n).__name__}")
        self.device = device
        self.trace = trace
        self.synchronize = synchronize
        self.timeout = resolve_timeout(timeout)
        self._token: Any = None
        self._recorder: Recorder | None = None
        self.result: Profile | None = None

    def __enter__(self) -> Profile:
        if self._recorder is not None:
            raise RuntimeError("this kprof.profile() is already active; create a new one to nest")
        backends = registry.usable(self._backend_names)
        parent = _ACTIVE.get()
        rec = Recorder(backends, device=self.device, synchronize=self.synchronize,
                       timeout=self.timeout, parent=parent)
        result = Profile(trace=self.trace, backends=[b.name for b in backends])
        self._recorder, self.result = rec, result
        _install(backends)
        result.start_ns = now()
        self._token = _ACTIVE.set(rec)
        return result

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        rec, result = self._recorder, self.result
        assert rec is not None and result is not None
        result.end_ns = now()
        try:
            _ACTIVE.reset(self._token)
        except ValueError:
            # Exited in another context than it entered (a generator, a callback); restore
            # what was active around it rather than failing the user's code.
            _ACTIVE.set(rec.parent)
        try:
            rec.finish()
        except BaseException:
            rec.abandon()
            raise
        finally:
            _uninstall()
            result._load(rec)
            self._recorder = None
        if rec.parent is not None:
            rec.parent.absorb(rec)

    def __call__(self, fn: F) -> F:
        if not callable(fn):
            raise TypeError(f"kprof.profile() decorates a callable, not {type(fn).__name__}")

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with profile(self.device, self.trace, self.synchronize, self._backend_names,
                         self.timeout) as p:
                try:
                    return fn(*args, **kwargs)
                finally:
                    wrapper.last_profile = p  # type: ignore[attr-defined]

        return wrapper  # type: ignore[return-value]
