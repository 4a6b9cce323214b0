"""The pure-Python CUPTI reader, for installs without the compiled one (``_cupti_src/``): same
rows, same join, same counts; never a Python object per record.

CUPTI calls two ctypes callbacks, once per buffer (one GIL acquisition each): the request
callback hands out a buffer, the completion callback queues it. :meth:`PureReader.take`, on a
Python thread (kprof's drain thread or the flushing one), walks each completed buffer once to
find its records' offsets, with CUPTI's own record sizes (learned per kind from
``cuptiActivityGetNextRecord``'s steps; never ``sizeof`` of a compiled struct), then reads
every field of every record of a kind with one numpy gather by offset (``cupti_abi``). The
join of external-correlation, API and work records is done on numpy arrays too
(:class:`Join`), so it does not depend on the order the records come in.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import numpy as np

from . import cupti_abi as abi
from .cupti_join import RAW_COLUMNS as _RAW
from .cupti_join import Join, rebase
from .cupti_layout import ROW_COLUMNS
from .cupti_lib import COMPLETE, REQUEST, Cupti
from .cupti_memory_rows import memory_rows
from .cupti_pure_sites import PureSites
from .cupti_records import Interner

__all__ = ["ROW_COLUMNS", "PureReader"]

_K = abi.KIND
_KERNEL, _MEMCPY, _MEMSET = _K["CONCURRENT_KERNEL"], _K["MEMCPY"], _K["MEMSET"]
_DRIVER, _RUNTIME, _EXT = _K["DRIVER"], _K["RUNTIME"], _K["EXTERNAL_CORRELATION"]
_MEMORY = _K["MEMORY2"]
_KNOWN = frozenset((_KERNEL, _MEMCPY, _MEMSET, _DRIVER, _RUNTIME, _EXT, _MEMORY))
_MEM_DRIVER = np.array(sorted(abi.MEMORY_DRIVER), np.uint64)
_MEM_RUNTIME = np.array(sorted(abi.MEMORY_RUNTIME), np.uint64)
_WORK_DRIVER = np.array(sorted(abi.WORK_DRIVER), np.uint64)
_WORK_RUNTIME = np.array(sorted(abi.WORK_RUNTIME), np.uint64)
# Calls whose records share one correlation id (graph launches, batched copies).
_SEVERAL_DRIVER = np.array(sorted(abi.SEVERAL_DRIVER), np.uint64)
_SEVERAL_RUNTIME = np.array(sorted(abi.SEVERAL_RUNTIME), np.uint64)


class PureReader(PureSites):
    """Buffers for CUPTI and their decoding, in Python (see the module's docstring)."""

    compiled = False

    def __init__(self, cupti: Cupti) -> None:
        self.cupti = cupti
        self.buffer_size = 1 << 20
        self.max_buffers = 64
        self.refuse_ok = cupti.api_version >= abi.REFUSE_BUFFERS_FROM_API
        self._lock = threading.Lock()
        self._free: list[Any] = []
        self._bufs: dict[int, Any] = {}  # address -> the ctypes array (kept alive)
        self._out = 0  # buffers in CUPTI's hands
        self._done: list[tuple[int, int]] = []  # completed, not decoded: (address, valid)
        self.ready = threading.Event()
        self.names = Interner()
        self._queues: dict[tuple[int, int, int], int] = {}
        self.queues: list[tuple[int, int, int]] = []
        self.join = Join()
        self._sizes: dict[int, int] = {}
        self.counts = {
            "buffers": 0,  # completed buffers CUPTI handed back
            "decoded": 0,  # of those, decoded
            "refused": 0,  # requests refused (CUPTI then drops records; API >= 27 only)
            "discarded_buffers": 0,  # completed buffers discarded past the memory bound
            "discarded_records": 0,
            "foreign_buffers": 0,  # completed buffers that were another tool's: read, not kept
            "unknown_kinds": 0,  # records of kinds kprof does not read: skipped
            "records": 0,
        }
        self.ext_kind = abi.EXT_KIND_CUSTOM2
        #: Subtracted from every timestamp handed over (CUPTI's default clock, CLOCK_REALTIME,
        #: is beyond kprof's value limit; ``cupti_clock`` adds it back): CUPTI's clock now.
        self.time_base = cupti.timestamp()
        # ctypes keeps no reference to these: the reader does, for the process's life.
        self._request_cb = REQUEST(self._requested)
        self._complete_cb = COMPLETE(self._completed)
        PureSites.__init__(self)

    # -- CUPTI's callbacks (any thread; one GIL acquisition per buffer) ------------------------

    def after_fork(self) -> None:
        """In a child made by ``os.fork()``: the lock may have been held by CUPTI's thread,
        which is not here."""
        self._lock = threading.Lock()

    def register(self) -> None:
        """kprof's callbacks, registered at every capture's start (another tool may have
        replaced them since the last one); the clock restarts with them."""
        self.cupti.check(
            self.cupti.ActivityRegisterCallbacks(self._request_cb, self._complete_cb),
            "cuptiActivityRegisterCallbacks",
        )
        self.restart_clock()

    def _requested(self, buf: Any, size: Any, max_records: Any) -> None:
        lent = False
        try:
            with self._lock:
                held = self._out + len(self._done)
                if held >= self.max_buffers and self.refuse_ok:
                    # CUPTI drops records (counted by cuptiActivityGetNumDroppedRecords).
                    self.counts["refused"] += 1
                    buf[0], size[0], max_records[0] = None, 0, 0
                    return
                self._out += 1
                lent = True
                mem = self._free.pop() if self._free else None
            if mem is None or len(mem) * 8 != self.buffer_size:
                mem = (ctypes.c_uint64 * (self.buffer_size // 8))()
            addr = ctypes.addressof(mem)
            self._bufs[addr] = mem
            buf[0], size[0], max_records[0] = addr, self.buffer_size, 0
        except BaseException:  # never raise into CUPTI: it gets no buffer, and none is out
            buf[0], size[0], max_records[0] = None, 0, 0
            if lent:
                with self._lock:
                    self._out -= 1

    def _completed(self, ctx: Any, stream: int, buf: Any, size: int, valid: int) -> None:
        try:
            with self._lock:
                if not buf:
                    self._out = max(0, self._out - 1)
                    return
                if buf in self._bufs:
                    self._out = max(0, self._out - 1)
                else:
                    # Another tool's buffer (lent before kprof's callbacks replaced its
                    # own): read, never kept (_recycle keeps only kprof's own memory).
                    self.counts["foreign_buffers"] += 1
                self.counts["buffers"] += 1
                if valid and len(self._done) >= self.max_buffers:
                    # Past the bound (CUPTI before API 27 must never be refused a buffer):
                    # this buffer's records are discarded and counted.
                    self.counts["discarded_buffers"] += 1
                    self.counts["discarded_records"] += len(self._walk(buf, valid)[0])
                    valid = 0
                if valid:
                    self._done.append((buf, valid))
                else:
                    self._recycle(buf)
            if valid:
                self.ready.set()
        except BaseException:
            pass

    def _recycle(self, addr: int) -> None:
        mem = self._bufs.pop(addr, None)
        if mem is not None and len(self._free) < 4:
            self._free.append(mem)

    # -- decoding (a Python thread, holding the GIL once per batch) ----------------------------

    def restart_clock(self) -> None:
        """The first profile starts: timestamps are handed relative to CUPTI's clock now."""
        self.time_base = self.cupti.timestamp()

    def apply_limits(self) -> None:
        """The limits are read where used: nothing to hand over (the compiled reader's twin)."""

    @property
    def max_launches(self) -> int:
        """Live launches kept (``cupti_layout.MAX_LAUNCHES``): the join's."""
        return self.join.max_launches

    @max_launches.setter
    def max_launches(self, n: int) -> None:
        self.join.max_launches = n

    def backlog(self) -> int:
        return len(self._done)

    def wait(self, timeout: float) -> None:
        """Until a buffer completes, or ``timeout`` (the drain thread's pace)."""
        self.ready.wait(timeout)

    def wake(self) -> None:
        self.ready.set()

    def waiting(self, scopes: tuple[int, ...]) -> int:
        return self.join.waiting(scopes)

    def graph_devices(self, scopes: tuple[int, ...]) -> int:
        return self.join.graph_devices(scopes)

    def forget(self, scopes: tuple[int, ...]) -> None:
        self.join.forget(scopes)

    def join_foreign(self) -> int:
        return self.join.foreign

    def stats(self) -> dict[str, int]:
        j = self.join
        return dict(
            self.counts,
            foreign=j.foreign,
            forgotten=j.forgotten,
            launches=len(j.corr),
            pending=len(j.pending["kind"]),
        )

    def reset(self) -> None:
        """The last profile ended: launches and pending rows are forgotten (counts stay)."""
        old = self.join
        self.join = Join()
        self.join.foreign, self.join.forgotten = old.foreign, old.forgotten
        self.join.max_launches = old.max_launches
        self._queues.clear()
        self.queues.clear()

    def take(
        self, final: bool = False, release: tuple[int, ...] | None = None
    ) -> dict[str, Any] | None:
        """Decode every completed buffer and join: the ready rows as ``ROW_COLUMNS`` (int64
        numpy arrays), or None when there are none."""
        with self._lock:
            done, self._done = self._done, []
            self.ready.clear()
        # After the buffers: every record in them was written after its call's callback.
        site_corr, site = self.take_sites()
        parts = []
        for addr, valid in done:
            try:
                parts.append(self._decode(addr, valid))
            finally:
                with self._lock:
                    self._recycle(addr)
                self.counts["decoded"] += 1
        if parts:
            raw = {c: np.concatenate([p[0][c] for p in parts]) for c in _RAW}
            ext = [np.concatenate([p[i] for p in parts]) for i in range(1, 9)]
            e0, e1, a0, a1, a2, a3, no_work, mem = ext
            self.join.add_launches(
                e0, e1, a0, a1, a2, a3, no_work, mem, site_corr=site_corr, site=site
            )
        else:
            if site_corr is not None:
                none = np.zeros(0, np.uint64)
                self.join.add_launches(
                    none, none.view(np.int64), none, none.view(np.int64), none.view(np.int64),
                    np.zeros(0, bool), none, site_corr=site_corr, site=site,
                )  # fmt: skip
            if not final and not release:
                return None
            raw = {c: np.zeros(0, np.int64) for c in _RAW}
        rows = self.join.match(raw, final, release)
        if not len(rows["kind"]):
            return None
        return self._finish(rows)

    def _finish(self, rows: dict[str, np.ndarray]) -> dict[str, Any]:
        keys = np.stack([rows["device"], rows["context"], rows["stream"]], axis=1)
        uniq, inv = np.unique(keys, axis=0, return_inverse=True)
        qmap = np.empty(len(uniq), np.int64)
        for j, (d, c, s) in enumerate(uniq.tolist()):
            k = (d, c, s)
            q = self._queues.get(k)
            if q is None:
                q = self._queues[k] = len(self.queues)
                self.queues.append(k)
            qmap[j] = q
        out = {c: rows[c] for c in ROW_COLUMNS if c in rows}
        out["queue"] = qmap[inv.reshape(-1)]
        rebase(out, self.time_base)
        return {c: np.ascontiguousarray(out[c], np.int64) for c in ROW_COLUMNS}

    def _walk(self, addr: int, valid: int) -> tuple[list[int], list[int]]:
        """Offsets and kinds of the records of a buffer, stepped by CUPTI's record sizes."""
        words = memoryview((ctypes.c_uint32 * (valid // 4)).from_address(addr)).cast("B").cast("I")
        sizes = self._sizes
        offs: list[int] = []
        kinds: list[int] = []
        off = 0
        while off + 4 <= valid:
            k = words[off >> 2]
            step = sizes.get(k)
            if step is None:
                step = self._learn(addr, valid, off, k)
                if step <= 0:
                    break
            offs.append(off)
            kinds.append(k)
            off += step
        return offs, kinds

    def _learn(self, addr: int, valid: int, off: int, kind: int) -> int:
        """The size of a record of ``kind`` at ``off``: how far cuptiActivityGetNextRecord
        steps from it (the last record of a buffer: what is left of it)."""
        rec = ctypes.c_void_p(addr + off)
        nxt = ctypes.c_void_p(addr + off)
        # GetNextRecord steps from *record when it is not NULL: from this record to the next.
        code = self.cupti.ActivityGetNextRecord(ctypes.c_void_p(addr), valid, ctypes.byref(nxt))
        if code != 0 or nxt.value is None or rec.value is None:
            return valid - off
        step = nxt.value - rec.value
        if step <= 0:
            return valid - off
        self._sizes[kind] = step
        return step

    def _decode(self, addr: int, valid: int) -> tuple[Any, ...]:
        offs_l, kinds_l = self._walk(addr, valid)
        self.counts["records"] += len(offs_l)
        offs = np.array(offs_l, np.int64)
        kinds = np.array(kinds_l, np.int64)
        raw = (ctypes.c_uint8 * valid).from_address(addr)
        b = np.frombuffer(memoryview(raw).cast("B"), np.uint8)
        w32 = b[: valid // 4 * 4].view(np.uint32)
        w64 = b[: valid // 8 * 8].view(np.uint64)

        def u32(o: np.ndarray, field: int) -> np.ndarray:
            out: np.ndarray = w32[(o + field) >> 2].astype(np.int64)
            return out

        def i32(o: np.ndarray, field: int) -> np.ndarray:
            out: np.ndarray = w32[(o + field) >> 2].view(np.int32).astype(np.int64)
            return out

        def u64(o: np.ndarray, field: int) -> np.ndarray:
            out: np.ndarray = w64[(o + field) >> 3].view(np.int64)
            return out

        self.counts["unknown_kinds"] += int((~np.isin(kinds, list(_KNOWN))).sum())
        parts: list[dict[str, np.ndarray]] = []
        o = offs[kinds == _KERNEL]
        if len(o):
            f = abi.KERNEL
            ptrs = w64[(o + f["name"]) >> 3]
            uniq, inv = np.unique(ptrs, return_inverse=True)
            ids = np.array(
                [self.names(ctypes.string_at(int(p)) if p else b"?") for p in uniq.tolist()],
                np.int64,
            )
            parts.append(
                {
                    "correlation": u32(o, f["correlationId"]),
                    "kind": np.zeros(len(o), np.int64),
                    "name": ids[inv.reshape(-1)],
                    "device": u32(o, f["deviceId"]),
                    "context": u32(o, f["contextId"]),
                    "stream": u32(o, f["streamId"]),
                    "begin": u64(o, f["start"]),
                    "end": u64(o, f["end"]),
                    "nbytes": np.full(len(o), -1, np.int64),
                    "grid_x": i32(o, f["gridX"]),
                    "grid_y": i32(o, f["gridY"]),
                    "grid_z": i32(o, f["gridZ"]),
                    "block_x": i32(o, f["blockX"]),
                    "block_y": i32(o, f["blockY"]),
                    "block_z": i32(o, f["blockZ"]),
                    "address": np.zeros(len(o), np.int64),
                }
            )
        for kind, f in ((_MEMCPY, abi.MEMCPY), (_MEMSET, abi.MEMSET)):
            o = offs[kinds == kind]
            if not len(o):
                continue
            if kind == _MEMCPY:
                ck = (w32[(o + f["copyKind"]) >> 2] >> (8 * (f["copyKind"] % 4))) & 0xFF
                name = np.where((ck >= 1) & (ck <= 10), ck, 11).astype(np.int64)
            else:
                name = np.zeros(len(o), np.int64)
            zeros = np.zeros(len(o), np.int64)
            parts.append(
                {
                    "correlation": u32(o, f["correlationId"]),
                    "kind": np.ones(len(o), np.int64),
                    "name": name,
                    "device": u32(o, f["deviceId"]),
                    "context": u32(o, f["contextId"]),
                    "stream": u32(o, f["streamId"]),
                    "begin": u64(o, f["start"]),
                    "end": u64(o, f["end"]),
                    "nbytes": u64(o, f["bytes"]),
                    "grid_x": zeros,
                    "grid_y": zeros,
                    "grid_z": zeros,
                    "block_x": zeros,
                    "block_y": zeros,
                    "block_z": zeros,
                    "address": zeros,
                }
            )
        memory = memory_rows(offs[kinds == _MEMORY], u32, u64)
        if memory is not None:
            parts.append(memory)
        if parts:
            rows = {c: np.concatenate([p[c] for p in parts]) for c in _RAW}
        else:
            rows = {c: np.zeros(0, np.int64) for c in _RAW}
        f = abi.EXT
        o = offs[kinds == _EXT]
        ours = u32(o, f["externalKind"]) == self.ext_kind
        ext_corr = u32(o, f["correlationId"])[ours].astype(np.uint64)
        ext_scope = u64(o, f["externalId"])[ours]
        f = abi.API
        o = offs[(kinds == _DRIVER) | (kinds == _RUNTIME)]
        k = kinds[(kinds == _DRIVER) | (kinds == _RUNTIME)]
        cbid = w32[(o + f["cbid"]) >> 2].astype(np.uint64)
        drv = k == _DRIVER
        work = np.where(drv, np.isin(cbid, _WORK_DRIVER), np.isin(cbid, _WORK_RUNTIME))
        mem = np.where(drv, np.isin(cbid, _MEM_DRIVER), np.isin(cbid, _MEM_RUNTIME)) & ~work
        work |= mem
        # A call that failed (returnValue: not CUDA_SUCCESS/cudaSuccess) enqueued nothing.
        ok = w32[(o + f["returnValue"]) >> 2] == 0
        work &= ok
        mem &= ok
        graph = np.where(drv, np.isin(cbid, _SEVERAL_DRIVER), np.isin(cbid, _SEVERAL_RUNTIME))
        acorr = u32(o, f["correlationId"]).astype(np.uint64)
        return (
            rows,
            ext_corr,
            ext_scope,
            acorr[work],
            u64(o, f["start"])[work],
            u64(o, f["end"])[work],
            graph[work],
            acorr[~work],
            mem[work],
        )
