"""Every kernel, copy and memset of a profile, from CUPTI's Activity API (through cupti-python).

How work is tied to kprof's profiles (scopes; see ``kprof_core/activity.py``): when a profile
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
pushes its id on top of the outer one's. (CUPTI's callback API would give each launch's
Python context instead, at the price of a Python call per CUDA call: not on the launch path.)

Bounded: records come in buffers of ``BUFFER_SIZE`` bytes that CUPTI fills and hands back
(from its own thread) as they fill, and at flushes; each is decoded into ``DeviceRecord``s and
handed to kprof at once, so only correlation entries of launches whose device record has not
come yet are kept. The activity kinds are enabled by the first profile and disabled after
the last one.
"""

from __future__ import annotations

import ctypes
import threading
import time
import warnings
from collections.abc import Callable
from importlib import metadata
from typing import Any

import kprof
from kprof import capture

from .cupti_records import COPY_NAMES, MEMSET, demangle, fields, kernel_name, work_cbids

__all__ = ["BUFFER_SIZE", "CuptiActivity", "demangle"]

#: Bytes per activity buffer: ~2,000 kernel records. CUPTI asks for a new one when one fills.
BUFFER_SIZE = 1 << 20
#: Buffers handed to CUPTI and not yet given back, at most. Each is decoded and given back as
#: soon as CUPTI completes it, so this is only reached when decoding falls far behind; CUPTI
#: then drops records, and kprof counts and says so at the profile's end.
MAX_BUFFERS = 64
#: Clock samples per calibration (the narrowest bracket is kept).
CLOCK_SAMPLES = 7
#: Correlation entries of launches whose records may still come, before the oldest are dropped
#: (launches whose device record never comes, e.g. failed ones, must not grow it forever).
MAX_CORRELATIONS = 1 << 20

# CUPTI takes one pair of buffer callbacks per process: registered once, they hand buffers to
# whichever CuptiActivity is active (there is one per CudaPlugin; tests build several).
_registered = False
_current: CuptiActivity | None = None
_current_lock = threading.Lock()


_outstanding = 0


def _on_requested() -> tuple[int, int]:
    global _outstanding
    with _current_lock:
        if _outstanding >= MAX_BUFFERS:
            return 0, 0  # no buffer: CUPTI drops the records (counted at the flush)
        _outstanding += 1
    return BUFFER_SIZE, 0


def _on_completed(activities: list[Any]) -> None:
    global _outstanding
    try:
        client = _current
        if client is not None:
            client._buffer_completed(activities)
    finally:
        with _current_lock:
            _outstanding = max(0, _outstanding - 1)


