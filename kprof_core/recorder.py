"""Capture: what runs on the user's threads while a profile is active, and the harvest.

The launch path appends one tuple to a deque (thread-safe, no lock) and returns; tokens are
turned into durations later, in batches, by ``harvest``: when enough are pending (which bounds
the number of live device events), and when the profile ends.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections import deque
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .backend import Alignment, Backend, QueueInfo
from .records import (
    COPY,
    HOST_TIMED,
    KERNEL,
    PLACED,
    RANGE,
    UNRESOLVED,
    DeviceTable,
    HostTable,
    Interner,
    QueueRecord,
    ThreadRecord,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["COPY", "KERNEL", "RANGE", "Recorder", "active", "now"]

# The host clock every kprof time is on.
now = time.perf_counter_ns

_ACTIVE: ContextVar[Recorder | None] = ContextVar("kprof_active_recorder", default=None)
#: The recorder of the calling context, or None outside a profile. Plugins' capture wrappers
#: call this first and call straight through when it returns None.
active = _ACTIVE.get

_get_ident = threading.get_ident
try:  # a C function: the cheapest way to ask whether an event loop runs on this thread
    from asyncio import _get_running_loop as _running_loop
    from asyncio import current_task as _current_task
except ImportError:  # pragma: no cover
    _running_loop = None  # type: ignore[assignment]

# Host-only entries travel through the same deque as launches, tagged with these kinds.
_HOST_RANGE, _MARK = 10, 11
HOST_QUEUE = QueueRecord("host", "host", "host", "host")


def _who() -> Any:
    """The launching thread, and its asyncio task when one is running."""
    ident = _get_ident()
    if _running_loop is not None and _running_loop() is not None:
        task = _current_task()
        if task is not None:
            return (ident, task.get_name())
    return ident


@dataclass
class DeviceClock:
    """How one device's timestamps were placed on the host timeline."""

    backend: str
    device: str
    method: str
    error_ns: int | None
    shift_ns: int = 0

    def describe(self) -> str:
        err = "unknown error bound" if self.error_ns is None else f"error ≤ {self.error_ns} ns"
        extra = f", shifted {self.shift_ns} ns so no work starts before its launch" if self.shift_ns else ""
        return f"{self.method} ({err}{extra})"


