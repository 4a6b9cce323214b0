"""Capture: what runs on the user's threads while a profile is active, and the harvest.

The launch path appends one tuple to a deque (thread-safe, no lock) and returns; tokens are
turned into durations later, in batches, by ``harvest``: when enough are pending (which bounds
the number of live device events), and when the profile ends.
"""

from __future__ import annotations

import itertools
import threading
import time
import warnings
from asyncio import _get_running_loop as _running_loop  # C functions: cheap on the launch path
from asyncio import current_task as _current_task
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

# Host-only entries travel through the same deque as launches, tagged with these kinds.
_HOST_RANGE, _MARK, _HOST_LAUNCH = 10, 11, 12
_HOST_KINDS = {_HOST_RANGE: HostTable.RANGE, _MARK: HostTable.MARK, _HOST_LAUNCH: HostTable.LAUNCH}
HOST_QUEUE = QueueRecord("host", "host", "host", "host")


# Threads are keyed by a number given on a thread's first kprof call and kept in a
# thread-local, so that two threads never share a key even when the second reuses the first's
# ident, and the thread's name is known even if it has ended by the time its work is harvested.
# A plain int, not an object: pending entries then hold only objects the garbage collector
# does not track, and a million of them cost no collection time (see Recorder.launch).
_thread_keys = itertools.count(1)
#: key -> (ident, name) of every thread that made a kprof call.
_thread_names: dict[int, tuple[int, str]] = {}
_tls = threading.local()


def _new_thread_key() -> int:
    t = threading.current_thread()
    key = next(_thread_keys)
    _thread_names[key] = (t.ident or 0, t.name)
    _tls.key = key
    return key


