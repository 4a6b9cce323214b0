"""kprof backend plugin ``cuda``: every kernel, copy and memset from CUPTI's activity records
(``kprof_cuda.activity``) when CUPTI can be used; device timestamps from pooled CuPy events for
``kprof.range``, ``kprof.kernel`` and, without CUPTI, for copies.

The entry point (``cuda = "kprof_cuda.plugin:plugin"``) is one :class:`CudaPlugin`, whose
decorated methods are the hooks. Tests build their own ``CudaPlugin`` around a fake
CuPy and register it under another name.

Importing this module does not import CuPy (nor ``cupy_backends``): ``describe_backend`` does
the latter, and CuPy itself is only used once the user's program has imported it.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import kprof
from kprof import plugin as kp

from . import nvtx as _nvtx
from .activity import CuptiActivity
from .api import LEGACY_STREAMS, NOT_READY, PER_THREAD_STREAM, CupyApi, describe
from .clock import Calibration, align, calibrate
from .events import EventPool, PoolStats, Stamp

if TYPE_CHECKING:
    from kprof.plugin import Patcher, Recorder

__all__ = ["CudaPlugin", "plugin"]

_modules = sys.modules
_tls = threading.local()
_now = time.perf_counter_ns
_COPY = kp.COPY

#: Free events kept per device when capture is removed (the rest are destroyed).
KEEP_FREE_EVENTS = 4096
#: How long ``elapsed_time`` waits for an event that is not done, in seconds.
WAIT_TIMEOUT_S = 60.0


def _thread_key() -> object:
    """An object standing for the calling thread (a thread ident may be reused by a later
    thread; this object is not, while a queue key holds it)."""
    try:
        return _tls.key
    except AttributeError:
        key = _tls.key = object()
        return key


class Queue:
    """A CUDA stream as kprof sees it: one per (device, stream), and per thread for the
    per-thread default stream (same handle, a different stream in every thread)."""

    __slots__ = ("device", "label", "stream")

    def __init__(self, device: int, stream: Any, label: str) -> None:
        self.device = device
        self.stream = stream
        self.label = label

    def __repr__(self) -> str:
        return f"<kprof_cuda.Queue {self.label} on device {self.device}>"


class CudaPlugin:
    """The CUDA backend: every hook, as methods over one set of pools and caches.

    ``api`` builds the CuPy bindings (:class:`kprof_cuda.api.CupyApi`) the first time they are
    needed; ``module`` is the name whose presence in ``sys.modules`` means the program uses
    CuPy; ``describe`` answers ``describe_backend``; ``nvtx`` loads the NVTX bindings.
    """

    def __init__(
        self,
        api: Callable[[], Any] = CupyApi,
        module: str = "cupy",
        describe: Callable[[], kp.BackendInfo] = describe,
        nvtx: Callable[[], Any] = _nvtx.load,
        activity: Callable[[CudaPlugin], Any] | None = None,
    ) -> None:
        self._api_factory = api
        self._module = module
        self._describe = describe
        self._nvtx_loader = nvtx
        self.api: Any = None
        self.pool = EventPool(self._new_event)
        self._lock = threading.RLock()
        self._queues: dict[tuple[Any, ...], Queue] = {}
        self._stream_numbers: dict[int, int] = {}
        self._calibrations: dict[int, Calibration] = {}
        self._calibration_streams: dict[int, Any] = {}
        self._device_labels: dict[int, str] = {}
        self._nvtx: Any = None
        self._nvtx_loaded = False
        self._patcher: Patcher | None = None
        #: The CUPTI activity path (None: events only). ``activity(self)`` builds it.
        self.activity: CuptiActivity | None = (
            activity(self)
            if activity is not None
            else CuptiActivity(
                self._cupti_queue, devices=self._used_devices, synchronize=self._synchronize
            )
        )
        # (device, CUPTI context id, CUPTI stream id) -> queue, for records; shared with the
        # events' queues. The context is part of the key: stream ids of two contexts collide.
        self._cupti_queues: dict[tuple[int, int, int], Queue] = {}

    # -- loading ------------------------------------------------------------------------------

    def _load(self) -> Any:
        with self._lock:
            if self.api is None:
                self.api = self._api_factory()
        return self.api

    def _new_event(self, device: int) -> Any:
        return (self.api or self._load()).new_event(device)

    def stats(self, device: int | None = None) -> PoolStats:
        """Event pool counts (created, in use, free), for one device or all of them."""
        return self.pool.stats(device)

    # -- describing ---------------------------------------------------------------------------

    @kp.hookimpl
    def describe_backend(self, backend: kp.Backend) -> kp.BackendInfo:
        info = self._describe()
        if info.status == "not installed":
            return info
        path, why = self.capture_path()
        return dataclasses.replace(info, capture=path, capture_detail=why)

    def capture_path(self) -> tuple[str, str]:
        """Which path records CUDA work (CUPTI or events) and why, for ``kprof backends``."""
        act = self.activity
        if act is None:
            return "CUDA events", "this plugin was built without the CUPTI path"
        if act.active:
            why = (
                f"{act.version()}, read by {act.reader_name()}: every kernel, copy and memset; "
                f"events time kprof.range"
            )
            return "CUPTI activity records", why
        reason = act.reason or act.probe()
        if reason is None:
            return "CUPTI activity records", (
                f"{act.version()}, read by {act.reader_name()}, enabled while a profile runs; "
                f"events time kprof.range"
            )
        return "CUDA events", f"{reason}; copies, kprof.range and kprof.kernel only"

    # -- queues -------------------------------------------------------------------------------

    @kp.hookimpl
    def current_queue(self, backend: kp.Backend) -> Queue | None:
        # A program that never imported CuPy does not use CUDA here: recording an event would
        # create a CUDA context (hundreds of ms, device memory) for nothing.
        if self._module not in _modules:
            return None
        api = self.api or self._load()
        dev = api.get_device()
        return self._queue(dev, api.current_stream(dev))

    def _queue(self, dev: int, stream: Any) -> Queue:
        ptr = stream.ptr
        key: tuple[Any, ...] = (dev, ptr)
        if ptr == PER_THREAD_STREAM:
            key = (dev, ptr, _thread_key())
        q = self._queues.get(key)
        if q is None:
            q = self._new_queue(key, dev, stream)
        return q

    def _new_queue(self, key: tuple[Any, ...], dev: int, stream: Any) -> Queue:
        with self._lock:
            q = self._queues.get(key)
            if q is not None:
                return q
            ptr = stream.ptr
            if ptr in LEGACY_STREAMS:
                label = "legacy default stream"
            elif ptr == PER_THREAD_STREAM:
                label = f"per-thread default stream ({threading.current_thread().name})"
            else:
                n = self._stream_numbers[dev] = self._stream_numbers.get(dev, 0) + 1
                label = f"stream {n}"
            if dev not in self._calibrations:
                self._calibrate_first(dev)
            # Holds the stream alive while capture is installed, so its handle (the key) is
            # not reused by another stream meanwhile; kprof's recorder holds it as long.
            q = self._queues[key] = Queue(dev, stream, label)
            if self.activity is not None and self.activity.active:
                q = self._queues[key] = self._share_with_cupti(q)
            return q

    def _share_with_cupti(self, q: Queue) -> Queue:
        """The one queue for a stream's events and its CUPTI records (one row, not two)."""
        ctx_of = getattr(self.api, "current_context", None)
        ctx = 0
        if ctx_of is not None:
            try:
                ctx = ctx_of()
            except Exception:
                ctx = 0
        act = self.activity
        assert act is not None
        sid = act.stream_id(ctx, q.stream.ptr, q.stream.ptr == PER_THREAD_STREAM)
        cid = act.context_id(ctx)
        if sid is None or cid is None:
            return q
        key = (q.device, cid, sid)
        seen = self._cupti_queues.get(key)
        if seen is not None and seen.stream is None:  # records came first: give it the stream
            seen.stream, seen.label = q.stream, q.label
            return seen
        if seen is None:
            self._cupti_queues[key] = q
        return seen or q

    def _cupti_queue(self, dev: int, context_id: int, stream_id: int) -> Queue:
        """The queue of CUPTI records (called once per queue when rows are taken)."""
        key = (dev, context_id, stream_id)
        q = self._cupti_queues.get(key)
        if q is None:
            with self._lock:
                q = self._cupti_queues.get(key)
                if q is None:
                    n = self._stream_numbers[dev] = self._stream_numbers.get(dev, 0) + 1
                    q = self._cupti_queues[key] = Queue(dev, None, f"stream {n}")
        return q

    def _used_devices(self) -> set[int]:
        """The devices a profile's end waits for with CUPTI: the ending thread's current one and
        every device kprof saw work on. None before CuPy is imported (importing it here would
        cost the end a third of a second, and without it there is no CuPy work to wait for)."""
        if _modules.get(self._module) is None:
            return set()
        api = self._load()
        devices = {key[0] for key in list(self._cupti_queues)} | set(self._calibrations)
        try:
            devices.add(int(api.get_device()))
        except Exception:  # no current device on this thread: the seen ones only
            pass
        return devices

    def _synchronize(self, devices: tuple[int, ...]) -> None:
        """Wait until ``devices`` finished the work queued on them (a thread of kprof's own)."""
        api = self._load()
        for dev in devices:
            api.synchronize_device(dev)

    @kp.hookimpl
    def queue_info(self, backend: kp.Backend, queue: Queue) -> kp.QueueInfo:
        return kp.QueueInfo(
            device=self._device_label(queue.device), label=queue.label, device_key=queue.device
        )

    def _device_label(self, dev: int) -> str:
        label = self._device_labels.get(dev)
        if label is None:
            try:
                label = f"CUDA {dev} ({(self.api or self._load()).device_name(dev)})"
            except Exception:
                label = f"CUDA {dev}"
            self._device_labels[dev] = label
        return label

    @kp.hookimpl
    def synchronize(self, backend: kp.Backend, queue: Queue | None) -> None:
        if queue is not None:
            queue.stream.synchronize()
            return
        if self._module in _modules:
            api = self.api or self._load()
            api.current_stream(api.get_device()).synchronize()

    # -- timestamps ---------------------------------------------------------------------------

    @kp.hookimpl
    def record_timestamp(self, backend: kp.Backend) -> Stamp | None:
        api = self.api
        if api is None:  # CuPy not in use (current_queue said so first)
            return None
        dev = api.get_device()
        pool = self.pool.devices.get(dev) or self.pool.get(dev)
        stamp = pool.take()
        try:
            api.event_record(stamp.ptr, api.current_stream(dev).ptr)
        except BaseException:
            pool.give(stamp)
            raise
        return stamp

    @kp.hookimpl
    def timestamp_done(self, backend: kp.Backend, token: Stamp) -> bool:
        status = self.api.event_query(token.ptr)
        if status == 0:
            return True
        if status == NOT_READY:
            return False
        # An event whose work failed never completes: say why instead of waiting for it.
        raise self.api.error(status)

    @kp.hookimpl
    def elapsed_time(self, backend: kp.Backend, start: Stamp, stop: Stamp) -> int:
        # cudaEventElapsedTime: float milliseconds (single precision, ~0.5 µs resolution). It
        # says NOT_READY itself when either event is pending: asking first cost two
        # cudaEventQuery per call, four per range (about 2.6 µs each on an H200 host).
        api = self.api
        try:
            ms = api.get_elapsed_time(start, stop)
        except api.error as exc:
            if getattr(exc, "status", None) != NOT_READY:
                raise
            for token in (stop, start):
                self._wait(token)
            ms = api.get_elapsed_time(start, stop)
        return round(float(ms) * 1e6)

    def _wait(self, token: Stamp) -> None:
        """Poll until the event is done, sleeping between polls: other threads keep running
        (``Event.synchronize`` would hold this thread in the driver, unbounded)."""
        query = self.api.event_query
        deadline = time.monotonic() + WAIT_TIMEOUT_S
        pause = 1e-5
        while True:
            status = query(token.ptr)
            if status == 0:
                return
            if status != NOT_READY:
                raise self.api.error(status)
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"CUDA event on device {token.device} not done after "
                    f"{WAIT_TIMEOUT_S:g} s; the device may be hung"
                )
            time.sleep(pause)
            pause = min(pause * 2, 0.005)

    @kp.hookimpl
    def release_timestamp(self, backend: kp.Backend, token: Stamp) -> None:
        self.pool.give(token)

    # -- clocks -------------------------------------------------------------------------------

    def _calibrate(self, dev: int) -> Calibration:
        api = self.api or self._load()
        pool = self.pool.get(dev)
        with api.using_device(dev):
            stream = self._calibration_streams.get(dev)
            if stream is None:
                stream = self._calibration_streams[dev] = api.new_stream(dev)
            return calibrate(
                pool.take, pool.give, api.event_record, api.event_query, stream.ptr, api.error
            )

    def _calibrate_first(self, dev: int) -> None:
        """The calibration a profile's times are placed from (see :mod:`kprof_cuda.clock`)."""
        try:
            self._calibrations[dev] = self._calibrate(dev)
        except Exception:  # placement then relies on the end-of-profile calibration alone
            pass

    @kp.hookimpl
    def align_clock(
        self, backend: kp.Backend, token: Stamp, launch_window: tuple[int, int]
    ) -> kp.Alignment:
        last = self._calibrate(token.device)
        try:
            return align(
                lambda cal: self.elapsed_time(backend, cal, token),
                self._calibrations.get(token.device),
                last,
            )
        finally:
            self.pool.give(last.stamp)

    # -- NVTX ---------------------------------------------------------------------------------

    @kp.hookimpl
    def range_push(self, backend: kp.Backend, name: str) -> None:
        n = self._nvtx
        if n is not None:
            n.push(name)

    @kp.hookimpl
    def range_pop(self, backend: kp.Backend) -> None:
        n = self._nvtx
        if n is not None:
            n.pop()

    # -- capture ------------------------------------------------------------------------------

    @kp.hookimpl
    def install_capture(self, backend: kp.Backend) -> None:
        if not self._nvtx_loaded:  # loaded once, kept: a range may end after its profile
            self._nvtx = self._nvtx_loader()
            self._nvtx_loaded = True
        # CUPTI sees every copy itself: patching CuPy's copies too would count each twice.
        if self.activity is not None and self.activity.start(backend):
            return
        mod = _modules.get(self._module)
        if mod is None:  # CuPy imported later: kprof.range and kprof_cuda.kernel still work
            return
        from .capture import install

        self._load()
        import numpy

        self._patcher = install(self, backend, mod, numpy.ndarray)

    @kp.hookimpl
    def remove_capture(self, backend: kp.Backend) -> None:
        if self.activity is not None:
            self.activity.stop()
        patcher, self._patcher = self._patcher, None
        if patcher is not None:
            patcher.restore()
        with self._lock:
            for cal in self._calibrations.values():
                self.pool.give(cal.stamp)
            self._calibrations.clear()
            self._queues.clear()  # drop the streams we held
            self._cupti_queues.clear()
            self._stream_numbers.clear()
        self.pool.trim(KEEP_FREE_EVENTS)

    def timed_copy(
        self,
        backend: kp.Backend,
        rec: Recorder,
        name: str,
        stream: Any,
        nbytes: int,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        """Call ``fn`` with pooled events around it on ``stream`` (None: the current one) and
        record it as a copy. kprof's own failures never reach the caller: the backend is
        disabled and ``fn`` runs untimed."""
        t0 = _now()
        api = self.api
        pool = start = stop = None
        try:
            if stream is None:
                dev = api.get_device()
                stream = api.current_stream(dev)
            else:
                dev = stream.device_id
                if dev < 0:  # the NULL/per-thread singletons: whichever device is current
                    dev = api.get_device()
            q = self._queue(dev, stream)
            if rec.device:
                pool = self.pool.get(dev)
                start = pool.take()
                api.event_record(start.ptr, stream.ptr)
        except Exception as exc:
            if start is not None and pool is not None:
                pool.give(start)
            backend.disable(f"timing a CuPy copy failed: {type(exc).__name__}: {exc}")
            return fn(*args, **kwargs)
        try:
            result = fn(*args, **kwargs)
        except BaseException:
            if start is not None and pool is not None:
                pool.give(start)  # never handed to kprof
            raise
        if start is not None and pool is not None:
            try:
                stop = pool.take()
                api.event_record(stop.ptr, stream.ptr)
            except Exception as exc:
                pool.give(start)
                if stop is not None:
                    pool.give(stop)
                backend.disable(f"timing a CuPy copy failed: {type(exc).__name__}: {exc}")
                return result
        if nbytes < 0:
            nbytes = getattr(result, "nbytes", -1)
        rec.launch(backend, _COPY, name, q, t0, _now(), start, stop, nbytes)
        return result

    # -- CUPTI activity records (kprof_cuda.activity) ----------------------------------------------

    @kp.hookimpl
    def activity_scope_enter(self, backend: kp.Backend, scope: int) -> bool:
        return self.activity is not None and self.activity.scope_enter(scope)

    @kp.hookimpl
    def activity_scope_exit(self, backend: kp.Backend, scope: int) -> None:
        if self.activity is not None:
            self.activity.scope_exit(scope)

    @kp.hookimpl
    def activity_flush(
        self, backend: kp.Backend, scopes: tuple[int, ...], timeout: float
    ) -> int | None:
        return None if self.activity is None else self.activity.flush(scopes, timeout)

    @kp.hookimpl
    def activity_align(
        self, backend: kp.Backend, queue: Queue, device_ns: int
    ) -> kp.Alignment | None:
        return None if self.activity is None else self.activity.align(device_ns)

    # -- the demo -----------------------------------------------------------------------------

    @kp.hookimpl
    def demo_workload(self, backend: kp.Backend, size: int) -> Callable[[], None] | None:
        import cupy

        x = cupy.ones(size, dtype=cupy.float32)
        y = cupy.ones(size, dtype=cupy.float32)
        z = cupy.empty_like(x)
        # Named as kprof_cuda.kernel would name them; kprof.kernel directly, since this module
        # must not import its package (which imports it: a cycle).
        mul2 = kprof.kernel(cupy.ElementwiseKernel("", "float32 x", "x = x * 2", "mul2"), "mul2")
        add = kprof.kernel(
            cupy.ElementwiseKernel("float32 x, float32 y", "float32 z", "z = x + y", "add"), "add"
        )
        mul2(x)  # compile both now, so that a step measures launches only
        add(x, y, z)
        cupy.cuda.get_current_stream().synchronize()

        def step() -> None:
            mul2(x)
            add(x, y, z)

        return step


#: The plugin behind the ``cuda`` entry point (``kprof_cuda.plugin:plugin``): pluggy registers
#: an instance's decorated methods as it does a module's functions.
plugin = CudaPlugin()
