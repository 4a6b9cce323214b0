"""What every HIP capture wrapper shares: the entry points, record names, result helpers, and
``make_run``, the timing of one launch between two pooled events (``capture.py`` says how)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from kprof import plugin as kp

from .runtime import give_event, record_event, stream_of

KERNEL_ENTRY_POINTS = ("hipModuleLaunchKernel", "hipLaunchKernel", "hipExtLaunchKernel")
COPY_ENTRY_POINTS = ("hipMemcpy", "hipMemcpyAsync", "hipMemset", "hipMemsetAsync")

# hipMemcpyKind values (stable in HIP's ABI) -> record names.
COPY_NAMES = {
    0: kp.RowNames.HOST_TO_HOST,
    1: kp.RowNames.HOST_TO_DEVICE,
    2: kp.RowNames.DEVICE_TO_HOST,
    3: kp.RowNames.DEVICE_TO_DEVICE,
    4: kp.RowNames.ANY_DIRECTION,  # hipMemcpyDefault: the runtime infers the direction
    1024: kp.RowNames.DEVICE_TO_DEVICE,  # hipMemcpyDeviceToDeviceNoCU
}
MEMSET_NAME = kp.RowNames.MEMSET


def _copy_name(kind: Any) -> str:
    try:
        return COPY_NAMES.get(int(kind), kp.RowNames.ANY_DIRECTION)
    except (TypeError, ValueError):
        return kp.RowNames.ANY_DIRECTION


def _nbytes(n: Any) -> int:
    try:
        return int(n)
    except (TypeError, ValueError):
        return -1


def _error_of(result: Any) -> Any:
    """The error code of a hip-python result tuple (0 when it is not one)."""
    return result[0] if type(result) is tuple and result else 0


def _get(originals: dict[str, Any], name: str) -> Any:
    return originals.get(name)


def _release(*events: Any) -> None:
    for ev in events:
        if ev is not None:
            give_event(ev)


#: ``run(rec, kind, name, stream, nbytes, call, *args, config=None)``: a launch timed and
#: reported.
Run = Callable[..., Any]
#: ``wrap(name)``: a decorator that registers a wrapper for the entry point ``name``.
Wrap = Callable[[str], Callable[[Callable[..., Any]], Callable[..., Any]]]


def capture_failed(backend: kp.Backend, exc: BaseException) -> None:
    """kprof's own part of a capture failed where the user's call worked: stop capturing."""
    backend.disable(f"capture failed: {type(exc).__name__}: {exc}")


def make_run(backend: kp.Backend) -> Run:
    """The function every wrapper calls inside a profile (see ``Run``)."""
    now = kp.now

    def run(
        rec: Any,
        kind: int,
        name: str,
        stream: Any,
        nbytes: int,
        call: Callable[..., Any],
        *args: Any,
        config: Any = None,
    ) -> Any:
        """Record events around ``call(*args)`` on ``stream`` and report the launch (with its
        launch configuration, ``config``: ``(grid, block)`` as tuples, for kernels)."""
        t0 = now()
        start = None
        try:
            queue = stream_of(stream)
            if rec.device:
                start = record_event(stream)
        except Exception as exc:  # kprof's own failure must not cost the user's launch
            _release(start)
            result = call(*args)
            # A bad stream fails our event and the launch alike: the user's error, theirs to
            # see. Only an event failing where the launch works is kprof's: stop capturing.
            if not _error_of(result):
                capture_failed(backend, exc)
            return result
        try:
            result = call(*args)
        except BaseException:
            _release(start)
            raise
        stop = None
        if start is not None:
            try:
                stop = record_event(stream)
            except Exception as exc:
                _release(start)
                capture_failed(backend, exc)
                return result
        if _error_of(result):  # it did no device work: nothing to time, nothing recorded
            _release(start, stop)
            return result
        rec.launch(backend, kind, name, queue, t0, now(), start, stop, nbytes, config)
        return result

    return run


def registrar(originals: dict[str, Any], wrappers: dict[str, Callable[..., Any]]) -> Wrap:
    """A ``Wrap`` that fills ``wrappers`` for the entry points present in ``originals``."""

    def wrap(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            if name in originals:
                wrappers[name] = functools.wraps(originals[name])(fn)
            return fn

        return register

    return wrap
