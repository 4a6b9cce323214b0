"""The CuPy calls the CUDA plugin makes, bound once; and describing CuPy without importing it.

:class:`CupyApi` is the only place the plugin touches CuPy's runtime. Its attributes are the
bound functions themselves (not methods wrapping them), so the launch path pays no extra call;
tests substitute an object with the same attributes (see ``tests/test_cuda_fake.py``).

:func:`describe` answers ``describe_backend`` through ``cupy_backends`` (CuPy's own low-level
bindings, ~20 ms to import) rather than ``import cupy`` (~250 ms). That also keeps
``'cupy' in sys.modules`` meaning "the user's program imported CuPy", which is how the plugin
decides whether a thread uses CUDA at all.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from contextlib import AbstractContextManager
from importlib import metadata
from typing import Any

from kprof import plugin as kp

__all__ = ["LEGACY_STREAMS", "PER_THREAD_STREAM", "CupyApi", "cupy_version", "describe"]

#: ``cudaStreamPerThread``: each thread's own default stream, though the handle is the same.
PER_THREAD_STREAM = 2
#: The NULL stream (CuPy's ``Stream.null``) and ``cudaStreamLegacy``: one per device.
LEGACY_STREAMS = (0, 1)
#: ``cudaErrorNotReady``: what ``cudaEventQuery`` says while the event is pending.
NOT_READY = 600

# Distributions that provide the ``cupy`` package, most likely first.
_DISTRIBUTIONS = ("cupy-cuda12x", "cupy-cuda13x", "cupy-cuda11x", "cupy")


class CupyApi:
    """The CuPy functions the plugin calls (import CuPy to build one)."""

    def __init__(self) -> None:
        import cupy
        from cupy.cuda import runtime

        self.cupy = cupy
        self.runtime = runtime
        #: ``() -> int``: the calling thread's current device.
        self.get_device = runtime.getDevice
        #: ``(device_id) -> Stream``: the calling thread's current stream on that device.
        self.current_stream = cupy.cuda.get_current_stream
        #: ``(event_ptr, stream_ptr)``: what ``Event.record(stream)`` calls, without its frame.
        self.event_record = runtime.eventRecord
        #: ``(event_ptr) -> status``: 0 when done, ``NOT_READY`` while pending (never raises);
        #: ``Event.done`` is ``eventQuery(ptr) == 0``.
        self.event_query = runtime.eventQuery
        #: ``(start, stop) -> float`` milliseconds, from objects with a ``ptr``.
        self.get_elapsed_time = cupy.cuda.get_elapsed_time
        #: The error CuPy raises, built from a status code.
        self.error = runtime.CUDARuntimeError
        #: ``() -> int``: the calling thread's current CUDA context (CUPTI's stream ids need it).
        self.current_context = cupy.cuda.driver.ctxGetCurrent

    def new_event(self, device: int) -> Any:
        """A timing event created on ``device`` (events belong to their device)."""
        with self.cupy.cuda.Device(device):
            return self.cupy.cuda.Event()

    def new_stream(self, device: int) -> Any:
        """A private stream on ``device`` that does not wait for the user's work."""
        with self.cupy.cuda.Device(device):
            return self.cupy.cuda.Stream(non_blocking=True)

    def using_device(self, device: int) -> AbstractContextManager[Any]:
        ctx: AbstractContextManager[Any] = self.cupy.cuda.Device(device)
        return ctx

    def synchronize_device(self, device: int) -> None:
        """Wait until ``device`` finished the work queued on it (``cudaDeviceSynchronize``)."""
        with self.cupy.cuda.Device(device):
            self.runtime.deviceSynchronize()

    def device_name(self, device: int) -> str:
        name = self.runtime.getDeviceProperties(device)["name"]
        return name.decode(errors="replace") if isinstance(name, bytes) else str(name)


def cupy_version() -> str | None:
    """CuPy's version, without importing CuPy."""
    mod = sys.modules.get("cupy")
    if mod is not None and isinstance(getattr(mod, "__version__", None), str):
        return str(mod.__version__)
    for dist in _DISTRIBUTIONS:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    # Built from source under another name: read the version file CuPy ships.
    try:
        spec = importlib.util.find_spec("cupy")
        for where in (spec.submodule_search_locations or []) if spec else []:
            with open(f"{where}/_version.py", encoding="utf-8") as f:
                m = re.search(r"__version__\s*=\s*['\"]([^'\"]+)", f.read())
            if m:
                return m.group(1)
    except (OSError, ImportError, ValueError):
        pass
    return None


def _cuda_version(v: int) -> str:
    return f"{v // 1000}.{v % 1000 // 10}"


def describe() -> kp.BackendInfo:
    """What ``describe_backend`` reports: never raises, never imports ``cupy`` itself."""
    try:
        spec = importlib.util.find_spec("cupy")
    except (ImportError, ValueError):  # a broken or blocked ``cupy`` in sys.modules
        spec = None
    if spec is None:
        return kp.BackendInfo(
            status="not installed",
            library="cupy",
            timestamps=True,
            detail="CuPy is not installed: pip install 'kprof[cuda]' "
            "(cupy-cuda12x) or 'kprof[cuda13]' (cupy-cuda13x)",
        )
    version = cupy_version()
    try:
        from cupy_backends.cuda.api import runtime
    except Exception as exc:
        return kp.BackendInfo(
            status=f"error: CuPy {version or ''} is installed but its CUDA bindings fail to "
            f"import: {type(exc).__name__}: {exc}".replace("  ", " "),
            library="cupy",
            library_version=version,
            timestamps=True,
        )
    try:
        count = runtime.getDeviceCount()
    except runtime.CUDARuntimeError as exc:
        # cudaErrorInsufficientDriver (no driver, or one too old), cudaErrorNoDevice, ...
        return kp.BackendInfo(
            status="no device",
            library="cupy",
            library_version=version,
            timestamps=True,
            detail=str(exc),
        )
    except Exception as exc:
        return kp.BackendInfo(
            status=f"error: {type(exc).__name__}: {exc}",
            library="cupy",
            library_version=version,
            timestamps=True,
        )
    if count == 0:
        return kp.BackendInfo(
            status="no device",
            library="cupy",
            library_version=version,
            timestamps=True,
            detail="cudaErrorNoDevice: no CUDA-capable device is detected",
        )
    devices = []
    for i in range(count):
        try:
            name = runtime.getDeviceProperties(i)["name"]
            name = name.decode(errors="replace") if isinstance(name, bytes) else str(name)
        except Exception as exc:  # one unreadable device must not hide the others
            name = f"unreadable: {exc}"
        devices.append(f"CUDA {i} ({name})")
    detail = None
    try:
        detail = (
            f"CUDA runtime {_cuda_version(runtime.runtimeGetVersion())}, "
            f"driver {_cuda_version(runtime.driverGetVersion())}"
        )
    except Exception:
        pass
    return kp.BackendInfo(
        status="available",
        library="cupy",
        library_version=version,
        devices=tuple(devices),
        timestamps=True,
        detail=detail,
    )
