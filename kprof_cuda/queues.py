"""The CUDA plugin's queues: one per (device, stream), and per thread for the per-thread default
stream; shared between a stream's events and its CUPTI records (one row, not two); the devices
a profile's end waits for.

:class:`StreamQueues` owns the queues and their labels; its decorated methods are the queue
hooks, which :class:`kprof_cuda.plugin.CudaPlugin` binds.
"""

from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING, Any

from kprof import plugin as kp

from .api import LEGACY_STREAMS, PER_THREAD_STREAM
from .timestamps import EventClock

if TYPE_CHECKING:
    from .activity import CuptiActivity

_modules = sys.modules
_tls = threading.local()


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


class StreamQueues:
    """The queue hooks, and the queues CUPTI's records share: one per (device, stream), over
    ``clock``'s bindings; ``module`` is the name whose presence in ``sys.modules`` means the
    program uses CuPy. ``activity`` (the CUPTI path, or None) is set once it is built, since it
    is built from this object's methods."""

    def __init__(self, clock: EventClock, module: str) -> None:
        self._clock = clock
        self._module = module
        self.activity: CuptiActivity | None = None
        self._queues: dict[tuple[Any, ...], Queue] = {}
        self._stream_numbers: dict[int, int] = {}
        self._device_labels: dict[int, str] = {}
        # (device, CUPTI context id, CUPTI stream id) -> queue, for records; shared with the
        # events' queues. The context is part of the key: stream ids of two contexts collide.
        self._cupti_queues: dict[tuple[int, int, int], Queue] = {}

    # -- queues -------------------------------------------------------------------------------

    @kp.hookimpl
    def current_queue(self, backend: kp.Backend) -> Queue | None:
        # A program that never imported CuPy does not use CUDA here: recording an event would
        # create a CUDA context (hundreds of ms, device memory) for nothing.
        if self._module not in _modules:
            return None
        api = self._clock.api or self._clock.load()
        dev = api.get_device()
        return self.queue(dev, api.current_stream(dev))

    def queue(self, dev: int, stream: Any) -> Queue:
        """The queue of ``stream`` on ``dev`` (made on first sight)."""
        ptr = stream.ptr
        key: tuple[Any, ...] = (dev, ptr)
        if ptr == PER_THREAD_STREAM:
            key = (dev, ptr, _thread_key())
        q = self._queues.get(key)
        if q is None:
            q = self._new_queue(key, dev, stream)
        return q

    def _new_queue(self, key: tuple[Any, ...], dev: int, stream: Any) -> Queue:
        with self._clock.lock:
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
            cupti = self.activity is not None and self.activity.active
            if not cupti:  # with CUPTI, no event times this queue's work or ranges
                self._clock.calibrate_first(dev)
            # Holds the stream alive while capture is installed, so its handle (the key) is
            # not reused by another stream meanwhile; kprof's recorder holds it as long.
            q = self._queues[key] = Queue(dev, stream, label)
            if cupti:
                q = self._queues[key] = self._share_with_cupti(q)
            return q

    def _share_with_cupti(self, q: Queue) -> Queue:
        """The one queue for a stream's events and its CUPTI records (one row, not two)."""
        ctx_of = getattr(self._clock.api, "current_context", None)
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

    def cupti_queue(self, dev: int, context_id: int, stream_id: int) -> Queue:
        """The queue of CUPTI records (called once per queue when rows are taken)."""
        key = (dev, context_id, stream_id)
        q = self._cupti_queues.get(key)
        if q is None:
            with self._clock.lock:
                q = self._cupti_queues.get(key)
                if q is None:
                    n = self._stream_numbers[dev] = self._stream_numbers.get(dev, 0) + 1
                    q = self._cupti_queues[key] = Queue(dev, None, f"stream {n}")
        return q

    def used_devices(self) -> set[int]:
        """The devices a profile's end waits for with CUPTI: the ending thread's current one and
        every device kprof saw work on. None before CuPy is imported (importing it here would
        cost the end a third of a second, and without it there is no CuPy work to wait for)."""
        if _modules.get(self._module) is None:
            return set()
        api = self._clock.load()
        devices = {key[0] for key in list(self._cupti_queues)} | self._clock.calibrated_devices()
        try:
            devices.add(int(api.get_device()))
        except Exception:  # no current device on this thread: the seen ones only
            pass
        return devices

    def synchronize_devices(self, devices: tuple[int, ...]) -> None:
        """Wait until ``devices`` finished the work queued on them (a thread of kprof's own)."""
        api = self._clock.load()
        for dev in devices:
            api.synchronize_device(dev)

    @kp.hookimpl
    def queue_info(self, backend: kp.Backend, queue: Queue) -> kp.QueueInfo:
        return kp.QueueInfo(
            device=self.device_label(queue.device), label=queue.label, device_key=queue.device
        )

    def device_label(self, dev: int) -> str:
        """``dev`` as reports name it (``"CUDA 0 (NVIDIA H100)"``)."""
        label = self._device_labels.get(dev)
        if label is None:
            try:
                label = f"CUDA {dev} ({(self._clock.api or self._clock.load()).device_name(dev)})"
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
            api = self._clock.api or self._clock.load()
            api.current_stream(api.get_device()).synchronize()

    def forget(self) -> None:
        """Drop the streams held (at capture's end). Under the clock's lock."""
        self._queues.clear()
        self._cupti_queues.clear()
        self._stream_numbers.clear()
