"""Automatic capture of hip-python launches and copies while a profile is active.

The wrappers replace attributes of the ``hip.hip`` module object (in hip-python 10 it *is*
``rocm.bindings.hip``; older versions have only ``hip.hip``), so calls written
``hip.hipModuleLaunchKernel(...)`` are captured. A function imported by name before the
profile started (``from hip.hip import hipModuleLaunchKernel``) is bound to the original
and escapes capture; so do launch entry points not listed in ``KERNEL_ENTRY_POINTS`` and
``COPY_ENTRY_POINTS`` (cooperative launches, ``hipMemcpyHtoD`` and friends, 2D/3D copies).

Each captured call records a pooled event on the stream the call names (not the thread's
current stream) before and after the native call, and hands both to
``Recorder.launch``. A call that returns an error code is returned to the caller unchanged;
nothing is recorded for it (it did no device work; the caller has the error), and its
events go back to the pool.
If kprof's own event record fails where the user's call succeeds, the backend is disabled
(kprof warns once); the user's call runs either way.

Kernel names come from ``hipModuleGetFunction``, which is wrapped too while capture is
installed: every name it hands out is remembered for the life of the process. Functions
obtained before the first profile are named ``kernel@0x...`` unless given a name with
``kprof_hip.name_function``.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Any

import kprof
from kprof import capture

from . import runtime
from .runtime import give_event, kernel_name, record_event, stream_of

KERNEL_ENTRY_POINTS = ("hipModuleLaunchKernel", "hipLaunchKernel", "hipExtLaunchKernel")
COPY_ENTRY_POINTS = ("hipMemcpy", "hipMemcpyAsync", "hipMemset", "hipMemsetAsync")

# hipMemcpyKind values (stable in HIP's ABI) -> record names.
COPY_NAMES = {
    0: "[copy host to host]",
    1: "[copy host to device]",
    2: "[copy device to host]",
    3: "[copy device to device]",
    4: "[copy]",  # hipMemcpyDefault: the runtime infers the direction from the pointers
    1024: "[copy device to device]",  # hipMemcpyDeviceToDeviceNoCU
}
MEMSET_NAME = "[memset]"


def hip_modules() -> list[Any]:
    """The distinct module objects users call HIP through."""
    mods: list[Any] = []
    for name in ("hip.hip", "rocm.bindings.hip"):
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        if all(mod is not m for m in mods):
            mods.append(mod)
    return mods


def _copy_name(kind: Any) -> str:
    try:
        return COPY_NAMES.get(int(kind), "[copy]")
    except (TypeError, ValueError):
        return "[copy]"


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


def make_wrappers(
    backend: kprof.Backend, originals: dict[str, Any]
) -> dict[str, Callable[..., Any]]:
    """Wrappers for the entry points in ``originals`` (name -> native function)."""
    active, now = capture.active, capture.now
    KERNEL, COPY = capture.KERNEL, capture.COPY

    def disable(exc: BaseException) -> None:
        backend.disable(f"capture failed: {type(exc).__name__}: {exc}")

    def run(
        rec: Any,
        kind: int,
        name: str,
        stream: Any,
        nbytes: int,
        call: Callable[..., Any],
        *args: Any,
    ) -> Any:
        """Record events around ``call(*args)`` on ``stream`` and report the launch."""
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
                disable(exc)
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
                disable(exc)
                return result
        if _error_of(result):  # it did no device work: nothing to time, nothing recorded
            _release(start, stop)
            return result
        rec.launch(backend, kind, name, queue, t0, now(), start, stop, nbytes)
        return result

    wrappers: dict[str, Callable[..., Any]] = {}

    def wrap(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            if name in originals:
                wrappers[name] = functools.wraps(originals[name])(fn)
            return fn

        return register

    # The wrappers repeat hip-python's parameter names so keyword calls keep working.

    o_module_launch = _get(originals, "hipModuleLaunchKernel")

    @wrap("hipModuleLaunchKernel")
    def hipModuleLaunchKernel(
        f: Any,
        gridDimX: Any,
        gridDimY: Any,
        gridDimZ: Any,
        blockDimX: Any,
        blockDimY: Any,
        blockDimZ: Any,
        sharedMemBytes: Any,
        stream: Any,
        kernelParams: Any,
        extra: Any,
    ) -> Any:
        rec = active()
        if rec is None or backend.broken is not None:
            return o_module_launch(
                f,
                gridDimX,
                gridDimY,
                gridDimZ,
                blockDimX,
                blockDimY,
                blockDimZ,
                sharedMemBytes,
                stream,
                kernelParams,
                extra,
            )
        return run(
            rec,
            KERNEL,
            kernel_name(f),
            stream,
            -1,
            o_module_launch,
            f,
            gridDimX,
            gridDimY,
            gridDimZ,
            blockDimX,
            blockDimY,
            blockDimZ,
            sharedMemBytes,
            stream,
            kernelParams,
            extra,
        )

    o_launch = _get(originals, "hipLaunchKernel")

    @wrap("hipLaunchKernel")
    def hipLaunchKernel(
        function_address: Any,
        numBlocks: Any,
        dimBlocks: Any,
        args: Any,
        sharedMemBytes: Any,
        stream: Any,
    ) -> Any:
        rec = active()
        if rec is None or backend.broken is not None:
            return o_launch(function_address, numBlocks, dimBlocks, args, sharedMemBytes, stream)
        return run(
            rec,
            KERNEL,
            kernel_name(function_address),
            stream,
            -1,
            o_launch,
            function_address,
            numBlocks,
            dimBlocks,
            args,
            sharedMemBytes,
            stream,
        )

    o_ext_launch = _get(originals, "hipExtLaunchKernel")

    @wrap("hipExtLaunchKernel")
    def hipExtLaunchKernel(
        function_address: Any,
        numBlocks: Any,
        dimBlocks: Any,
        args: Any,
        sharedMemBytes: Any,
        stream: Any,
        startEvent: Any,
        stopEvent: Any,
        flags: Any,
    ) -> Any:
        rec = active()
        if rec is None or backend.broken is not None:
            return o_ext_launch(
                function_address,
                numBlocks,
                dimBlocks,
                args,
                sharedMemBytes,
                stream,
                startEvent,
                stopEvent,
                flags,
            )
        name = kernel_name(function_address)
        if startEvent is not None or stopEvent is not None or not rec.device:
            # The user's own events are left alone: ours go around the call.
            return run(
                rec,
                KERNEL,
                name,
                stream,
                -1,
                o_ext_launch,
                function_address,
                numBlocks,
                dimBlocks,
                args,
                sharedMemBytes,
                stream,
                startEvent,
                stopEvent,
                flags,
            )
        # No events given: the launch records ours, which bracket exactly the kernel.
        t0 = now()
        start = stop = None
        try:
            queue = stream_of(stream)
            start = runtime.take_event()
            stop = runtime.take_event()
        except Exception as exc:
            _release(start, stop)
            disable(exc)
            return o_ext_launch(
                function_address,
                numBlocks,
                dimBlocks,
                args,
                sharedMemBytes,
                stream,
                startEvent,
                stopEvent,
                flags,
            )
        try:
            result = o_ext_launch(
                function_address,
                numBlocks,
                dimBlocks,
                args,
                sharedMemBytes,
                stream,
                start,
                stop,
                flags,
            )
        except BaseException:
            _release(start, stop)
            raise
        if _error_of(result):
            _release(start, stop)
            return result
        rec.launch(backend, KERNEL, name, queue, t0, now(), start, stop, -1)
        return result

    o_memcpy = _get(originals, "hipMemcpy")

    @wrap("hipMemcpy")
    def hipMemcpy(dst: Any, src: Any, sizeBytes: Any, kind: Any) -> Any:
        rec = active()
        if rec is None or backend.broken is not None:
            return o_memcpy(dst, src, sizeBytes, kind)
        # A synchronous copy runs on the NULL stream.
        return run(
            rec,
            COPY,
            _copy_name(kind),
            None,
            _nbytes(sizeBytes),
            o_memcpy,
            dst,
            src,
            sizeBytes,
            kind,
        )

    o_memcpy_async = _get(originals, "hipMemcpyAsync")

    @wrap("hipMemcpyAsync")
    def hipMemcpyAsync(dst: Any, src: Any, sizeBytes: Any, kind: Any, stream: Any) -> Any:
        rec = active()
        if rec is None or backend.broken is not None:
            return o_memcpy_async(dst, src, sizeBytes, kind, stream)
        return run(
            rec,
            COPY,
            _copy_name(kind),
            stream,
            _nbytes(sizeBytes),
            o_memcpy_async,
            dst,
            src,
            sizeBytes,
            kind,
            stream,
        )

    o_memset = _get(originals, "hipMemset")

    @wrap("hipMemset")
    def hipMemset(dst: Any, value: Any, sizeBytes: Any) -> Any:
        rec = active()
        if rec is None or backend.broken is not None:
            return o_memset(dst, value, sizeBytes)
        return run(
            rec, COPY, MEMSET_NAME, None, _nbytes(sizeBytes), o_memset, dst, value, sizeBytes
        )

    o_memset_async = _get(originals, "hipMemsetAsync")

    @wrap("hipMemsetAsync")
    def hipMemsetAsync(dst: Any, value: Any, sizeBytes: Any, stream: Any) -> Any:
        rec = active()
        if rec is None or backend.broken is not None:
            return o_memset_async(dst, value, sizeBytes, stream)
        return run(
            rec,
            COPY,
            MEMSET_NAME,
            stream,
            _nbytes(sizeBytes),
            o_memset_async,
            dst,
            value,
            sizeBytes,
            stream,
        )

    o_get_function = _get(originals, "hipModuleGetFunction")

    @wrap("hipModuleGetFunction")
    def hipModuleGetFunction(module: Any, kname: Any) -> Any:
        # Not a launch: it only learns names, in every context, while capture is installed.
        result = o_get_function(module, kname)
        if type(result) is tuple and len(result) == 2 and not result[0] and result[1] is not None:
            try:
                name = (
                    bytes(kname).decode("utf-8", "replace")
                    if isinstance(kname, (bytes, bytearray))
                    else str(kname)
                )
                runtime.names[runtime.address(result[1])] = name
            except Exception:  # naming is best effort; the user's result is what matters
                pass
        return result

    return wrappers


def install(backend: kprof.Backend) -> None:
    """Patch every entry point present on every hip-python module object."""
    patcher = backend.state["patcher"] = capture.Patcher()
    for mod in hip_modules():
        originals = {
            n: getattr(mod, n)
            for n in (*KERNEL_ENTRY_POINTS, *COPY_ENTRY_POINTS, "hipModuleGetFunction")
            if hasattr(mod, n)
        }
        for name, wrapper in make_wrappers(backend, originals).items():
            patcher.patch(mod, name, wrapper)


def remove(backend: kprof.Backend) -> list[str]:
    """Restore the originals; returns attributes someone else had replaced meanwhile."""
    patcher = backend.state.pop("patcher", None)
    return patcher.restore() if patcher is not None else []
