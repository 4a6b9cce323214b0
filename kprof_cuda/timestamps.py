"""The CUDA plugin's device timestamps: pooled CuPy events recorded on the current stream,
their elapsed times (waited for with a bound), and the calibrations that put them on the host
clock (:mod:`kprof_cuda.clock`). Also how the plugin loads its CuPy bindings.

:class:`EventClock` owns the bindings, the event pools and the calibrations; its decorated
methods are the timestamp and clock hooks, which :class:`kprof_cuda.plugin.CudaPlugin` binds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from kprof import plugin as kp

from .api import NOT_READY
from .clock import Calibration, align, calibrate
from .events import EventPool, Stamp

#: How long ``elapsed_time`` waits for an event that is not done, in seconds.
WAIT_TIMEOUT_S = 60.0


class EventClock:
    """The CuPy bindings (``api``, built by ``api_factory`` the first time they are needed), one
    pool of events per device, and each device's calibration against the host clock; the
    timestamp and clock hooks over them. ``lock`` guards loading and the plugin's caches."""

    def __init__(self, api_factory: Callable[[], Any]) -> None:
        self._api_factory = api_factory
        self.api: Any = None
        self.lock = threading.RLock()
        self.pool = EventPool(self._new_event)
        self._calibrations: dict[int, Calibration] = {}
        self._calibration_streams: dict[int, Any] = {}

    # -- loading ------------------------------------------------------------------------------

    def load(self) -> Any:
        """The bindings, built on first use."""
        with self.lock:
            if self.api is None:
                self.api = self._api_factory()
        return self.api

    def _new_event(self, device: int) -> Any:
        return (self.api or self.load()).new_event(device)

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

    def calibrate(self, dev: int) -> Calibration:
        """A calibration of ``dev``'s events against the host clock, now."""
        api = self.api or self.load()
        pool = self.pool.get(dev)
        with api.using_device(dev):
            stream = self._calibration_streams.get(dev)
            if stream is None:
                stream = self._calibration_streams[dev] = api.new_stream(dev)
            return calibrate(
                pool.take, pool.give, api.event_record, api.event_query, stream.ptr, api.error
            )

    def calibrate_first(self, dev: int) -> None:
        """The calibration a profile's times are placed from (see :mod:`kprof_cuda.clock`),
        once per device and capture."""
        if dev in self._calibrations:
            return
        try:
            self._calibrations[dev] = self.calibrate(dev)
        except Exception:  # placement then relies on the end-of-profile calibration alone
            pass

    def calibrated_devices(self) -> set[int]:
        return set(self._calibrations)

    def forget_calibrations(self) -> None:
        """Give back the calibrations' events (at capture's end). Under ``lock``."""
        for cal in self._calibrations.values():
            self.pool.give(cal.stamp)
        self._calibrations.clear()

    @kp.hookimpl
    def align_clock(
        self, backend: kp.Backend, token: Stamp, launch_window: tuple[int, int]
    ) -> kp.Alignment:
        last = self.calibrate(token.device)
        try:
            return align(
                lambda cal: self.elapsed_time(backend, cal, token),
                self._calibrations.get(token.device),
                last,
            )
        finally:
            self.pool.give(last.stamp)