class Recorder:
    """Collects what one ``kprof.profile()`` captures.

    Plugins call :meth:`launch`; everything else is kprof's. Thread-safe: any number of
    threads may launch while one of them harvests.
    """

    #: Harvest when this many entries are pending.
    harvest_every = 2048
    #: Never hold more than this many pending entries (and so live device tokens): past it the
    #: launching thread waits for the oldest work to finish (the device is that far behind).
    max_pending = 16384

    def __init__(self, backends: Sequence[Backend], *, device: bool = True,
                 synchronize: bool = False, timeout: float = 60.0,
                 parent: Recorder | None = None) -> None:
        self.backends = list(backends)
        self.device = device
        self.synchronize = synchronize
        self.timeout = timeout
        self.parent = parent
        self._incoming: deque[tuple[Any, ...]] = deque()
        self._harvest_lock = threading.Lock()
        self.table = DeviceTable()
        self.host = HostTable()
        self.names = Interner()
        self.queues: list[QueueRecord] = []
        self._queue_ids: dict[tuple[int, int], tuple[Any, int]] = {}
        self.threads: list[ThreadRecord] = []
        self._thread_ids: dict[Any, int] = {}
        self.errors: dict[int, str] = {}
        self.clocks: dict[str, DeviceClock] = {}
        # Per device key: the first token seen there (kept alive), its launch window, and the
        # backend; every other token on the device is placed by elapsed_time from it.
        self._refs: dict[str, tuple[Backend, Any, int, int]] = {}
        self._ref_tokens: set[int] = set()
        self._warned: set[str] = set()
        self.pending_high_water = 0

    # -- the launch path (plugins) ------------------------------------------------------------

    def launch(self, backend: Backend, kind: int, name: str, queue: Any, start_ns: int,
               end_ns: int, start: Any = None, stop: Any = None, nbytes: int = -1) -> None:
        """Record one launch (a kernel or a copy) that a plugin captured.

        ``start_ns``/``end_ns`` bracket the host call (``kprof.capture.now()``); ``start`` and
        ``stop`` are tokens around the work (they may be the same object, e.g. the launch's
        own OpenCL event), or ``None`` when the backend has no timestamps: the launch is then
        synchronized here and timed on the host. ``nbytes`` is a copy's size, or -1.
        """
        flags = 0
        if start is None or not self.device:
            if self.device and start is None:
                try:
                    backend.synchronize(backend, queue)
                except Exception as exc:
                    self._hook_failed(backend, "synchronize", exc)
                stop = now()
                flags = HOST_TIMED
            start = None
        elif self.synchronize:
            backend.synchronize(backend, queue)
        entry = (backend, kind, name, queue, _who(), start_ns, end_ns, start, stop, nbytes, flags)
        incoming = self._incoming
        incoming.append(entry)
        if len(incoming) >= self.harvest_every:
            self._pressure()

    # -- the host side (kprof.range, kprof.mark) ----------------------------------------------

    def host_range(self, name: str, start_ns: int, end_ns: int) -> None:
        self._incoming.append((None, _HOST_RANGE, name, None, _who(), start_ns, end_ns,
                               None, None, -1, 0))

    def mark(self, name: str, time_ns: int) -> None:
        self._incoming.append((None, _MARK, name, None, _who(), time_ns, time_ns,
                               None, None, -1, 0))

    def device_range_begin(self, name: str) -> list[tuple[Backend, Any, Any]] | None:
        """Timestamps on every backend where the calling thread has a current queue.

        Backends that mirror ranges (``range_push``) are told ``name`` first.
        """
        if not self.device:
            return None
        begun = []
        for b in self.backends:
            if b.broken is not None:
                continue
            try:
                q = b.current_queue(b)
                if q is None:
                    continue
                if b.mirrors_ranges:
                    try:
                        b.range_push(b, name)
                    except Exception as exc:
                        self._hook_failed(b, "range_push", exc)
                        continue
                tok = b.record_timestamp(b) if b.has_timestamps else None
            except Exception as exc:
                self._hook_failed(b, "record_timestamp", exc)
                continue
            if self.synchronize and tok is None:
                b.synchronize(b, q)
            begun.append((b, q, tok))
        return begun

    def device_range_end(self, name: str, kind: int, begun: list[tuple[Backend, Any, Any]],
                         start_ns: int, end_ns: int) -> None:
        """Close what ``device_range_begin`` opened; host-time the backends without tokens."""
        who = _who()
        for b, q, tok in begun:
            stop = None
            flags = 0
            try:
                if tok is not None:
                    stop = b.record_timestamp(b)
                if tok is None or stop is None:
                    b.synchronize(b, q)
                    stop = now()
                    flags = HOST_TIMED
                    if tok is not None:
                        self._release(b, tok)
                    tok = None
            except Exception as exc:
                self._hook_failed(b, "record_timestamp", exc)
                continue
            if b.mirrors_ranges:
                try:
                    b.range_pop(b)
                except Exception as exc:
                    self._hook_failed(b, "range_pop", exc)
            self._incoming.append((b, kind, name, q, who, start_ns, end_ns, tok, stop, -1, flags))
        if len(self._incoming) >= self.harvest_every:
            self._pressure()

    def host_timed(self, name: str, kind: int, start_ns: int, end_ns: int) -> None:
        """A device entry with no backend at all (``kprof.kernel`` outside any queue)."""
        self._incoming.append((None, kind, name, None, _who(), start_ns, end_ns, None, end_ns,
                               -1, HOST_TIMED))

    # -- harvesting -----------------------------------------------------------------------------

    def _pressure(self) -> None:
        self.pending_high_water = max(self.pending_high_water, len(self._incoming))
        self.harvest(wait=False)
        # Still too far behind: wait for the oldest work, which bounds live device tokens.
        while len(self._incoming) > self.max_pending:
            self.harvest(wait=True, limit=len(self._incoming) - self.max_pending // 2)

    def harvest(self, wait: bool = False, limit: int | None = None) -> int:
        """Turn pending entries into rows, oldest first; returns how many were taken.

        Without ``wait`` it stops at the first entry whose work is not done. With ``wait`` it
        waits for each (cooperatively, at most ``timeout`` seconds per entry).
        """
        if not self._harvest_lock.acquire(blocking=wait):
            return 0
        taken = 0
        try:
            incoming = self._incoming
            while incoming and (limit is None or taken < limit):
                entry = incoming.popleft()
                try:
                    if not self._take(entry, wait):
                        incoming.appendleft(entry)
                        break
                except BaseException:
                    # Never lose an entry to an interrupt (KeyboardInterrupt while waiting).
                    incoming.appendleft(entry)
                    raise
                taken += 1
        finally:
            self._harvest_lock.release()
        return taken

    def _take(self, entry: tuple[Any, ...], wait: bool) -> bool:
        backend, kind, name, queue, who, h0, h1, start, stop, nbytes, flags = entry
        if kind == _HOST_RANGE or kind == _MARK:
            self.host.append(self.names(name), HostTable.RANGE if kind == _HOST_RANGE else HostTable.MARK,
                             self._thread_id(who), h0, h1)
            return True
        qid = self._queue_id(backend, queue)
        tid = self._thread_id(who)
        nid = self.names(name)
        if flags & HOST_TIMED or start is None:
            # Host timed: from the launch's start to after it synchronized (stop is a host time).
            end = stop if isinstance(stop, int) else h1
            self.table.append(nid, kind, qid, tid, h0, h1, h0, end - h0, nbytes, flags | HOST_TIMED | PLACED)
            return True
        assert backend is not None
        error = None
        dur = rel = 0
        if backend.broken is not None:
            error = f"backend disabled: {backend.broken}"
        else:
            try:
                done = backend.timestamp_done(backend, stop)
                if not done:
                    if not wait:
                        return False
                    if done is not None:
                        error = self._wait(backend, stop)
            except Exception as exc:
                error = f"timestamp_done raised {type(exc).__name__}: {exc}"
            if error is None:
                try:
                    dur = self._elapsed(backend, start, stop)
                    dkey = self.queues[qid].device_key
                    ref = self._refs.get(dkey)
                    if ref is None:
                        self._refs[dkey] = (backend, start, h0, h1)
                        self._ref_tokens.add(id(start))
                        rel = 0
                    else:
                        rel = self._elapsed(backend, ref[1], stop) - dur
                except Exception as exc:
                    error = f"{type(exc).__name__}: {exc}"
        self._release(backend, start, stop)
        if error is not None:
            row = self.table.append(nid, kind, qid, tid, h0, h1, h0, 0, nbytes, flags | UNRESOLVED | PLACED)
            self.errors[row] = error
        else:
            self.table.append(nid, kind, qid, tid, h0, h1, rel, dur, nbytes, flags)
        return True

    def _elapsed(self, backend: Backend, start: Any, stop: Any) -> int:
        ns = backend.elapsed_time(backend, start, stop)
        if type(ns) is not int:
            if isinstance(ns, bool) or not hasattr(ns, "__index__"):
                key = f"{backend.name}:elapsed_type"
                if key not in self._warned:
                    self._warned.add(key)
                    warnings.warn(
                        f"kprof: backend {backend.name!r} ({backend.plugin_label}): elapsed_time "
                        f"returned {type(ns).__name__}, expected int nanoseconds; its records are "
                        f"marked unresolved",
                        RuntimeWarning,
                        stacklevel=2,
                    )
                raise TypeError(f"elapsed_time returned {type(ns).__name__}, expected int")
            ns = int(ns)
        return ns

    def _wait(self, backend: Backend, token: Any) -> str | None:
        """Poll until the token is done, sleeping a little more each time; None when done."""
        deadline = time.monotonic() + self.timeout
        pause = 1e-5
        while not backend.timestamp_done(backend, token):
            if time.monotonic() > deadline:
                return f"the device did not reach the timestamp within {self.timeout:g} s (KPROF_RESOLVE_TIMEOUT)"
            time.sleep(pause)  # releases the GIL: other threads keep running
            pause = min(pause * 2, 0.005)
        return None

    def _release(self, backend: Backend, *tokens: Any) -> None:
        released: set[int] = set()
        for tok in tokens:
            if tok is None or id(tok) in released or id(tok) in self._ref_tokens:
                continue
            released.add(id(tok))
            try:
                backend.release_timestamp(backend, tok)
            except Exception as exc:
                self._hook_failed(backend, "release_timestamp", exc)

    def _queue_id(self, backend: Backend | None, queue: Any) -> int:
        if backend is None:
            key = (0, 0)
        else:
            key = (id(backend), id(queue))
        hit = self._queue_ids.get(key)
        if hit is not None:
            return hit[1]
        if backend is None:
            rec = HOST_QUEUE
        else:
            info: QueueInfo | None = None
            try:
                info = backend.queue_info(backend, queue)
                if info is not None and not isinstance(info, QueueInfo):
                    raise TypeError(f"queue_info returned {type(info).__name__}, expected kprof.QueueInfo")
            except Exception as exc:
                self._hook_failed(backend, "queue_info", exc, disable=False)
                info = None
            if info is None:
                info = QueueInfo(device=backend.name, label="queue")
            rec = QueueRecord(backend.name, info.device, info.label,
                              f"{backend.name}:{info.key()}")
        # Keep the queue object alive so its id cannot be reused by another queue.
        self._queue_ids[key] = (queue, len(self.queues))
        self.queues.append(rec)
        return len(self.queues) - 1

    def _thread_id(self, who: Any) -> int:
        tid = self._thread_ids.get(who)
        if tid is None:
            ident, task = (who if isinstance(who, tuple) else (who, None))
            thread = threading._active.get(ident)  # type: ignore[attr-defined]
            name = thread.name if thread is not None else f"thread {ident}"
            tid = self._thread_ids[who] = len(self.threads)
            self.threads.append(ThreadRecord(ident, name, task))
        return tid

    def _hook_failed(self, backend: Backend, hook: str, exc: BaseException, disable: bool = True) -> None:
        reason = f"{hook} raised {type(exc).__name__}: {exc}"
        if disable:
            backend.disable(reason)
        elif reason not in self._warned:
            self._warned.add(reason)
            warnings.warn(f"kprof: backend {backend.name!r} ({backend.plugin_label}): {reason}",
                          RuntimeWarning, stacklevel=3)

    # -- the end --------------------------------------------------------------------------------

    def finish(self) -> None:
        """Resolve everything pending (bounded waits), then place device times on the host clock."""
        while self._incoming:
            self.harvest(wait=True)
        self._place()
        for backend, tok, _h0, _h1 in self._refs.values():
            self._ref_tokens.discard(id(tok))
            self._release(backend, tok)
        self._refs.clear()
        self._queue_ids.clear()  # drop references to the user's queues

    def abandon(self) -> None:
        """Give every token back without reading it (used when resolving itself failed)."""
        while self._incoming:
            backend, *_rest, start, stop, _n, _f = self._incoming.popleft()
            if backend is not None:
                self._release(backend, start, stop)

    def _place(self) -> None:
        t = self.table
        rows_by_device: dict[str, list[int]] = {}
        for i in range(len(t)):
            if not t.flags[i] & PLACED:
                rows_by_device.setdefault(self.queues[t.queue[i]].device_key, []).append(i)
        for dkey, rows in rows_by_device.items():
            backend, tok, h0, h1 = self._refs[dkey]
            alignment: Alignment | None = None
            try:
                alignment = backend.align_clock(backend, tok, (h0, h1))
                if alignment is not None and not isinstance(alignment, Alignment):
                    raise TypeError(f"align_clock returned {type(alignment).__name__}, expected kprof.Alignment")
            except Exception as exc:
                self._hook_failed(backend, "align_clock", exc, disable=False)
                alignment = None
            if alignment is not None:
                base, method, error = alignment.host_ns, alignment.method, alignment.error_ns
            else:
                base, method, error = h0, "first work on the device assumed to start at its launch", None
            # No work may start before its launch: shift the whole device if any would.
            shift = 0
            for i in rows:
                early = t.launch_start[i] - (base + t.start[i])
                if early > shift:
                    shift = early
            base += shift
            for i in rows:
                t.start[i] += base
                t.flags[i] |= PLACED
            q = self.queues[t.queue[rows[0]]]
            self.clocks[dkey] = DeviceClock(q.backend, q.device, method, error, shift)

    # -- nesting ----------------------------------------------------------------------------------

    def absorb(self, child: Recorder) -> None:
        """Take a finished nested profile's rows, so the outer profile has them too."""
        with self._harvest_lock:
            qmap = [self._intern_queue(q) for q in child.queues]
            tmap = [self._intern_thread(th) for th in child.threads]
            nmap = [self.names(n) for n in child.names.values]
            ct = child.table
            for i in range(len(ct)):
                row = self.table.append(nmap[ct.name[i]], ct.kind[i], qmap[ct.queue[i]],
                                        tmap[ct.thread[i]], ct.launch_start[i], ct.launch_end[i],
                                        ct.start[i], ct.duration[i], ct.nbytes[i], ct.flags[i] | PLACED)
                if i in child.errors:
                    self.errors[row] = child.errors[i]
            ch = child.host
            for i in range(len(ch)):
                self.host.append(nmap[ch.name[i]], ch.kind[i], tmap[ch.thread[i]], ch.start[i], ch.end[i])
            for k, v in child.clocks.items():
                self.clocks.setdefault(k, v)

    def _intern_queue(self, q: QueueRecord) -> int:
        key = (-1, hash(q))
        hit = self._queue_ids.get(key)
        if hit is None:
            for i, existing in enumerate(self.queues):
                if existing == q:
                    hit = self._queue_ids[key] = (None, i)
                    break
            else:
                hit = self._queue_ids[key] = (None, len(self.queues))
                self.queues.append(q)
        return hit[1]

    def _intern_thread(self, th: ThreadRecord) -> int:
        key = th.ident if th.task is None else (th.ident, th.task)
        tid = self._thread_ids.get(key)
        if tid is None:
            tid = self._thread_ids[key] = len(self.threads)
            self.threads.append(th)
        return tid