class CuptiActivity:
    """kprof's one CUPTI client in the process: enables the activity kinds while profiles run,
    pushes scopes as external correlation ids, decodes completed buffers into records.

    ``queue_for(device, stream_id)`` gives the plugin's queue object for a CUPTI stream;
    ``load`` imports the bindings (``cupti.cupti``), replaced by tests.
    """

    def __init__(
        self, queue_for: Callable[[int, int], Any], load: Callable[[], Any] | None = None
    ) -> None:
        self._queue_for = queue_for
        self._load = load or _import_cupti
        self.cupti: Any = None
        self.active = False
        self.reason: str | None = None  # why CUPTI is not used, when it is not
        self._enabled: list[Any] = []
        self._kinds: dict[str, int] = {}
        self._ext_kind: Any = None
        self._lock = threading.Lock()
        self.backend: kprof.Backend | None = None
        # correlation id -> [scope, launch_begin, launch_end, keep]; see _decode.
        self._corr: dict[int, list[Any]] = {}
        # scope -> correlation ids of its launches whose device record has not come yet.
        self._waiting: dict[int, set[int]] = {}
        self._work_cbids: dict[int, frozenset[int]] = {}
        self._graph_cbids: frozenset[tuple[int, int]] = frozenset()
        self._copy_names: dict[int, str] = {}
        self._offset: tuple[int, int] | None = None
        self.runtime_records = False
        self._apis_enabled = False
        self.dropped_by_cupti = 0
        self.foreign = 0
        self._warned = False

    # -- availability -------------------------------------------------------------------------

    def version(self) -> str | None:
        try:
            return metadata.version("cupti-python")
        except metadata.PackageNotFoundError:
            return None

    def probe(self) -> str | None:
        """None when CUPTI can be used here; otherwise why not (without enabling anything)."""
        if self.active:
            return None
        try:
            cupti = self.cupti or self._load()
        except ImportError as exc:
            return (
                f"cupti-python is not installed ({exc}); pip install 'kprof[cuda]' "
                f"(CUDA 12) or 'kprof[cuda13]'"
            )
        except Exception as exc:
            return f"cupti-python failed to import: {type(exc).__name__}: {exc}"
        self.cupti = cupti
        try:
            cupti.get_timestamp()  # loads libcupti; fails without a driver
        except Exception as exc:
            return f"CUPTI cannot be used: {type(exc).__name__}: {exc}"
        return None

    # -- on and off -------------------------------------------------------------------------------

    def start(self, backend: kprof.Backend) -> bool:
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
        return True

    def _enable(self) -> None:
        global _registered, _current
        c = self.cupti
        kinds = c.ActivityKind
        with _current_lock:
            if _current is not None and _current is not self:
                raise RuntimeError("another kprof CUDA backend in this process holds CUPTI")
            if not _registered:
                c.activity_register_callbacks(_on_requested, _on_completed)
                _registered = True
            _current = self
        if not self._kinds:
            self._ext_kind = c.ExternalCorrelationKind.CUSTOM2
            self._kinds = {
                "kernel": int(kinds.CONCURRENT_KERNEL),
                "memcpy": int(kinds.MEMCPY),
                "memset": int(kinds.MEMSET),
                "runtime": int(kinds.RUNTIME),
                "driver": int(kinds.DRIVER),
                "ext": int(kinds.EXTERNAL_CORRELATION),
            }
            self._work_cbids, self._graph_cbids = work_cbids(c)
            self._copy_names = {
                int(m.value): COPY_NAMES.get(m.name, "[copy]") for m in c.ActivityMemcpyKind
            }
        self._calibrate()
        for kind in (
            kinds.EXTERNAL_CORRELATION,
            kinds.CONCURRENT_KERNEL,
            kinds.MEMCPY,
            kinds.MEMSET,
        ):
            c.activity_enable(kind)
            self._enabled.append(kind)
        # EXTERNAL_CORRELATION records come with API records. Only the calls that enqueue
        # work need them: enabled one by one (cuptiActivityEnable{Driver,Runtime}Api, CUDA
        # 12.6+), CUPTI writes no record for the many calls that enqueue nothing
        # (cuCtxGetCurrent, cudaGetDevice...), which kprof would decode only to drop.
        # It is also how cupti-python 12.8, whose activity_enable refuses RUNTIME, gets the
        # runtime calls (cuBLAS launches and CuPy's copies go through the runtime).
        if self._enable_apis(True):
            self.runtime_records = True
            return
        c.activity_enable(kinds.DRIVER)  # CuPy launches kernels with cuLaunchKernel
        self._enabled.append(kinds.DRIVER)
        try:
            c.activity_enable(kinds.RUNTIME)
            self._enabled.append(kinds.RUNTIME)
            self.runtime_records = True
        except NotImplementedError:
            self.runtime_records = False

    def _enable_apis(self, on: bool) -> bool:
        """Enable (or disable) the API records of the calls that enqueue work, one by one;
        False when these bindings or this CUPTI cannot."""
        c = self.cupti
        try:
            by_kind = (
                (c.activity_enable_driver_api, int(c.ActivityKind.DRIVER)),
                (c.activity_enable_runtime_api, int(c.ActivityKind.RUNTIME)),
            )
        except AttributeError:
            return False
        try:
            for enable, kind in by_kind:
                for cbid in sorted(self._work_cbids.get(kind, ())):
                    enable(cbid, int(on))
        except Exception:
            if on:
                self._enable_apis(False)
            return False
        self._apis_enabled = on
        return True

    def _release(self) -> None:
        global _current
        with _current_lock:
            if _current is self:
                _current = None

    def _disable(self) -> None:
        c = self.cupti
        if self._apis_enabled:
            self._enable_apis(False)
        while self._enabled:
            kind = self._enabled.pop()
            try:
                c.activity_disable(kind)
            except Exception:
                pass

    def stop(self) -> None:
        """The last profile ended: hand over what is buffered (it is late by now), disable."""
        if not self.active:
            return
        try:
            self.cupti.activity_flush_all(0)
        except Exception:
            pass
        self._disable()
        try:  # what completed meanwhile (disabling ends the kinds' records): late, said so
            self.cupti.activity_flush_all(0)
        except Exception:
            pass
        self._release()
        self.active = False
        with self._lock:
            self._corr.clear()
            self._waiting.clear()

    # -- scopes -------------------------------------------------------------------------------

    def scope_enter(self, scope: int) -> bool:
        if not self.active:
            return False
        self.cupti.activity_push_external_correlation_id(self._ext_kind, scope)
        return True

    def scope_exit(self, scope: int) -> None:
        if self.active:
            self.cupti.activity_pop_external_correlation_id(self._ext_kind)

    def flush(self, scopes: tuple[int, ...], timeout: float) -> int:
        """Flush until every launch of ``scopes`` has its device record, or ``timeout``."""
        if not self.active:
            return 0
        deadline = time.monotonic() + timeout
        pause = 1e-4
        while True:
            self.cupti.activity_flush_all(0)
            with self._lock:
                left = sum(len(self._waiting.get(s, ())) for s in scopes)
                if not left or time.monotonic() >= deadline:
                    # Entries of launches still waiting stay (bounded by MAX_CORRELATIONS), so
                    # that their records, if they come, are known as this scope's: late.
                    waiting = set()
                    for s in scopes:
                        waiting |= self._waiting.pop(s, set())
                    for corr in [
                        c for c, e in self._corr.items() if e[0] in scopes and c not in waiting
                    ]:
                        del self._corr[corr]
                    break
            time.sleep(pause)  # releases the GIL: CUPTI's thread can deliver meanwhile
            pause = min(pause * 2, 0.005)
        self._say_dropped()
        return left

    def _say_dropped(self) -> None:
        """Records CUPTI dropped for want of a buffer since the last look: counted, said."""
        n = ctypes.c_size_t(0)
        try:
            self.cupti.activity_get_num_dropped_records(0, 0, ctypes.addressof(n))
        except Exception:
            return
        if n.value:
            self.dropped_by_cupti += n.value
            warnings.warn(
                f"kprof: CUPTI dropped {n.value} activity record(s) while the profile "
                f"ran, for want of a buffer ({MAX_BUFFERS} buffers of {BUFFER_SIZE} "
                f"bytes were all in use): those kernels and copies are missing",
                RuntimeWarning,
                stacklevel=5,
            )

    # -- clocks -------------------------------------------------------------------------------

    def _calibrate(self) -> tuple[int, int]:
        """CUPTI's clock against perf_counter_ns: the narrowest of a few brackets."""
        get = self.cupti.get_timestamp
        best: tuple[int, int, int] | None = None
        for _ in range(CLOCK_SAMPLES):
            t0 = time.perf_counter_ns()
            c = get()
            t1 = time.perf_counter_ns()
            if best is None or t1 - t0 < best[0]:
                best = (t1 - t0, (t0 + t1) // 2 - c, c)
        assert best is not None
        self._offset = (best[1], (best[0] + 1) // 2)
        return self._offset

    def align(self, device_ns: int) -> kprof.Alignment:
        offset, error = self._calibrate() if self.active else (self._offset or (0, 0))
        return kprof.Alignment(
            device_ns + offset,
            error,
            f"cuptiGetTimestamp sampled against perf_counter_ns "
            f"(narrowest of {CLOCK_SAMPLES} brackets)",
        )

    # -- buffers --------------------------------------------------------------------------------

    def _buffer_completed(self, activities: list[Any]) -> None:
        """Runs on CUPTI's thread (or a flushing one): never raise into CUPTI."""
        try:
            records = self._decode(activities)
            if records and self.backend is not None:
                capture.deliver(self.backend, records)
        except Exception as exc:  # a bug of kprof's must not reach CUPTI's thread
            if self.backend is not None:
                self.backend.disable(f"decoding CUPTI records failed: {type(exc).__name__}: {exc}")

    def _decode(self, activities: list[Any]) -> list[capture.DeviceRecord]:
        k = self._kinds
        kernel, memcpy, memset = k["kernel"], k["memcpy"], k["memset"]
        runtime, driver, ext = k["runtime"], k["driver"], k["ext"]
        ours = int(self._ext_kind)
        work, graph = self._work_cbids, self._graph_cbids
        out: list[capture.DeviceRecord] = []
        with self._lock:
            corr_map, waiting = self._corr, self._waiting
            for a in activities:
                get = fields(a)
                kind = int(get("kind"))
                if kind == ext:
                    if int(get("external_kind")) == ours:
                        corr_map[get("correlation_id")] = [int(get("external_id")), 0, 0, False]
                        if len(corr_map) > MAX_CORRELATIONS:
                            del corr_map[next(iter(corr_map))]
                    continue
                if kind == runtime or kind == driver:
                    corr = get("correlation_id")
                    e = corr_map.get(corr)
                    if e is None:
                        continue
                    cbid = int(get("cbid"))
                    if cbid not in work.get(kind, ()):
                        del corr_map[corr]  # a call that enqueues no device work
                        continue
                    e[1], e[2] = get("start"), get("end")
                    e[3] = (kind, cbid) in graph  # several records share its correlation id
                    waiting.setdefault(e[0], set()).add(corr)
                    continue
                if kind != kernel and kind != memcpy and kind != memset:
                    continue
                corr = get("correlation_id")
                e = corr_map.get(corr)
                if e is None:
                    self.foreign += 1
                    continue
                scope = e[0]
                if not e[3]:
                    del corr_map[corr]
                w = waiting.get(scope)
                if w is not None:
                    w.discard(corr)
                q = self._queue_for(int(get("device_id")), int(get("stream_id")))
                start, end = get("start"), get("end")
                if kind == kernel:
                    detail = (
                        f"grid ({get('grid_x')}, {get('grid_y')}, {get('grid_z')}) block "
                        f"({get('block_x')}, {get('block_y')}, {get('block_z')}), device "
                        f"{get('device_id')}, CUPTI stream {get('stream_id')}"
                    )
                    rec = capture.DeviceRecord(
                        scope,
                        capture.KERNEL,
                        demangle(kernel_name(a, get)),
                        q,
                        start,
                        end,
                        -1,
                        e[1],
                        e[2],
                        detail,
                    )
                elif kind == memcpy:
                    name = self._copy_names.get(int(get("copy_kind")), "[copy]")
                    rec = capture.DeviceRecord(
                        scope, capture.COPY, name, q, start, end, int(get("bytes")), e[1], e[2]
                    )
                else:
                    rec = capture.DeviceRecord(
                        scope, capture.COPY, MEMSET, q, start, end, int(get("bytes")), e[1], e[2]
                    )
                out.append(rec)
        return out

    def stream_id(self, context: int, stream_ptr: int, per_thread: bool) -> int | None:
        """CUPTI's id of a stream handle (to put records on the queue events use)."""
        if not self.active:
            return None
        try:
            return int(self.cupti.get_stream_id_ex(context, stream_ptr, int(per_thread)))
        except Exception:
            return None


def _import_cupti() -> Any:
    # cupti-python 12.8 imports cuda-bindings' deprecated ``cuda.cuda`` alias: not the user's
    # concern, so its DeprecationWarning is kept out of their output.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from cupti import cupti
    return cupti


def _explain(exc: Exception) -> str:
    text = f"{type(exc).__name__}: {exc}"
    if "MULTIPLE_SUBSCRIBERS" in text.upper() or "SUBSCRIBER" in text.upper():
        return f"CUPTI is in use by another tool (Nsight Systems, torch.profiler, ...): {text}"
    return f"enabling CUPTI activity records failed: {text}"