def _who() -> Any:
    """The launching thread's key, with its asyncio task's name when a task is running."""
    try:
        key = _tls.key
    except AttributeError:
        key = _new_thread_key()
    if _running_loop() is not None:
        task = _current_task()
        if task is not None:
            return (key, task.get_name())
    return key


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
    threads may launch while one of them harvests. Only the thread holding ``_harvest_lock``
    takes entries out of ``_incoming`` or touches the tables; the others only append.
    """

    #: Try a harvest when this many entries are pending.
    harvest_every = 2048
    #: Never hold more than this many pending entries (and so live device tokens): past it the
    #: launching thread waits for the oldest work to finish (the device is that far behind).
    max_pending = 16384

    def __init__(self, backends: Sequence[Backend], *, device: bool = True,
                 synchronize: bool = False, timeout: float = 60.0,
                 parent: Recorder | None = None) -> None:
        self.backends = list(backends)
        self._selected = frozenset(self.backends)
        self.device = device
        self.synchronize = synchronize
        self.timeout = timeout
        self.parent = parent
        self._incoming: deque[tuple[Any, ...]] = deque()
        self._harvest_lock = threading.Lock()
        # The launch path compares the pending count with this one number: it also sends every
        # launch to _pressure once the profile has closed (then it is 0).
        self._next_harvest = min(self.harvest_every, self.max_pending)
        self._closed = False  # the profile's block has ended: what comes in now is late
        self._finished = False  # everything is resolved and placed; tables are final
        self.table = DeviceTable()
        self.host = HostTable()
        self.names = Interner()
        self.queues: list[QueueRecord] = []
        # id(queue) -> queue, for every queue an entry refers to (entries hold the id only);
        # kept alive until the profile ends, so that no other queue can take its id meanwhile.
        self._live_queues: dict[int, Any] = {}
        # (id(backend), id(queue)) -> queue id in self.queues.
        self._queue_ids: dict[tuple[int, int], int] = {}
        # id(queue) -> (backend, queue id, device key), for the harvest's fast path.
        self._fast_queues: dict[int, tuple[Backend, int, str]] = {}
        self._by_slot = {b.slot: b for b in self.backends}
        self._queue_index: dict[QueueRecord, int] = {}
        self.threads: list[ThreadRecord] = []
        self._thread_ids: dict[Any, int] = {}
        self._thread_index: dict[ThreadRecord, int] = {}
        self.errors: dict[int, str] = {}
        self.clocks: dict[str, DeviceClock] = {}
        # Per device key: the first token seen there (kept alive), its launch window, and the
        # backend; every other token on the device is placed by elapsed_time from it.
        self._refs: dict[str, tuple[Backend, Any, int, int]] = {}
        # Per device key, for backends with device_times: when the reference token's work began.
        self._ref_begin: dict[str, int] = {}
        self._ref_tokens: set[int] = set()
        self._warned: set[str] = set()
        self.pending_high_water = 0
        self.late_dropped = 0
        self.dropped_bad = 0

    # -- the launch path (plugins) ------------------------------------------------------------

    def launch(self, backend: Backend, kind: int, name: str, queue: Any, start_ns: int,
               end_ns: int, start: Any = None, stop: Any = None, nbytes: int = -1) -> None:
        """Record one launch (a kernel or a copy) that a plugin captured.

        ``start_ns``/``end_ns`` bracket the host call (``kprof.capture.now()``); ``start`` and
        ``stop`` are tokens around the work (they may be the same object, e.g. the launch's
        own OpenCL event), or ``None`` when the backend has no timestamps: the launch is then
        synchronized here and timed on the host. ``nbytes`` is a copy's size, or -1.
        Every token handed here is given back through ``release_timestamp``.
        """
        if not self.device or backend not in self._selected:
            self._untimed(backend, name, start_ns, end_ns, start, stop)
            return
        flags = 0
        if start is None:
            if stop is not None:
                self._release(backend, None, stop)
            self._sync(backend, queue)
            stop = now()
            flags = HOST_TIMED
        elif self.synchronize:
            self._sync(backend, queue)
        # Entries carry the backend's slot and the queue's id, not the objects: a tuple of
        # untracked objects (ints, str, an OpenCL event) is untracked by the collector's next
        # pass, while one holding a tracked object would survive into the old generations and
        # make every full collection walk all pending launches (~0.7 µs per launch here).
        qk = id(queue)
        self._live_queues.setdefault(qk, queue)
        incoming = self._incoming
        incoming.append((backend.slot, kind, name, qk, _who(), start_ns, end_ns, start, stop,
                         nbytes, flags))
        if len(incoming) >= self._next_harvest:
            self._pressure()

    def _untimed(self, backend: Backend, name: str, start_ns: int, end_ns: int,
                 start: Any, stop: Any) -> None:
        """A launch this profile does not time: keep its host call (``device=False``), or
        drop it (a backend the profile was not asked to use); give its tokens back."""
        self._release(backend, start, stop)
        if backend in self._selected:
            self._append((None, _HOST_LAUNCH, name, None, _who(), start_ns, end_ns,
                          None, None, -1, 0))

    def _append(self, entry: tuple[Any, ...]) -> None:
        incoming = self._incoming
        incoming.append(entry)
        if len(incoming) >= self._next_harvest:
            self._pressure()

    def _sync(self, backend: Backend, queue: Any) -> None:
        try:
            backend.synchronize(backend, queue)
        except Exception as exc:
            self._hook_failed(backend, "synchronize", exc)

    # -- the host side (kprof.range, kprof.mark) ----------------------------------------------

    def host_range(self, name: str, start_ns: int, end_ns: int) -> None:
        self._append((None, _HOST_RANGE, name, None, _who(), start_ns, end_ns, None, None, -1, 0))

    def mark(self, name: str, time_ns: int) -> None:
        self._append((None, _MARK, name, None, _who(), time_ns, time_ns, None, None, -1, 0))

    def host_launch(self, name: str, start_ns: int, end_ns: int) -> None:
        """The host call of a launch, without device time (``kprof.kernel`` with ``device=False``)."""
        self._append((None, _HOST_LAUNCH, name, None, _who(), start_ns, end_ns, None, None, -1, 0))

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
            except Exception as exc:
                self._hook_failed(b, "current_queue", exc)
                continue
            if q is None:
                continue
            if b.mirrors_ranges:
                try:
                    b.range_push(b, name)
                except Exception as exc:
                    self._hook_failed(b, "range_push", exc)
                    continue
            tok = None
            if b.has_timestamps:
                try:
                    tok = b.record_timestamp(b)
                except Exception as exc:
                    self._hook_failed(b, "record_timestamp", exc)
                    self._range_pop(b)  # keep the vendor tool's range stack balanced
                    continue
            if tok is None and self.synchronize:
                self._sync(b, q)
            begun.append((b, q, tok))
        return begun

    def device_range_end(self, name: str, kind: int, begun: list[tuple[Backend, Any, Any]],
                         start_ns: int, end_ns: int) -> None:
        """Close what ``device_range_begin`` opened; host-time the backends without tokens.

        ``start_ns`` must be taken before ``device_range_begin``: no work of the range can
        start on the device before it (placement relies on that).
        """
        who = _who()
        for b, q, tok in begun:
            if b.broken is not None:  # disabled meanwhile: nothing more is asked of it
                self._release(b, tok, None)
                self._range_pop(b)
                continue
            stop: Any = None
            flags = 0
            if tok is not None:
                try:
                    stop = b.record_timestamp(b)
                except Exception as exc:
                    self._hook_failed(b, "record_timestamp", exc)
                    self._release(b, tok, None)
                    self._range_pop(b)
                    continue
            if stop is None:
                self._release(b, tok, None)
                tok = None
                self._sync(b, q)
                stop = now()
                flags = HOST_TIMED
            elif self.synchronize:
                self._sync(b, q)
            self._range_pop(b)
            qk = id(q)
            self._live_queues.setdefault(qk, q)
            self._append((b.slot, kind, name, qk, who, start_ns, end_ns, tok, stop, -1, flags))

    def _range_pop(self, b: Backend) -> None:
        if b.mirrors_ranges:
            try:
                b.range_pop(b)
            except Exception as exc:
                self._hook_failed(b, "range_pop", exc)

    def host_timed(self, name: str, kind: int, start_ns: int, end_ns: int) -> None:
        """A device entry with no backend at all (``kprof.kernel`` outside any queue)."""
        self._append((None, kind, name, None, _who(), start_ns, end_ns, None, end_ns, -1,
                      HOST_TIMED))

    # -- harvesting -----------------------------------------------------------------------------

    def _pressure(self) -> None:
        incoming = self._incoming
        n = len(incoming)
        if n > self.pending_high_water:
            self.pending_high_water = n
        if not self._closed:
            self.harvest(wait=False)
            # Still too far behind: wait for the oldest work, which bounds live device tokens.
            while len(incoming) > self.max_pending and not self._closed:
                self.harvest(wait=True, limit=len(incoming) - self.max_pending // 2)
            # When nothing was done, try again only after another harvest_every launches.
            self._next_harvest = min(len(incoming) + self.harvest_every, self.max_pending)
        if self._closed:
            self._next_harvest = 0  # may have raced with finish() setting it
            self._late()

    def harvest(self, wait: bool = False, limit: int | None = None) -> int:
        """Turn pending entries into rows, oldest first; returns how many were taken.

        Without ``wait`` it stops at the first entry whose work is not done. With ``wait`` it
        waits for them (cooperatively, at most ``timeout`` seconds in all). It takes at most
        what was pending when it started, so launching threads cannot keep it busy forever.
        """
        if not self._harvest_lock.acquire(blocking=wait):
            return 0
        try:
            if self._finished:
                return 0
            deadline = time.monotonic() + self.timeout if wait else None
            return self._harvest(limit, deadline)
        finally:
            self._harvest_lock.release()

    def _harvest(self, limit: int | None, deadline: float | None) -> int:
        """The harvest proper; the caller holds ``_harvest_lock`` (so entries only get added).

        The common entry (a device entry whose queue, thread and name are already known, of a
        healthy backend, with its work done) is made into a row right here, with locals bound
        and rows gathered as tuples appended to the table in bulk (``_flush``); host entries go
        straight to the host table: this loop runs once per launch, so every attribute lookup
        and call counts. Everything else goes to ``_take``.
        """
        incoming = self._incoming
        n = len(incoming) if limit is None else min(limit, len(incoming))
        taken = 0
        rows: list[tuple[int, ...]] = []
        rows_append = rows.append
        fast_queues = self._fast_queues
        thread_ids = self._thread_ids
        name_ids = self.names.index
        refs = self._refs
        ref_begin = self._ref_begin
        ref_ids = self._ref_tokens
        popleft = incoming.popleft
        host_append = self.host.append
        try:
            while taken < n:
                entry = popleft()
                slot, kind, name, qk, who, h0, h1, start, stop, nbytes, flags = entry
                q = fast_queues.get(qk) if start is not None and kind < _HOST_RANGE else None
                if q is not None and (backend := q[0]).slot == slot and backend.broken is None:
                    tid = thread_ids.get(who)
                    nid = name_ids.get(name) if type(name) is str else None
                    if tid is not None and nid is not None:
                        ref = refs.get(q[2])
                        if ref is not None:
                            try:
                                if backend.timestamp_done(backend, stop):
                                    if backend.has_device_times:
                                        pair = backend.device_times(backend, start, stop)
                                        dur = pair[1] - pair[0]
                                        rel = pair[1] - ref_begin[q[2]]
                                    else:
                                        dur = backend.elapsed_time(backend, start, stop)
                                        rel = backend.elapsed_time(backend, ref[1], stop)
                                    if type(dur) is int and type(rel) is int:
                                        rows_append((nid, kind, q[1], tid, h0, h1, rel - dur,
                                                     dur, nbytes, flags))
                                        if backend.pools_tokens:
                                            release = backend.release_timestamp
                                            if id(start) not in ref_ids:
                                                release(backend, start)
                                            if stop is not start and id(stop) not in ref_ids:
                                                release(backend, stop)
                                        taken += 1
                                        continue
                            except Exception:
                                pass  # _take asks again and reports the failure properly
                if kind in _HOST_KINDS:
                    # Host entries go to the host table: no need to flush device rows first.
                    tid = thread_ids.get(who)
                    nid = name_ids.get(name) if type(name) is str else None
                    if tid is not None and nid is not None:
                        host_append(nid, _HOST_KINDS[kind], tid, h0, h1)
                        taken += 1
                        continue
                # The general case: device rows must stay in order (errors are keyed by row),
                # so flush the fast ones first.
                if rows:
                    self._flush(rows)
                try:
                    done = self._take(entry, deadline)
                except Exception as exc:  # a malformed entry (a plugin's bug): never the user's problem
                    self._bad_entry(entry, exc)
                    done = True
                except BaseException:
                    # Never lose an entry to an interrupt (KeyboardInterrupt while waiting).
                    incoming.appendleft(entry)
                    raise
                if not done:
                    incoming.appendleft(entry)
                    break
                taken += 1
        finally:
            if rows:
                self._flush(rows)
        return taken

    def _flush(self, rows: list[tuple[int, ...]]) -> None:
        """Append rows gathered by the fast path to the table (column by column), and empty
        the list."""
        for column, values in zip(self.table.columns(), zip(*rows)):
            column.extend(values)
        rows.clear()

    def _decode(self, entry: tuple[Any, ...]) -> tuple[Any, ...]:
        """An entry with its backend and queue objects in place of their slot and id."""
        slot, kind, name, qk, *rest = entry
        backend = None if slot is None else self._by_slot[slot]
        queue = None if qk is None else self._live_queues.get(qk)
        return (backend, kind, name, queue, *rest)

    def _take(self, entry: tuple[Any, ...], deadline: float | None) -> bool:
        """Make a row of one entry; False (and no change) when its work is not done and we
        may not wait (``deadline`` is None)."""
        backend, kind, name, queue, who, h0, h1, start, stop, nbytes, flags = self._decode(entry)
        if kind in _HOST_KINDS:
            self.host.append(self.names(name), _HOST_KINDS[kind], self._thread_id(who), h0, h1)
            return True
        if start is None:
            # Host timed: from the launch's start to after it synchronized (stop is a host time).
            end = stop if isinstance(stop, int) else h1
            self.table.append(self.names(name), kind, self._queue_id(backend, queue),
                              self._thread_id(who), h0, h1, h0, end - h0, nbytes,
                              flags | HOST_TIMED | PLACED)
            return True
        error = None
        dur = rel = 0
        if backend.broken is not None:
            error = f"backend disabled: {backend.broken}"
        else:
            hook = "timestamp_done"
            try:
                done = backend.timestamp_done(backend, stop)
                if not done:
                    if deadline is None:
                        return False
                    if done is not None:  # None: it can't tell, so elapsed_time waits itself
                        error = self._wait(backend, stop, deadline)
                if error is None:
                    dkey = self.queues[self._queue_id(backend, queue)].device_key
                    ref = self._refs.get(dkey)
                    if backend.has_device_times:
                        hook = "device_times"
                        begin, end = self._device_times(backend, start, stop)
                        dur = end - begin
                        if ref is None:
                            self._ref_begin[dkey] = begin
                        else:
                            rel = begin - self._ref_begin[dkey]
                    else:
                        hook = "elapsed_time"
                        dur = self._elapsed(backend, start, stop)
                        if ref is not None:
                            rel = self._elapsed(backend, ref[1], stop) - dur
                    if ref is None:
                        self._refs[dkey] = (backend, start, h0, h1)
                        self._ref_tokens.add(id(start))
            except Exception as exc:
                # A wrong return type is the plugin's bug: stop using it. An exception is a
                # device error (a failed command, an invalid event): this record has no time,
                # the next ones may.
                error = self._hook_failed(backend, hook, exc, disable=isinstance(exc, _BadReturn))
        qid = self._queue_id(backend, queue)
        tid = self._thread_id(who)
        nid = self.names(name)
        self._release(backend, start, stop)
        if error is not None:
            row = self.table.append(nid, kind, qid, tid, h0, h1, h0, 0, nbytes,
                                    flags | UNRESOLVED | PLACED)
            self.errors[row] = error
        else:
            self.table.append(nid, kind, qid, tid, h0, h1, rel, dur, nbytes, flags)
        return True

    def _bad_entry(self, entry: tuple[Any, ...], exc: Exception) -> None:
        """Drop an entry kprof cannot make a row of; warn once per profile."""
        slot, _kind, name, *_rest, start, stop, _n, _f = entry
        backend = self._by_slot.get(slot) if slot is not None else None
        self.dropped_bad += 1
        if "bad entry" not in self._warned:
            self._warned.add("bad entry")
            who = f"backend {backend.name!r} ({backend.plugin_label})" if backend else "kprof"
            warnings.warn(f"kprof: a record of {name!r} from {who} was dropped, as it could not "
                          f"be read: {type(exc).__name__}: {exc}", RuntimeWarning, stacklevel=2)
        if backend is not None and start is not None:
            self._release(backend, start, stop)

    def _elapsed(self, backend: Backend, start: Any, stop: Any) -> int:
        ns = backend.elapsed_time(backend, start, stop)
        if type(ns) is not int:
            if isinstance(ns, bool) or not hasattr(ns, "__index__"):
                raise _BadReturn(f"elapsed_time returned {type(ns).__name__} {ns!r}, expected "
                                 f"int nanoseconds")
            ns = int(ns)
        return ns

    def _device_times(self, backend: Backend, start: Any, stop: Any) -> tuple[int, int]:
        pair = backend.device_times(backend, start, stop)
        if (type(pair) is not tuple or len(pair) != 2 or type(pair[0]) is not int
                or type(pair[1]) is not int):
            raise _BadReturn(f"device_times returned {pair!r}, expected a pair of int nanoseconds")
        return pair

    def _wait(self, backend: Backend, token: Any, deadline: float) -> str | None:
        """Poll until the token is done, sleeping a little more each time; None when done.

        ``deadline`` is shared by a whole harvest: a device that stopped making progress costs
        one timeout in all, not one per pending entry.
        """
        pause = 1e-5
        while not backend.timestamp_done(backend, token):
            if time.monotonic() >= deadline:
                return (f"the device did not reach the timestamp within {self.timeout:g} s "
                        f"(set profile(timeout=...) or KPROF_RESOLVE_TIMEOUT to wait longer)")
            time.sleep(pause)  # releases the GIL: other threads keep running
            pause = min(pause * 2, 0.005)
        return None

    def _release(self, backend: Backend, start: Any, stop: Any) -> None:
        """Give tokens back once (``start`` may be ``stop``); reference tokens stay for now."""
        refs = self._ref_tokens
        for tok in (start, stop) if stop is not start else (start,):
            if tok is None or id(tok) in refs:
                continue
            try:
                backend.release_timestamp(backend, tok)
            except Exception as exc:
                self._hook_failed(backend, "release_timestamp", exc)

    def _queue_id(self, backend: Backend | None, queue: Any) -> int:
        key = (0, 0) if backend is None else (id(backend), id(queue))
        qid = self._queue_ids.get(key)
        if qid is not None:
            return qid
        if backend is None:
            rec = HOST_QUEUE
        else:
            info: QueueInfo | None = None
            try:
                info = backend.queue_info(backend, queue)
                if info is not None and not isinstance(info, QueueInfo):
                    raise _BadReturn(f"queue_info returned {type(info).__name__}, expected "
                                     f"kprof.QueueInfo")
            except Exception as exc:
                self._hook_failed(backend, "queue_info", exc, disable=False)
                info = None
            if info is None:
                info = QueueInfo(device=backend.name, label="queue")
            rec = QueueRecord(backend.name, info.device, info.label,
                              f"{backend.name}:{info.key()}")
        qid = self._queue_ids[key] = self._intern_queue(rec)
        if backend is not None:
            self._fast_queues.setdefault(id(queue), (backend, qid, rec.device_key))
        return qid

    def _thread_id(self, who: Any) -> int:
        tid = self._thread_ids.get(who)
        if tid is None:
            key, task = who if isinstance(who, tuple) else (who, None)
            ident, name = _thread_names[key]
            tid = self._thread_ids[who] = self._intern_thread(ThreadRecord(ident, name, task))
        return tid

    def _hook_failed(self, backend: Backend, hook: str, exc: BaseException,
                     disable: bool = True) -> str:
        """Warn once about a misbehaving hook (and stop using the backend); returns why."""
        if isinstance(exc, _BadReturn):
            reason = str(exc)
        else:
            reason = f"{hook} raised {type(exc).__name__}: {exc}"
        if disable:
            backend.disable(reason)
        elif reason not in self._warned:
            self._warned.add(reason)
            warnings.warn(f"kprof: backend {backend.name!r} ({backend.plugin_label}): {reason}",
                          RuntimeWarning, stacklevel=3)
        return reason

    # -- the end --------------------------------------------------------------------------------

    def finish(self) -> None:
        """Resolve everything launched before now (waiting at most ``timeout`` in all), then
        place device times on the host clock. Work reported later is dropped."""
        self._close()
        with self._harvest_lock:
            if self._finished:
                return
            self._harvest(None, time.monotonic() + self.timeout)
            self._end()

    def abandon(self) -> None:
        """End without resolving what is pending (resolving itself was interrupted): give
        every token back, keep and place the rows made so far."""
        self._close()
        with self._harvest_lock:
            if not self._finished:
                self._end()

    def _close(self) -> None:
        self._closed = True
        self._next_harvest = 0

    def _end(self) -> None:
        """Called once, holding the lock: the tables become final."""
        self._finished = True
        self._drop_late()
        try:
            self._place()
        finally:
            for backend, tok, _h0, _h1 in self._refs.values():
                self._ref_tokens.discard(id(tok))
                self._release(backend, tok, None)
            self._refs.clear()
            self._queue_ids.clear()  # drop references to the user's queues
            self._fast_queues.clear()
            self._live_queues.clear()

    def _late(self) -> None:
        """Entries that arrived after the profile ended (a thread that outlived it)."""
        with self._harvest_lock:
            if self._finished:  # otherwise finish() is still at work and takes them
                self._drop_late()

    def _drop_late(self) -> None:
        incoming = self._incoming
        while incoming:
            slot, *_rest, start, stop, _n, _f = incoming.popleft()
            self.late_dropped += 1
            if start is not None and slot is not None:  # a device entry with tokens
                self._release(self._by_slot[slot], start, stop)

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
                    raise _BadReturn(f"align_clock returned {type(alignment).__name__}, "
                                     f"expected kprof.Alignment")
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
            if self._finished:  # the outer profile ended first (the inner ran in a thread)
                return
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
        qid = self._queue_index.get(q)
        if qid is None:
            qid = self._queue_index[q] = len(self.queues)
            self.queues.append(q)
        return qid

    def _intern_thread(self, th: ThreadRecord) -> int:
        tid = self._thread_index.get(th)
        if tid is None:
            tid = self._thread_index[th] = len(self.threads)
            self.threads.append(th)
        return tid


class _BadReturn(TypeError):
    """A hook returned a value of the wrong type (the message says which and what was expected)."""
