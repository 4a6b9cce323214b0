"""What users put in their code: ``kprof.range``, ``kprof.kernel``, ``kprof.annotate``,
``kprof.mark``, ``kprof.propagate``.

Each costs one context-variable lookup outside a profile.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import math
import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from kprof_core.data.records import APPROXIMATE, HOST_TIMED
from kprof_core.data.values import VALUE_LIMIT
from kprof_core.low_level import native
from kprof_core.low_level.layout import ENTRY_HOST_RANGE
from kprof_core.recording import activity
from kprof_core.recording.recorder import KERNEL, RANGE, active, now
from kprof_core.recording.threads import who
from kprof_core.recording.throughput import BY_NAME

F = TypeVar("F", bound=Callable[..., Any])


def _check_name(name: object, what: str) -> str:
    if not isinstance(name, str):
        raise TypeError(f"{what} name must be a str, not {type(name).__name__}")
    if not name:
        raise ValueError(f"{what} name must not be empty")
    return name


_OUTSIDE = ("outside a profile",)


class _RangeSlots:
    """What a range object holds, where the compiled recorder is not loaded (there
    ``_crecorder.RangeBase`` holds the same in C, checks the same arguments, and does the
    common case of ``__enter__``/``__exit__`` in C: see ``_range.c``)."""

    __slots__ = ("_more", "_top", "flops", "name", "nbytes")

    def __init__(self, name: str, flops: int | None = None, bytes: int | None = None) -> None:
        self.name = _check_name(name, "range")
        # The innermost entry not yet exited: None, _OUTSIDE (entered outside a profile) or
        # its frame. An object entered again before it exited (a shared range object) keeps
        # the outer entries in _more and records them all, innermost exit first.
        self._top: Any = None
        self._more: list[Any] | None = None
        # What the user said the range's work computes and moves (-1: not said).
        self.flops = -1 if flops is None else said(flops, "flops", "kprof.range")
        self.nbytes = -1 if bytes is None else said(bytes, "bytes", "kprof.range")


def _range_bind(mod: Any, clock: Callable[[], int]) -> None:
    """Tell the compiled range what it needs of this module (``clock``: the host clock)."""
    mod.range_bind(
        active,
        clock,
        _OUTSIDE,
        RANGE,
        ENTRY_HOST_RANGE,
        APPROXIMATE,
        HOST_TIMED,
        said,
        range._enter_py,
        range._exit_py,
    )


def _range_base() -> type[_RangeSlots]:
    mod = native.loaded()
    if mod is None:
        return _RangeSlots
    base: type[_RangeSlots] = mod.RangeBase
    return base


if TYPE_CHECKING:
    _RangeBase = _RangeSlots
else:
    _RangeBase = _range_base()


class range(_RangeBase):  # the public name mirrors KernelAbstractions' ranges
    """A named range: host time always, device time on backends with a current queue.

    Use as ``with kprof.range("step"):`` or as a decorator ``@kprof.range("step")``. On each
    backend where the calling thread has a current queue, timestamps are put on that queue at
    entry and exit, so the range's device time is that of the work enqueued inside it.
    ``flops`` and ``bytes``: what that work computes and moves, per entry (ints); the
    summary's device-range rows then show GFLOP/s and bytes per second over its device time.
    """

    __slots__ = ()

    # The Python path: the whole of it where the compiled recorder is not loaded, and every
    # case but the common one where it is (RangeBase's C methods call these).

    def _enter_py(self) -> range:
        rec = active()
        if self._top is not None:
            if self._more is None:
                self._more = []
            self._more.append(self._top)
            if rec is not None:
                rec.reentered(self.name)
        if rec is None:
            self._top = _OUTSIDE
            return self
        # The host range starts before the timestamps are put and ends after them (in
        # device_range_end): it encloses them, however long a backend takes to enqueue one,
        # and no device work of the range can start before it (placement relies on it).
        t0 = now()
        begun = rec.device_range_begin(self.name)
        # The frame is registered with the recorder (inline: this runs per range), so that a
        # profile ending while the range is open records it rather than dropping it.
        frame = (self.name, t0, begun, who(), rec)
        rec._open_ranges[id(frame)] = frame
        self._top = frame
        return self

    def _exit_py(self, *exc: object) -> None:
        frame = self._top
        if frame is None:
            return
        self._top = self._more.pop() if self._more else None
        if frame is _OUTSIDE:
            return
        name, t0, begun, thread, rec = frame
        if rec._open_ranges.pop(id(frame), None) is None:
            rec.cut_range_exits(frame)  # its profile ended first and recorded it
            return
        if rec._forked_ranges and (since := rec._forked_ranges.pop(id(frame), None)) is not None:
            # Entered before an os.fork() and exited in the child: the child's part of it,
            # from the fork, on the host (its timestamps are the parent's); the vendor
            # tool's range is popped all the same (Recorder._after_fork_in_child).
            rec.cut_range_exits(frame)
            rec.host_range(name, since, now(), thread)
            return
        if begun:  # the host side travels with the device entries (WITH_HOST)
            rec.device_range_end(name, RANGE, begun, t0, self.nbytes, self.flops, thread, True)
        else:
            rec.host_range(name, t0, now(), thread)

    if native.loaded() is None:
        __enter__ = _enter_py
        __exit__ = _exit_py

    def __call__(self, fn: F) -> F:
        name, flops, nbytes = self.name, self.flops, self.nbytes
        return around(
            fn,
            lambda: range(name, None if flops < 0 else flops, None if nbytes < 0 else nbytes),
            "kprof.range",
        )


def around(
    fn: F,
    block: Callable[[], Any],
    what: str,
    keep: Callable[[Any, Any], None] | None = None,
) -> F:
    """``fn`` wrapped so that each call's execution runs inside ``block()`` (a context
    manager); ``keep(wrapper, entered)`` is called as it ends (``profile`` keeps its result).

    A coroutine function's execution is its awaiting, a generator function's is its
    iteration: timing the call alone would time only the object's creation (67 µs for a
    coroutine awaiting 50 ms), so those get an ``async def`` or generator wrapper that holds
    the block open until they finish. Async generator functions are refused: a wrapper could
    not pass ``asend``/``athrow`` through faithfully.
    """
    if not callable(fn):
        raise TypeError(f"{what} decorates a callable, not {type(fn).__name__}")
    if inspect.isasyncgenfunction(fn):
        raise TypeError(
            f"{what} cannot decorate the async generator function "
            f"{getattr(fn, '__qualname__', fn)!r}: the time of an async generator is "
            f"spread over its consumer's loop; put a `with {what}(...):` block inside it"
        )
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def awaited(*args: Any, **kwargs: Any) -> Any:
            with block() as entered:
                try:
                    return await fn(*args, **kwargs)
                finally:
                    if keep is not None:
                        keep(awaited, entered)

        return awaited  # type: ignore[return-value]
    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def iterated(*args: Any, **kwargs: Any) -> Any:
            with block() as entered:
                try:
                    return (yield from fn(*args, **kwargs))
                finally:
                    if keep is not None:
                        keep(iterated, entered)

        return iterated  # type: ignore[return-value]

    @functools.wraps(fn)
    def called(*args: Any, **kwargs: Any) -> Any:
        with block() as entered:
            try:
                return fn(*args, **kwargs)
            finally:
                if keep is not None:
                    keep(called, entered)

    return called  # type: ignore[return-value]


def kernel(fn: Callable[..., Any], name: str | None = None) -> Callable[..., Any]:
    """Wrap a callable so each call is timed as one named device entry (a kernel).

    For work no plugin captures automatically (a CuPy ``RawKernel``, a library call): device
    timestamps on the calling thread's current queue of each backend around the call; on a
    backend without timestamps, or with no queue at all, the call is synchronized and timed on
    the host (marked ``*``). Outside a profile the wrapper just calls ``fn``.
    """
    if not callable(fn):
        raise TypeError(f"kprof.kernel wraps a callable, not {type(fn).__name__}")
    label = (
        _check_name(name, "kernel")
        if name is not None
        else (getattr(fn, "__name__", None) or getattr(fn, "name", None) or type(fn).__name__)
    )

    @functools.wraps(fn)
    def timed(*args: Any, **kwargs: Any) -> Any:
        rec = active()
        if rec is None:
            return fn(*args, **kwargs)
        t0 = now()  # before the timestamps: the launch window encloses them (see range)
        forks = rec.ranges.forks
        begun = rec.device_range_begin(label)
        try:
            return fn(*args, **kwargs)
        finally:
            # The device row carries the host call too (as a launch), so no host range here.
            if rec.ranges.forks != forks:
                # The call forked, and this is the child: its start timestamp is the
                # parent's, on a device the child does not drive (waiting for it cost the
                # child's end the whole timeout). No row; the vendor tool's range is popped.
                rec.cut_range_exits((label, t0, begun, None, rec))
            elif begun:
                rec.device_range_end(label, KERNEL, begun, t0)
            elif rec.device:
                rec.host_timed(label, KERNEL, t0, now())
            else:
                rec.host_launch(label, t0, now())

    timed.__kprof_name__ = label  # type: ignore[attr-defined]
    return timed


def said(value: Any, what: str, where: str) -> int:
    """A count the user said (flops, bytes) as kprof keeps it: an int from 0 (a float is
    rounded), -1 for None; anything else raises naming it."""
    if value is None:
        return -1
    if isinstance(value, float) and math.isfinite(value):
        value = round(value)
    try:
        if isinstance(value, bool):
            raise TypeError
        n = operator.index(value)  # ints, NumPy's integers
    except TypeError:
        raise TypeError(
            f"{where}: {what} must be an int (or None), not {type(value).__name__}"
        ) from None
    if not 0 <= n < VALUE_LIMIT:
        raise ValueError(f"{where}: {what} must be from 0 to 2**59, not {n}")
    return n


def annotate(
    kernel: Any,
    flops: int | Callable[..., int] | None = None,
    bytes: int | Callable[..., int] | None = None,
) -> Any:
    """Say how much work a kernel does, so reports show its GFLOP/s and bytes per second.

    ``kprof.annotate("gemm", flops=2 * n**3, bytes=3 * 4 * n**2)``: every kernel row named
    ``gemm`` without its own values gets these at the profile's end (numbers only: a name
    sees no launch's arguments); ``None`` for both forgets the name. Nothing runs at launch.

    ``gemm = kprof.annotate(prg.gemm, flops=lambda queue, gsize, lsize, a, b, c, n: 2 * n**3)``
    returns a wrapper of the kernel object: inside a profile, each call runs the kernel, then
    the callables with the call's arguments, and the values go to the kernel the call
    launched (the last one, if it launched several: wrap those in ``kprof.range(name,
    flops=...)`` instead). Kernels not annotated pay nothing; an annotated call pays its
    callables and one entry, and only inside a profile. Rows reported later by an activity
    tracer (CUDA with CUPTI) are annotated by name only.
    """
    if isinstance(kernel, str):
        if callable(flops) or callable(bytes):
            raise TypeError(
                f"kprof.annotate({kernel!r}, ...): a callable needs the launch's arguments: "
                f"annotate the kernel object (kprof.annotate(prg.{kernel}, flops=lambda ...))"
            )
        f, b = said(flops, "flops", "kprof.annotate"), said(bytes, "bytes", "kprof.annotate")
        if f < 0 and b < 0:
            BY_NAME.pop(kernel, None)
        else:
            BY_NAME[kernel] = (b, f)
        return None
    if not callable(kernel):
        raise TypeError(
            f"kprof.annotate takes a name or a kernel object, not {type(kernel).__name__}"
        )
    for what, v in (("flops", flops), ("bytes", bytes)):
        if not callable(v):
            said(v, what, "kprof.annotate")  # refused now, not at the first launch

    def value(v: Any, what: str, args: Any, kwargs: Any) -> int:
        return said(v(*args, **kwargs) if callable(v) else v, what, "kprof.annotate")

    @functools.wraps(kernel)
    def annotated(*args: Any, **kwargs: Any) -> Any:
        rec = active()
        if rec is None:
            return kernel(*args, **kwargs)
        t0 = now()
        result = kernel(*args, **kwargs)
        t1 = now()
        try:
            b, f = value(bytes, "bytes", args, kwargs), value(flops, "flops", args, kwargs)
        except Exception as exc:  # the user's callable: their kernel ran, say it once
            rec.annotation_failed(exc)
            return result
        rec.annotate_launch(b, f, t0, t1)
        return result

    return annotated


def mark(name: str) -> None:
    """Record an instant on the host timeline (shown as ``◆ name`` in the trace)."""
    rec = active()
    if rec is not None:
        rec.mark(_check_name(name, "marker"), now())


def propagate(fn: F) -> F:
    """Run ``fn`` (later, in any thread) inside the calling context, and so inside its profile.

    Threads start with an empty context, so work they do is not recorded. One line fixes that::

        threading.Thread(target=kprof.propagate(work)).start()
        executor.submit(kprof.propagate(work), arg)
    """
    if not callable(fn):
        raise TypeError(f"kprof.propagate wraps a callable, not {type(fn).__name__}")
    ctx = contextvars.copy_context()

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        # A copy per call: one context cannot be entered by two threads at once.
        return ctx.copy().run(_in_scope, fn, args, kwargs)

    return run  # type: ignore[return-value]


def _in_scope(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Call ``fn`` in a scope of the active profile on this thread, so that backends that
    report device work afterwards (activity records) attribute what it launches here."""
    rec = active()
    if rec is None or not rec.has_activity:
        return fn(*args, **kwargs)
    scope, opened = activity.open_scope(rec)
    try:
        return fn(*args, **kwargs)
    finally:
        activity.close_scope(rec, scope, opened)


if (_mod := native.loaded()) is not None:
    _range_bind(_mod, now)  # at the end: it hands over said() and the Python twins
