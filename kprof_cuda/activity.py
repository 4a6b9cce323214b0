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
end does the same after flushing (``cupti_drain``). The activity kinds are enabled by the first
profile and disabled after the last one, after a forced flush. CUPTI's clock: ``cupti_clock``.
"""

from __future__ import annotations

import os
import threading
import warnings
import weakref
from collections.abc import Callable, Iterable
from typing import Any

from kprof import plugin as kp

from . import cupti_abi as abi
from . import cupti_clock
from .cupti_drain import Drain
from .cupti_lib import Cupti, CuptiUnavailable, explain
from .cupti_lib import load as _load_cupti
from .cupti_records import demangle
from .cupti_sites import Sites

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

_K = abi.KIND
_KINDS = (_K["EXTERNAL_CORRELATION"], _K["CONCURRENT_KERNEL"], _K["MEMCPY"], _K["MEMSET"])

# CUPTI takes one pair of buffer callbacks per process: one reader, registered once, whose rows
# go to whichever CuptiActivity is active (there is one per CudaPlugin; tests build several).
_reader: Any = None
_reader_lock = threading.Lock()
_current: CuptiActivity | None = None
#: Every CuptiActivity of the process, for the fork handler (``_forked``).
_activities: weakref.WeakSet[CuptiActivity] = weakref.WeakSet()

#: Why CUPTI is left alone in a child made by ``os.fork()`` while it was in use.
FORKED = (
    "this process is a child made by fork() while CUDA was in use, where CUDA and CUPTI "
    "cannot be used (CUDA's rule for a forked process); CUDA work in it is not recorded"
)


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
        self._load = load or _load_cupti
        #: Taking rows to the profiles, the end's flush, drops (``cupti_drain``).
        self.drain = Drain(self, queue_for, devices, synchronize)
        self._clock = cupti_clock.Clock()
        self.cupti: Cupti | None = None
        self.active = False
        self.reason: str | None = None  # why CUPTI is not used, when it is not
        self._enabled: list[int] = []
        self._apis_enabled = False
        #: Calls of kprof's lists this CUPTI refused to enable one by one (not calls of its
        #: version), at the last enabling.
        self.apis_refused = 0
        #: The reader's records and the rows taken when this capture started.
        self._counted_from = (0, 0)
        self._memory_apis = False
        self.backend: kp.Backend | None = None
        self.runtime_records = True
        self._warned = False
        #: Launch sites through CUPTI's callback API (``cupti_sites``).
        self.sites = Sites()
        #: In a child made by ``os.fork()`` while CUPTI was in use (``after_fork``).
        self.forked = False
        _activities.add(self)

    @property
    def idle_error(self) -> str | None:
        """Why the last end could not wait for its devices (None: it could, or had none)."""
        return self.drain.idle_error

    @property
    def dropped_by_cupti(self) -> int:
        """Records CUPTI dropped while kprof's profiles ran (for want of a buffer)."""
        return self.drain.dropped_by_cupti

    @property
    def foreign(self) -> int:
        """Work records of launches outside every profile, skipped by the reader."""
        return self.drain.foreign

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
        reason = FORKED if self.forked else self.probe()
        if reason is None:
            try:
                self._enable()
            except Exception as exc:
                self._disable()
                self._release()
                reason = explain(exc)
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
        assert self.cupti is not None
        self.sites.start(self.cupti, _reader)
        self.drain.start()
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
        # At every capture's start (also restarts the clock): another tool may have replaced
        # kprof's callbacks since the last one, and the capture would then be silently empty.
        reader.register()
        if reader.compiled:
            reader.max_rows = MAX_ROWS
        self.drain.reset(reader)
        c.dropped()  # what CUPTI dropped before this profile is not its loss
        self._clock.calibrate(c)
        for kind in _KINDS:
            c.check(c.ActivityEnable(kind), f"cuptiActivityEnable({kind})")
            self._enabled.append(kind)
        # EXTERNAL_CORRELATION records come with API records. Only the calls that enqueue
        # work need them: enabled one by one (cuptiActivityEnable{Driver,Runtime}Api, CUDA
        # 12.6+), CUPTI writes no record for the many calls that enqueue nothing
        # (cuCtxGetCurrent, cudaGetDevice...), which kprof would decode only to drop.
        self._counted_from = (reader.stats()["records"], self.drain.rows_taken)
        if self._enable_apis(True):
            return
        for kind in (_K["DRIVER"], _K["RUNTIME"]):
            c.check(c.ActivityEnable(kind), f"cuptiActivityEnable({kind})")
            self._enabled.append(kind)

    def _enable_apis(self, on: bool) -> bool:
        """Enable (or disable) the API records of the calls that enqueue work, one by one;
        False when this CUPTI cannot."""
        refused = self._per_api((abi.WORK_DRIVER, abi.WORK_RUNTIME), on)
        self._apis_enabled = on and refused is not None
        if on and refused is not None:
            self.apis_refused = refused
        return refused is not None

    def _per_api(self, ids: tuple[frozenset[int], frozenset[int]], on: bool) -> int | None:
        """Enable (or disable) the driver and runtime API records of the calls ``ids`` names,
        one by one; how many calls this CUPTI refused. A refused call is not one of its
        version (the lists name the newest CUDA's): skipped. None, with nothing left enabled,
        when CUPTI cannot enable calls one by one (it refuses every call of a kind, or has no
        such function)."""
        c = self.cupti
        assert c is not None
        if c.ActivityEnableDriverApi is None or c.ActivityEnableRuntimeApi is None:
            return None
        refused = 0
        for enable, cbids in zip((c.ActivityEnableDriverApi, c.ActivityEnableRuntimeApi), ids):
            took = 0
            for cbid in sorted(cbids):
                if enable(cbid, int(on)) == 0:
                    took += 1
                else:
                    refused += 1
            if on and not took:
                self._per_api(ids, False)
                return None
        return refused

    # -- device memory (MEMORY2) ----------------------------------------------------------------

    def memory_start(self, label: Callable[[int, int], str]) -> bool:
        """Read allocations and frees too (CUPTI's MEMORY2 records, and the API records of the
        calls that make them, for their scope): while CUPTI is on, for ``memory_install``.
        ``label``: a device id and CUPTI's memory kind -> the memory device's label. False
        when this CUPTI cannot (the caller falls back to CuPy's pool hook)."""
        c = self.cupti
        if not self.active or c is None or not self._apis_enabled:
            return False
        kind = _K["MEMORY2"]
        if c.ActivityEnable(kind) != 0:
            return False
        self._enabled.append(kind)
        if not self._enable_memory_apis(True):
            c.ActivityDisable(kind)
            self._enabled.remove(kind)
            return False
        self.drain.memory_label = label
        self.sites.memory(True)
        return True

    def memory_stop(self) -> None:
        """Stop reading allocations and frees (``memory_remove``)."""
        c = self.cupti
        self.drain.memory_label = None
        self.sites.memory(False)
        if c is None:
            return
        self._enable_memory_apis(False)
        kind = _K["MEMORY2"]
        if kind in self._enabled:
            self._enabled.remove(kind)
            c.ActivityDisable(kind)

    def _enable_memory_apis(self, on: bool) -> bool:
        done = self._per_api((abi.MEMORY_DRIVER, abi.MEMORY_RUNTIME), on) is not None
        self._memory_apis = on and done
        return done

    def host_shift(self) -> int:
        """What turns a row's CUPTI time (as the reader hands it) into perf_counter_ns."""
        return self._clock.align(_reader, 0, None).host_ns

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
        if self._memory_apis:
            self._enable_memory_apis(False)
        while self._enabled:
            c.ActivityDisable(self._enabled.pop())

    def stop(self) -> None:
        """The last profile ended: a forced flush (no record stays in CUPTI's hands for the
        next profile), what it brings is late; disable; forget."""
        if not self.active:
            return
        self.drain.stop()
        c = self.cupti
        assert c is not None
        try:
            c.ActivityFlushAll(abi.FLAG_FLUSH_FORCED)
            self.drain.take()
            self._disable()
            c.ActivityFlushAll(abi.FLAG_FLUSH_FORCED)
            self.drain.take(final=True)
        finally:
            self.sites.stop()
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
        if c.ActivityPushExternalCorrelationId(abi.EXT_KIND_CUSTOM2, scope) != 0:
            return False
        self.sites.enter()
        return True

    def scope_exit(self, scope: int) -> None:
        if self.active:
            c = self.cupti
            assert c is not None
            self.sites.exit()
            c.ActivityPopExternalCorrelationId(abi.EXT_KIND_CUSTOM2, None)

    def flush(self, scopes: tuple[int, ...], timeout: float) -> int:
        """Flush until every launch of ``scopes`` has its device record, or ``timeout``
        (``Drain.flush``); returns how many are still missing."""
        if self.forked and not self._warned:
            self._warned = True
            warnings.warn(f"kprof: {FORKED}", RuntimeWarning, stacklevel=4)
        if not self.active or _reader is None:
            return 0
        left = self.drain.flush(scopes, timeout)
        if self.drain.no_work:
            warnings.warn(
                f"kprof: {self.drain.no_work} CUDA launch(es) of the profile made no device "
                f"record though the devices finished their work (launched into a stream being "
                f"captured into a CUDA graph, or an empty graph): no rows for them",
                RuntimeWarning,
                stacklevel=4,
            )
        return left

    def after_fork(self) -> None:
        """In a child made by ``os.fork()``: CUPTI's threads are gone and CUDA cannot be used
        here, so no CUPTI call is made from now on (the profile's end says so once); what the
        parent's threads held is let go."""
        self.drain.after_fork()
        self.sites.after_fork()
        if self.active:
            self.forked, self.active, self.reason = True, False, FORKED

    # -- clocks -------------------------------------------------------------------------------

    def clock_name(self) -> str:
        return cupti_clock.clock_name(_reader)

    def align(self, device_ns: int) -> kp.Alignment:
        return self._clock.align(_reader, device_ns, self.cupti if self.active else None)

    def stream_id(self, context: int, stream_ptr: int, per_thread: bool) -> int | None:
        """CUPTI's id of a stream handle (to put records on the queue events use)."""
        c = self.cupti
        if not self.active or c is None:
            return None
        return cupti_clock.stream_id(c, context, stream_ptr, per_thread)

    def context_id(self, context: int) -> int | None:
        """CUPTI's id of a context handle (records carry it; streams of two contexts may share
        a stream id)."""
        c = self.cupti
        if not self.active or c is None:
            return None
        return cupti_clock.context_id(c, context)

    def stats(self) -> dict[str, int]:
        """The reader's counts (buffers, records, drops, unknown kinds skipped), and the calls
        of kprof's lists this CUPTI did not know (``apis_refused``)."""
        counts = {} if _reader is None else dict(_reader.stats())
        return {**counts, "apis_refused": self.apis_refused}

    def records_per_row(self) -> float | None:
        """CUPTI's records per kernel, copy or memset row since this capture started: 3 where
        calls are enabled one by one (the call's API record, its external correlation, the
        work's), more where whole API kinds are (a record for every CUDA call); None before
        any row."""
        if _reader is None:
            return None
        rows = self.drain.rows_taken - self._counted_from[1]
        if rows <= 0:
            return None
        records: int = _reader.stats()["records"]
        return (records - self._counted_from[0]) / rows

    def notes(self) -> list[str]:
        """What the report should say of how CUPTI was enabled: a line where every CUDA call
        writes a record (this CUPTI cannot enable calls one by one), with the records per
        launch this cost; a line where this CUPTI is newer than any kprof was checked with."""
        if not self.active:
            return []
        out = []
        if not self._apis_enabled:
            per = self.records_per_row()
            cost = "" if per is None else f" ({per:.1f} records per kernel, copy or memset)"
            out.append(
                f"{self.version()} cannot enable CUDA calls one by one: every CUDA call of the "
                f"process writes a CUPTI record{cost}, which costs the launching threads more"
            )
        newer = self.newer()
        if newer:
            out.append(newer)
        return out

    def newer(self) -> str:
        """Why to check the rows, where this CUPTI is newer than the newest kprof's record
        offsets were checked against; else ""."""
        c = self.cupti
        if c is None or c.api_version <= abi.NEWEST_CHECKED_API:
            return ""
        return (
            f"libcupti API {c.api_version} is newer than any kprof's record layout was checked "
            f"against (API {abi.NEWEST_CHECKED_API}): its records are read at the offsets of "
            f"those headers; check the rows against CUDA events once"
        )

    def enabling(self) -> str:
        """How the calls' records are enabled (and whether this CUPTI is newer than any kprof
        was checked with), for ``kprof backends``."""
        newer = self.newer()
        newer = f"; {newer}" if newer else ""
        if self._apis_enabled:
            refused = f"; {self.apis_refused} newer calls unknown here" if self.apis_refused else ""
            return f"calls enabled one by one{refused}{newer}"
        return f"every CUDA call recorded (this CUPTI cannot enable calls one by one){newer}"


def _compiled() -> Any:
    from .cupti_native import compiled_reader

    return compiled_reader()


def _get_reader(c: Cupti) -> Any:
    """The process's reader (registered with CUPTI at each capture's start, ``_enable``):
    compiled where built (and not ``KPROF_PURE_PYTHON=1``), else pure Python."""
    global _reader
    if _reader is None:
        mod = _compiled()
        if mod is not None:
            from .cupti_native import NativeReader

            reader: Any = NativeReader(mod, c)
        else:
            from .cupti_pure import PureReader

            reader = PureReader(c)
        _reader = reader
    return _reader


def _forked() -> None:
    """In a child made by ``os.fork()``: the locks the parent's threads may have held at the
    fork start over free, and every client that was using CUPTI leaves it alone."""
    global _reader_lock
    _reader_lock = threading.Lock()
    if _reader is not None:
        _reader.after_fork()
    for act in list(_activities):
        act.after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)
