"""Every kernel, copy and memset of a profile, from CUPTI's Activity API, read by kprof itself.

How work is tied to kprof's profiles (scopes; see ``kprof_core/recording/activity.py``): when a profile
opens a scope on a thread, this module pushes the scope as an *external correlation id* on
that thread (``cuptiActivityPushExternalCorrelationId``, kind ``CUSTOM2``); CUPTI then writes,
before the record of every CUDA runtime or driver call the thread makes, an
``EXTERNAL_CORRELATION`` record linking the call's correlation id to the scope. The kernel,
memcpy and memset records carry the correlation id of the call that enqueued them, so::

    scope  <-(EXTERNAL_CORRELATION)-  correlation id  ->  API record (thread, call times)
                                                      ->  KERNEL / MEMCPY / MEMSET records

This is what torch.profiler (Kineto) does. It costs nothing in Python per launch (CUPTI does
the tagging in C) and never misattributes: a thread outside every profile has nothing pushed,
so its work is not kprof's; two profiles on two threads push different ids; a nested profile
pushes its id on top of the outer one's.

Reading: libcupti is loaded at run time (``cupti_lib``). The compiled reader
(``kprof_cuda._cupti``) registers C buffer callbacks, decodes each completed buffer on CUPTI's
thread, joins the records in C and keeps rows in C; the pure-Python one (``cupti_pure``) gets
one ctypes call per buffer and decodes with numpy. Either way no Python object is made per
record, and kprof's *drain thread* takes whole batches of rows as columns (holding the GIL
once per batch) and hands them to the core (``kprof.plugin.deliver_columns``); the profile's
end does the same after flushing. The activity kinds are enabled by the first profile and
disabled after the last one, after a forced flush.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable, Iterable
from typing import Any

from kprof import plugin as kp

from . import cupti_abi as abi
from .cupti_lib import Cupti, CuptiError, CuptiUnavailable
from .cupti_lib import load as _load_cupti
from .cupti_records import demangle

__all__ = ["BUFFER_SIZE", "MAX_BUFFERS", "CuptiActivity", "demangle"]

#: Bytes per activity buffer: ~4,000 kernel records. CUPTI asks for a new one when one fills.
BUFFER_SIZE = 1 << 20
#: Buffers held at once (in CUPTI's hands, or completed and not decoded yet): the memory bound
#: of the pure reader, MAX_BUFFERS x BUFFER_SIZE. From CUPTI API 27 (CUDA 12.9) kprof refuses
#: a buffer past it (CUPTI drops records and counts them); before, refusing could crash CUPTI
#: (Kineto's finding), so kprof hands out buffers and discards completed ones past the bound.
MAX_BUFFERS = 64
#: Rows the compiled reader keeps in C before Python takes them (144 B each: 144 MiB; the
#: drain thread takes them every 50 ms or sooner); past it rows are dropped and counted.
MAX_ROWS = 1 << 20
#: Clock samples per calibration (the narrowest bracket is kept).
CLOCK_SAMPLES = 7
#: How often the drain thread takes rows when nothing wakes it, in seconds.
DRAIN_PERIOD_S = 0.05

_K = abi.KIND
_KINDS = (_K["EXTERNAL_CORRELATION"], _K["CONCURRENT_KERNEL"], _K["MEMCPY"], _K["MEMSET"])
_DETAIL = "grid ({0}, {1}, {2}) block ({3}, {4}, {5}), device {6}, CUPTI stream {7}"

# CUPTI takes one pair of buffer callbacks per process: one reader, registered once, whose rows
# go to whichever CuptiActivity is active (there is one per CudaPlugin; tests build several).
_reader: Any = None
_reader_lock = threading.Lock()
_current: CuptiActivity | None = None


class CuptiActivity:
    """kprof's one CUPTI client in the process: enables the activity kinds while profiles run,
    pushes scopes as external correlation ids, takes rows from the reader.

    ``queue_for(device, context, stream)`` gives the plugin's queue object for CUPTI's ids;
    ``load`` loads libcupti (:func:`kprof_cuda.cupti_lib.load`), replaced by tests;
    ``devices()`` names the devices the profile's end waits for (called on the thread that
    ends it) and ``synchronize(devices)`` waits until they finished the work queued on them
    (called on a thread of its own); without them the end waits for no device.
    """

    def __init__(
        self,
        queue_for: Callable[[int, int, int], Any],
        load: Callable[[], Cupti] | None = None,
        devices: Callable[[], Iterable[int]] | None = None,
        synchronize: Callable[[tuple[int, ...]], None] | None = None,
    ) -> None:
        self._queue_for = queue_for
        self._load = load or _load_cupti
        self._devices = devices
        self._synchronize = synchronize
        #: Why the last end could not wait for its devices (None: it could, or had none).
        self.idle_error: str | None = None
        self.cupti: Cupti | None = None
        self.active = False
        self.reason: str | None = None  # why CUPTI is not used, when it is not
        self._enabled: list[int] = []
        self._apis_enabled = False
        self.backend: kp.Backend | None = None
        self._offset: tuple[int, int] | None = None
        self.runtime_records = True
        self.dropped_by_cupti = 0
        self.foreign = 0
        self._dropped_since_start = 0
        self._warned = False
        self._take_lock = threading.Lock()
        self._drain_stop = threading.Event()
        self._drainer: threading.Thread | None = None
        self._queues: list[Any] = []  # reader's queue index -> the plugin's queue
        self._reader_queues = 0

    # -- availability -------------------------------------------------------------------------

    def version(self) -> str | None:
        c = self.cupti
        return None if c is None else f"libcupti API {c.api_version} ({c.how}: {c.path})"

    def reader_name(self) -> str:
        r = _reader
        if r is None:
            return "the compiled reader" if _compiled() is not None else "the pure-Python reader"
        return "the compiled reader" if r.compiled else "the pure-Python reader"

    def probe(self) -> str | None:
        """None when CUPTI can be used here; otherwise why not (without enabling anything)."""
        if self.active:
            return None
        try:
            c = self.cupti or self._load()
        except CuptiUnavailable as exc:
            return str(exc)
        except Exception as exc:
            return f"libcupti failed to load: {type(exc).__name__}: {exc}"
        self.cupti = c
        try:
            c.timestamp()
        except Exception as exc:
            return f"CUPTI cannot be used: {type(exc).__name__}: {exc}"
        return None

    # -- on and off -------------------------------------------------------------------------------

    def start(self, backend: kp.Backend) -> bool:
        """Enable the activity kinds (the first profile started). False, with ``reason`` set
        and one warning, when CUPTI is unavailable or held by another tool."""
        self.backend = backend
        reason = self.probe()
        if reason is None:
            try:
                self._enable()
            except Exception as exc:
                self._disable()
                self._release()
                reason = _explain(exc)
        if reason is not None:
            self.reason = reason
            self.active = False
            if not self._warned:
                self._warned = True
                warnings.warn(
                    f"kprof: CUDA kernels are not recorded one by one, because "
                    f"{reason}; kprof times copies, kprof.range and kprof.kernel with "
                    f"CUDA events instead",
                    RuntimeWarning,
                    stacklevel=4,
                )
            return False
        self.reason = None
        self.active = True
        self._drain_stop.clear()
        self._drainer = threading.Thread(target=self._drain_loop, name="kprof-cupti", daemon=True)
        self._drainer.start()
        return True

    def _enable(self) -> None:
        global _current
        c = self.cupti
        assert c is not None
        with _reader_lock:
            if _current is not None and _current is not self:
                raise RuntimeError("another kprof CUDA backend in this process holds CUPTI")
            reader = _get_reader(c)
            _current = self
        reader.buffer_size, reader.max_buffers = BUFFER_SIZE, MAX_BUFFERS
        c.refresh_version()
        reader.refuse_ok = c.api_version >= abi.REFUSE_BUFFERS_FROM_API
        if reader.compiled:
            reader.max_rows = MAX_ROWS
        self._queues, self._reader_queues = [], 0
        c.dropped()  # what CUPTI dropped before this profile is not its loss
        self._dropped_since_start = 0
        self._calibrate()
        for kind in _KINDS:
            c.check(c.ActivityEnable(kind), f"cuptiActivityEnable({kind})")
            self._enabled.append(kind)
        # EXTERNAL_CORRELATION records come with API records. Only the calls that enqueue
        # work need them: enabled one by one (cuptiActivityEnable{Driver,Runtime}Api, CUDA
        # 12.6+), CUPTI writes no record for the many calls that enqueue nothing
        # (cuCtxGetCurrent, cudaGetDevice...), which kprof would decode only to drop.
        if self._enable_apis(True):
            return
        for kind in (_K["DRIVER"], _K["RUNTIME"]):
            c.check(c.ActivityEnable(kind), f"cuptiActivityEnable({kind})")
            self._enabled.append(kind)

    def _enable_apis(self, on: bool) -> bool:
        """Enable (or disable) the API records of the calls that enqueue work, one by one;
        False when this CUPTI cannot."""
        c = self.cupti
        assert c is not None
        if c.ActivityEnableDriverApi is None or c.ActivityEnableRuntimeApi is None:
            return False
        for enable, ids in (
            (c.ActivityEnableDriverApi, abi.WORK_DRIVER),
            (c.ActivityEnableRuntimeApi, abi.WORK_RUNTIME),
        ):
            for cbid in sorted(ids):
                if enable(cbid, int(on)) != 0 and on:
                    self._enable_apis(False)
                    return False
        self._apis_enabled = on
        return True

    def _release(self) -> None:
        global _current
        with _reader_lock:
            if _current is self:
                _current = None

    def _disable(self) -> None:
        c = self.cupti
        if c is None:
            return
        if self._apis_enabled:
            self._enable_apis(False)
        while self._enabled:
            c.ActivityDisable(self._enabled.pop())

    def stop(self) -> None:
        """The last profile ended: a forced flush (no record stays in CUPTI's hands for the
        next profile), what it brings is late; disable; forget."""
        if not self.active:
            return
        self._drain_stop.set()
        if _reader is not None:
            _reader.wake()
        if self._drainer is not None:
            self._drainer.join()
            self._drainer = None
        c = self.cupti
        assert c is not None
        try:
            c.ActivityFlushAll(abi.FLAG_FLUSH_FORCED)
            self._drain()
            self._disable()
            c.ActivityFlushAll(abi.FLAG_FLUSH_FORCED)
            self._drain(final=True)
        finally:
            self._disable()
            self._release()
            self.active = False
            if _reader is not None:
                _reader.reset()

    # -- scopes -------------------------------------------------------------------------------

    def scope_enter(self, scope: int) -> bool:
        if not self.active:
            return False
        c = self.cupti
        assert c is not None
        return bool(c.ActivityPushExternalCorrelationId(abi.EXT_KIND_CUSTOM2, scope) == 0)

    def scope_exit(self, scope: int) -> None:
        if self.active:
            c = self.cupti
            assert c is not None
            c.ActivityPopExternalCorrelationId(abi.EXT_KIND_CUSTOM2, None)

    def flush(self, scopes: tuple[int, ...], timeout: float) -> int:
        """Flush until every launch of ``scopes`` has its device record, or ``timeout``. Stops
        early when CUPTI (or kprof's buffer bound) dropped at least as many records as launches
        are missing: those records cannot come, and the report says why."""
        if not self.active or _reader is None:
            return 0
        c = self.cupti
        assert c is not None
        deadline = time.monotonic() + timeout
        # A flush without the FORCED flag returns no buffer that holds a record of work still
        # running, and with it the API records of every launch written before: "no launch is
        # waiting" proves nothing until the devices finished the work queued before this end.
        # (On an H200, kernels still running at a profile's end were lost without this wait.)
        # A forced flush would return those records unfinished, so the end waits for the
        # devices instead, on a thread of its own, bounded by the timeout like the rest.
        idle, waited = self._wait_for_devices()
        pause = 1e-4
        settled = 0
        while True:
            was_idle = idle.is_set()
            c.ActivityFlushAll(0)
            self._drain(account=True)
            left: int = _reader.waiting(scopes)
            if left and left <= self._dropped_since_start:
                break
            # A graph launch's node records share its correlation id and CUPTI does not say
            # how many there are: its first row proves nothing. They are all in once the
            # devices its rows ran on finished and a flush after that was drained, so the
            # end also waits for those devices (ones it did not know, or none without CuPy).
            graph = _mask_devices(_reader.graph_devices(scopes)) - waited
            if was_idle and graph:
                idle, more = self._wait_for_devices(tuple(sorted(graph)))
                waited |= more | graph
                was_idle = False
            # Once idle, a few more flushes: CUPTI completes the last records as it learns
            # that their work is done.
            settled = settled + 1 if was_idle and not left else 0
            if settled >= 3 or time.monotonic() >= deadline:
                break
            time.sleep(pause)  # CUPTI's thread can deliver meanwhile
            pause = min(pause * 2, 0.005)
        self._drain(release=scopes)
        _reader.forget(scopes)
        return left

    def _wait_for_devices(
        self, devices: tuple[int, ...] | None = None
    ) -> tuple[threading.Event, set[int]]:
        """An event set once ``devices`` (default: those named by ``devices()``) finished the
        work queued on them until now (at once when there are none, or waiting failed:
        ``idle_error``), and the devices it waits for."""
        idle = threading.Event()
        if devices is None:
            self.idle_error = None
            devices = tuple(sorted(set(self._devices()))) if self._devices is not None else ()
        sync = self._synchronize
        if not devices or sync is None:
            idle.set()
            return idle, set()

        def wait() -> None:
            try:
                sync(devices)
            except Exception as exc:  # a device error: the flush goes on without the wait
                self.idle_error = f"{type(exc).__name__}: {exc}"
            finally:
                idle.set()

        threading.Thread(target=wait, name="kprof-cupti-idle", daemon=True).start()
        return idle, set(devices)

    def _account_drops(self) -> None:
        """Records lost since the last look (CUPTI's count, reset when read; kprof's discarded
        buffers and rows): counted, and reported to the profiles that were running."""
        c, r = self.cupti, _reader
        if c is None or r is None:
            return
        n_cupti = c.dropped()
        counts = r.stats()
        n_kprof = counts["discarded_records"] + counts.get("dropped_rows", 0)
        new_kprof = n_kprof - getattr(self, "_kprof_seen", 0)
        self._kprof_seen = n_kprof
        n = n_cupti + new_kprof
        if not n:
            return
        self.dropped_by_cupti += n_cupti
        self._dropped_since_start += n
        why = []
        if n_cupti:
            why.append(
                f"CUPTI dropped {n_cupti} for want of a buffer: {MAX_BUFFERS} buffers of "
                f"{BUFFER_SIZE} bytes were all in use"
            )
        if new_kprof:
            why.append(
                f"kprof discarded {new_kprof} past its memory bound ({MAX_BUFFERS} buffers "
                f"of {BUFFER_SIZE} bytes waiting to be read)"
            )
        if self.backend is not None:
            kp.dropped(self.backend, n, "; ".join(why))
        warnings.warn(
            f"kprof: {n} CUPTI activity record(s) were lost while the profile ran ("
            + "; ".join(why)
            + "): those kernels and copies are missing",
            RuntimeWarning,
            stacklevel=5,
        )

    # -- taking rows ----------------------------------------------------------------------------

    def _drain_loop(self) -> None:
        r = _reader
        while not self._drain_stop.is_set() and r is not None:
            r.wait(DRAIN_PERIOD_S)
            if self._drain_stop.is_set():
                break
            try:
                self._drain()
            except Exception as exc:  # a bug of kprof's: say it, stop using CUPTI's rows
                if self.backend is not None:
                    self.backend.disable(
                        f"reading CUPTI records failed: {type(exc).__name__}: {exc}"
                    )
                return

    def _drain(
        self, final: bool = False, release: tuple[int, ...] | None = None, account: bool = False
    ) -> None:
        """Take every ready row from the reader and hand them to the core as one batch."""
        r = _reader
        if r is None:
            return
        with self._take_lock:
            cols = r.take(final=final, release=release)
            self.foreign = r.join_foreign()
            if release is not None or final or account:
                self._account_drops()
            if cols is None or self.backend is None:
                return
            names = r.names.values
            queues = r.queues
            for dev, ctx, stream in queues[self._reader_queues :]:
                self._queues.append(self._queue_for(dev, ctx, stream))
            self._reader_queues = len(queues)
            batch = kp.ActivityColumns(
                scope=cols["scope"],
                kind=cols["kind"],
                name=cols["name"],
                names=names,
                queue=cols["queue"],
                queues=self._queues,
                begin=cols["begin"],
                end=cols["end"],
                nbytes=cols["nbytes"],
                launch_begin=cols["launch_begin"],
                launch_end=cols["launch_end"],
                correlation=cols["correlation"],
                detail=(_DETAIL, [cols[c] for c in _DETAIL_COLUMNS]),
                clock=self.clock_name(),
            )
            # Delivered holding the lock: a flush that finds nothing left to take has then
            # seen every row taken before it reach its profile (not arrive late).
            kp.deliver_columns(self.backend, batch)

    # -- clocks -------------------------------------------------------------------------------

    def clock_name(self) -> str:
        r = _reader
        if r is not None and r.compiled and r.timestamp_callback:
            return "CLOCK_MONOTONIC (kprof's timestamp callback)"
        return "CUPTI's default (CLOCK_REALTIME on Linux)"

    def _calibrate(self) -> tuple[int, int]:
        """CUPTI's clock against perf_counter_ns: the narrowest of a few brackets."""
        c = self.cupti
        assert c is not None
        best: tuple[int, int, int] | None = None
        for _ in range(CLOCK_SAMPLES):
            t0 = time.perf_counter_ns()
            ts = c.timestamp()
            t1 = time.perf_counter_ns()
            if best is None or t1 - t0 < best[0]:
                best = (t1 - t0, (t0 + t1) // 2 - ts, ts)
        assert best is not None
        self._offset = (best[1], (best[0] + 1) // 2)
        return self._offset

    def align(self, device_ns: int) -> kp.Alignment:
        r = _reader
        if r is not None and r.compiled and r.timestamp_callback:
            return kp.Alignment(
                device_ns,
                0,
                "CUPTI timestamps from kprof's timestamp callback "
                "(cuptiActivityRegisterTimestampCallback): CLOCK_MONOTONIC, perf_counter_ns's "
                "clock, no drift and no wall-clock steps",
            )
        offset, error = self._calibrate() if self.active else (self._offset or (0, 0))
        why = (
            "the pure-Python reader registers no timestamp callback (it would run Python "
            "for every timestamp)"
            if r is None or not r.compiled
            else "this CUPTI has no cuptiActivityRegisterTimestampCallback"
        )
        return kp.Alignment(
            device_ns + offset,
            error,
            f"cuptiGetTimestamp sampled against perf_counter_ns "
            f"(narrowest of {CLOCK_SAMPLES} brackets; {why})",
        )

    def stream_id(self, context: int, stream_ptr: int, per_thread: bool) -> int | None:
        """CUPTI's id of a stream handle (to put records on the queue events use)."""
        c = self.cupti
        if not self.active or c is None or c.GetStreamIdEx is None:
            return None
        import ctypes

        sid = ctypes.c_uint32(0)
        if c.GetStreamIdEx(context or None, stream_ptr or None, int(per_thread), ctypes.byref(sid)):
            return None
        return sid.value

    def context_id(self, context: int) -> int | None:
        """CUPTI's id of a context handle (records carry it; streams of two contexts may share
        a stream id)."""
        c = self.cupti
        if not self.active or c is None or c.GetContextId is None:
            return None
        import ctypes

        cid = ctypes.c_uint32(0)
        if c.GetContextId(context or None, ctypes.byref(cid)):
            return None
        return cid.value

    def stats(self) -> dict[str, int]:
        """The reader's counts (buffers, records, drops, unknown kinds skipped)."""
        return {} if _reader is None else dict(_reader.stats())


_DETAIL_COLUMNS = (
    "grid_x",
    "grid_y",
    "grid_z",
    "block_x",
    "block_y",
    "block_z",
    "device",
    "stream",
)


def _mask_devices(mask: int) -> set[int]:
    """The device ids of a reader's device bit mask."""
    return {d for d in range(64) if mask >> d & 1}


def _compiled() -> Any:
    return kp.load_plugin_part("kprof_cuda", "_cupti")


def _get_reader(c: Cupti) -> Any:
    """The process's reader, registered with CUPTI once: compiled where built (and not
    ``KPROF_PURE_PYTHON=1``), else pure Python."""
    global _reader
    if _reader is None:
        mod = _compiled()
        if mod is not None:
            from .cupti_native import NativeReader

            reader: Any = NativeReader(mod, c)
        else:
            from .cupti_pure import PureReader

            reader = PureReader(c)
        reader.register()
        _reader = reader
    return _reader


def _explain(exc: Exception) -> str:
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, CuptiError) and "SUBSCRIBER" in exc.name.upper():
        return f"CUPTI is in use by another tool (Nsight Systems, torch.profiler, ...): {text}"
    if "SUBSCRIBER" in text.upper():
        return f"CUPTI is in use by another tool (Nsight Systems, torch.profiler, ...): {text}"
    return f"enabling CUPTI activity records failed: {text}"
