"""The wrappers of HIP's kernel launches (and of ``hipModuleGetFunction``, which names kernels)."""

from __future__ import annotations

from typing import Any

from kprof import plugin as kp

from . import runtime
from .runtime import kernel_name, stream_of
from .wrapping import Run, Wrap, _error_of, _get, _release, capture_failed


def dim(v: Any) -> Any:
    """A grid or block size as a hashable ``(x, y, z)``: hip-python's ``dim3`` (or anything
    with ``x``, ``y``, ``z``), an int, or a tuple as it is."""
    if type(v) is tuple:
        return v
    if type(v) is int:
        return (v, 1, 1)
    try:
        return (v.x, v.y, v.z)
    except AttributeError:
        return repr(v)


def kernel_wrappers(backend: kp.Backend, originals: dict[str, Any], run: Run, wrap: Wrap) -> None:
    """Register, through ``wrap``, a wrapper for each kernel entry point in ``originals``."""
    active, now, KERNEL = kp.active, kp.now, kp.KERNEL

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
            config=((gridDimX, gridDimY, gridDimZ), (blockDimX, blockDimY, blockDimZ)),
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
            config=(dim(numBlocks), dim(dimBlocks)),
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
                config=(dim(numBlocks), dim(dimBlocks)),
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
            capture_failed(backend, exc)
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
        config = (dim(numBlocks), dim(dimBlocks))
        rec.launch(backend, KERNEL, name, queue, t0, now(), start, stop, -1, config)
        return result

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
