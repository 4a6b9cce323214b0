"""kprof backend plugin 'hip': AMD GPUs through hip-python, timed with pooled ``hipEvent``s.

Importing this module does not import hip-python: hip-python 10 fixes where it loads
``libamdhip64.so`` from at its first call, so nothing here touches it before kprof asks
(``describe_backend``, when a profile starts or ``kprof backends`` runs).

Clocks: ``align_clock`` returns None. HIP has no documented call that maps an event's
device time to host time (events give only differences, ``hipEventElapsedTime``), so kprof
assumes the first work on each device started at its launch, and says so in the report.
"""

from __future__ import annotations

import importlib.metadata
import os
import warnings
from typing import Any

from kprof import plugin as kp

from . import runtime
from .runtime import HipError, Stream, check

LIBRARY = "hip-python"


def _library_version() -> str | None:
    for dist in ("hip-python", "rocm-bindings-hip"):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _runtime_not_found(exc: BaseException) -> str:
    rocm = os.environ.get("ROCM_PATH") or os.environ.get("ROCM_HOME")
    where = f"ROCM_PATH={rocm}" if rocm else "ROCM_PATH is unset, so /opt/rocm"
    return (
        f"the HIP runtime (libamdhip64.so) was not found ({where}; LD_LIBRARY_PATH also "
        f"searched). Install ROCm, or set ROCM_PATH to the directory whose lib/ holds "
        f"libamdhip64.so before the first HIP call of the process. hip-python said: {exc}"
    )


def _version_text(v: int) -> str:
    # HIP_VERSION = major * 10_000_000 + minor * 100_000 + patch
    return f"{v // 10_000_000}.{v // 100_000 % 100}.{v % 100_000}"


@kp.hookimpl
def describe_backend(backend: kp.Backend) -> kp.BackendInfo:
    version = _library_version()
    try:
        hip = runtime.lib()
    except ImportError as exc:
        return kp.BackendInfo(
            status="not installed",
            library=LIBRARY,
            library_version=None,
            detail=f"hip-python is not installed ({exc}): pip install 'kprof[hip]'",
        )
    try:
        err, count = hip.hipGetDeviceCount()
    except RuntimeError as exc:  # hip-python raises when it cannot dlopen/dlsym the runtime
        if "dlopen" in str(exc):
            return kp.BackendInfo(
                status="no device",
                library=LIBRARY,
                library_version=version,
                detail=_runtime_not_found(exc),
            )
        return kp.BackendInfo(
            status=f"error: {exc}", library=LIBRARY, library_version=version, timestamps=False
        )
    if err or count <= 0:
        reason = str(HipError("hipGetDeviceCount", err)) if err else "hipGetDeviceCount: 0"
        status = "no device" if err in (0, 100) else f"error: {reason}"  # 100: hipErrorNoDevice
        return kp.BackendInfo(
            status=status, library=LIBRARY, library_version=version, detail=reason
        )
    runtime.device_count = count
    details = []
    try:
        details.append(
            f"HIP runtime {_version_text(check('hipRuntimeGetVersion', hip.hipRuntimeGetVersion())[1])}"
        )
    except Exception as exc:
        details.append(f"HIP runtime version unknown ({exc})")
    path = runtime.loaded_library()
    if path:
        details.append(path)
    devices = []
    for i in range(count):
        try:
            devices.append(f"HIP {i} ({runtime.device_name(i)})")
        except Exception as exc:
            devices.append(f"HIP {i} (name unknown: {exc})")
    return kp.BackendInfo(
        library=LIBRARY, library_version=version, devices=tuple(devices), detail=", ".join(details)
    )


@kp.hookimpl
def record_timestamp(backend: kp.Backend) -> Any:
    stream = runtime.current_stream()
    if stream is None:
        return None
    return runtime.record_event(stream.handle)


@kp.hookimpl
def timestamp_done(backend: kp.Backend, token: Any) -> bool:
    return runtime.event_done(token)


@kp.hookimpl
def elapsed_time(backend: kp.Backend, start: Any, stop: Any) -> int:
    return runtime.elapsed_ns(start, stop)


@kp.hookimpl
def release_timestamp(backend: kp.Backend, token: Any) -> None:
    runtime.give_event(token)


@kp.hookimpl
def current_queue(backend: kp.Backend) -> Any:
    return runtime.current_stream()


@kp.hookimpl
def queue_info(backend: kp.Backend, queue: Stream) -> kp.QueueInfo:
    try:
        name = runtime.device_name(queue.device)
    except Exception:
        name = "name unknown"
    return kp.QueueInfo(
        device=f"HIP {queue.device} ({name})", label=queue.label, device_key=queue.device
    )


@kp.hookimpl
def launch_config(backend: kp.Backend, config: Any) -> str | None:
    """``(grid, block)`` (``kernels.py``) as reports show it: ``"grid 4x1x1 block 256x1x1"``."""
    if type(config) is not tuple or len(config) != 2:
        return None
    return " ".join(
        f"{what} " + ("x".join(map(str, d)) if type(d) is tuple else str(d))
        for what, d in zip(("grid", "block"), config)
    )


@kp.hookimpl
def synchronize(backend: kp.Backend, queue: Stream | None) -> None:
    stream = queue if queue is not None else runtime.current_stream()
    handle = stream.handle if stream is not None else None
    check("hipStreamSynchronize", runtime.lib().hipStreamSynchronize(handle))


@kp.hookimpl
def align_clock(backend: kp.Backend, token: Any, launch_window: tuple[int, int]) -> None:
    # No real correlation exists in HIP's API (see the module docstring). The test double's
    # device clock happens to be CLOCK_MONOTONIC, a real GPU's is not: no special case.
    return None


@kp.hookimpl
def capture_modules(backend: kp.Backend) -> list[str]:
    return ["hip", "rocm"]  # hip-python: ``from hip import hip``, ``rocm.bindings.hip``


@kp.hookimpl
def install_capture(backend: kp.Backend) -> None:
    from . import capture

    capture.install(backend)


@kp.hookimpl
def remove_capture(backend: kp.Backend) -> None:
    from . import capture

    conflicts = capture.remove(backend)
    if conflicts:
        warnings.warn(
            f"kprof: hip capture left {', '.join(conflicts)} alone: they were replaced by "
            f"someone else while kprof was capturing",
            RuntimeWarning,
            stacklevel=2,
        )


@kp.hookimpl
def memory_install(backend: kp.Backend) -> bool:
    from . import memory

    return memory.install(backend)


@kp.hookimpl
def memory_remove(backend: kp.Backend) -> None:
    from . import memory

    memory.remove(backend)
