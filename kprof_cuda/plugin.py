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
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import kprof
from kprof import plugin as kp

from . import nvtx as _nvtx
from .activity import CuptiActivity
from .api import CupyApi, describe
from .events import PoolStats
from .queues import Queue, StreamQueues
from .timestamps import EventClock

if TYPE_CHECKING:
    from kprof.plugin import Patcher, Recorder

__all__ = ["CudaPlugin", "Queue", "plugin"]

_modules = sys.modules
_now = time.perf_counter_ns
_COPY = kp.COPY

#: Free events kept per device when capture is removed (the rest are destroyed).
KEEP_FREE_EVENTS = 4096
#: Python libraries that run CUDA work: importing one starts this backend under ``kprof run``
#: (``capture_modules``). A program reaching CUDA otherwise (ctypes) needs ``--backends cuda``.
CUDA_LIBRARIES = ("cupy", "torch", "jax", "jaxlib", "numba", "cuda", "pycuda", "tensorflow", "warp")


class CudaPlugin:
    """The CUDA backend, composed of an event clock (:class:`~kprof_cuda.timestamps.EventClock`:
    the CuPy bindings, event pools, calibrations, and the timestamp and clock hooks), the
    stream queues (:class:`~kprof_cuda.queues.StreamQueues`: the queue hooks) and the CUPTI
    activity path; the hooks of its parts are bound to it (pluggy registers an object's
    decorated attributes), and the rest (description, capture, NVTX, CUPTI, the demo) are here.

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
        self._module = module
        self._describe = describe
        self._nvtx_loader = nvtx
        self.clock = clock = EventClock(api)
        self.queues = queues = StreamQueues(clock, module)
        # The parts' hooks, bound here: each is one call, with no frame of this class between.
        self.record_timestamp = clock.record_timestamp
        self.timestamp_done = clock.timestamp_done
        self.elapsed_time = clock.elapsed_time
        self.release_timestamp = clock.release_timestamp
        self.align_clock = clock.align_clock
        self.current_queue = queues.current_queue
        self.queue_info = queues.queue_info
        self.synchronize = queues.synchronize
        self._nvtx: Any = None
        self._nvtx_loaded = False
        self._patcher: Patcher | None = None
        self._memory_hook: Any = None  # CuPy's memory hook while entered (memory.py)
        self._memory_cupti = False  # memory from CUPTI's MEMORY2 records instead
        #: The CUPTI activity path (None: events only). ``activity(self)`` builds it.
        self.activity: CuptiActivity | None = (
            activity(self)
            if activity is not None
            else CuptiActivity(
                queues.cupti_queue,
                devices=queues.used_devices,
                synchronize=queues.synchronize_devices,
            )
        )
        queues.activity = self.activity

    @property
    def api(self) -> Any:
        """The CuPy bindings, or None before they are needed."""
        return self.clock.api

    def stats(self, device: int | None = None) -> PoolStats:
        """Event pool counts (created, in use, free), for one device or all of them."""
        return self.clock.pool.stats(device)

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
                f"{act.version()}, read by {act.reader_name()}: every kernel, copy and memset, "
                f"{act.enabling()}; kprof.range spans the work inside it"
            )
            if act.sites.reason is not None:
                why += f"; no launch sites for them: {act.sites.reason}"
            return "CUPTI activity records", why
        reason = act.reason or act.probe()
        if reason is None:
            return "CUPTI activity records", (
                f"{act.version()}, read by {act.reader_name()}, enabled while a profile runs; "
                f"kprof.range spans the work inside it"
            )
        return "CUDA events", f"{reason}; copies, kprof.range and kprof.kernel only"

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
    def capture_modules(self, backend: kp.Backend) -> list[str]:
        # CuPy, and the libraries whose CUDA work CUPTI's records see too.
        return [self._module, *(m for m in CUDA_LIBRARIES if m != self._module)]

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

        self.clock.load()
        import numpy

        self._patcher = install(self.timed_copy, backend, mod, numpy.ndarray)

    @kp.hookimpl
    def memory_install(self, backend: kp.Backend) -> bool:
        # CUPTI's MEMORY2 records where CUPTI is on: every allocation and free of the device
        # (cudaMalloc by CuPy's pool and any library). CuPy's pool hook only where it is not:
        # both on would count the pool's blocks inside the allocations that hold them.
        from .memory import cupti_label, install

        activity = self.activity
        if activity is not None and activity.memory_start(cupti_label(self.queues.device_label)):
            self._memory_cupti = True
            return True
        mod = _modules.get(self._module)
        if mod is None:  # CuPy not imported: nothing allocates through its pool yet
            return False
        self._memory_hook = install(backend, mod, self._module, self.queues.device_label)
        return self._memory_hook is not None

    @kp.hookimpl
    def memory_remove(self, backend: kp.Backend) -> None:
        if self._memory_cupti:
            self._memory_cupti = False
            if self.activity is not None:
                self.activity.memory_stop()
        hook, self._memory_hook = self._memory_hook, None
        if hook is not None:
            from .memory import remove

            remove(hook)

    @kp.hookimpl
    def remove_capture(self, backend: kp.Backend) -> None:
        if self.activity is not None:
            self.activity.stop()
        patcher, self._patcher = self._patcher, None
        if patcher is not None:
            patcher.restore()
        with self.clock.lock:
            self.clock.forget_calibrations()
            self.queues.forget()  # drop the streams we held
        self.clock.pool.trim(KEEP_FREE_EVENTS)

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
        api = self.clock.api
        pool = start = stop = None
        try:
            if stream is None:
                dev = api.get_device()
                stream = api.current_stream(dev)
            else:
                dev = stream.device_id
                if dev < 0:  # the NULL/per-thread singletons: whichever device is current
                    dev = api.get_device()
            q = self.queues.queue(dev, stream)
            if rec.device:
                pool = self.clock.pool.get(dev)
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

    @kp.hookimpl
    def report_notes(self, backend: kp.Backend) -> list[str] | None:
        act = self.activity
        if act is None:
            return None
        notes = act.notes()
        # A profile asked for launch sites that CUPTI's callback API could not give.
        sites = act.sites
        if sites.missed and sites.reason is not None:
            sites.missed = False
            notes.append(
                f"CUDA kernels, copies and allocations have no launch site: {sites.reason}"
            )
        return notes or None

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
