"""The wrappers of HIP's copies and memsets."""

from __future__ import annotations

from typing import Any

from kprof import plugin as kp

from .wrapping import MEMSET_NAME, Run, Wrap, _copy_name, _get, _nbytes


def copy_wrappers(backend: kp.Backend, originals: dict[str, Any], run: Run, wrap: Wrap) -> None:
    """Register, through ``wrap``, a wrapper for each copy entry point in ``originals``."""
    active, COPY = kp.active, kp.COPY

    # The wrappers repeat hip-python's parameter names so keyword calls keep working.

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
