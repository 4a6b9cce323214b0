"""The harvest: pending launch entries turned into rows of the record tables.

The launch path (``recorder.py``) appends one entry per launch to ``_incoming``; this module
owns the other end. Tokens are turned into durations in batches: when enough are pending
(which bounds the number of live device events) and when the profile ends.

An entry is the tuple ``(slot, kind, name, queue_id, who, h0, h1, start, stop, nbytes, flags)``:
the backend's slot (None for host entries), a record kind (``KERNEL``, ``COPY``, ``RANGE``, or a
host kind below), the name, ``id(queue)``, the thread key from ``threads.who()``, the host call's
start and end, the two tokens (or None, or a host time in ``stop`` when host-timed), the bytes
of a copy (-1 otherwise) and record flags.
"""

from __future__ import annotations

import queue
import threading
import time
import warnings
from collections import deque
from typing import TYPE_CHECKING, Any

from .backend import Alignment, Backend, BadReturn, NeverSubmitted, QueueInfo
from .placement import DeviceClock
from .records import (
    APPROXIMATE,
    HOST_TIMED,
    PLACED,
    UNRESOLVED,
    DeviceTable,
    HostTable,
    Interner,
    QueueRecord,
    ThreadRecord,
)
from .threads import thread_names

if TYPE_CHECKING:
    from collections.abc import Sequence

# Host-only entries travel through the same deque as launches, tagged with these kinds.
HOST_RANGE, MARK, HOST_LAUNCH = 10, 11, 12
HOST_KINDS = {HOST_RANGE: HostTable.RANGE, MARK: HostTable.MARK, HOST_LAUNCH: HostTable.LAUNCH}
HOST_QUEUE = QueueRecord("host", "host", "host", "host")
# Delivered activity records (activity.py) are tagged ACTIVITY + their record kind; their
# h0/h1 and start/stop are times on the device clock, placed here as they are harvested.
ACTIVITY = 20


class Waiter:
    """A daemon thread that makes hook calls which may block for good (a read of a backend
    that cannot tell whether its work is done), so that the harvest stops waiting at its
    deadline. A call that never returns leaves the thread ``stuck``: a new one is made."""

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.stuck = False
        threading.Thread(target=self._run, name="kprof resolve", daemon=True).start()

    def _run(self) -> None:
        while (item := self._calls.get()) is not None:
            fn, args, box, done = item
            try:
                fn(*args)
                box.append(None)
            except BaseException as exc:  # handed to the caller, raised there
                box.append(exc)
            done.set()

    def call(self, fn: Any, args: tuple[Any, ...], timeout: float) -> bool:
        """Call ``fn(*args)``; whether it returned within ``timeout`` seconds (what it raised
        is raised here)."""
        box: list[BaseException | None] = []
        done = threading.Event()
        self._calls.put((fn, args, box, done))
        if not done.wait(max(0.0, timeout)):
            self.stuck = True
            return False
        if box[0] is not None:
            raise box[0]
        return True

    def close(self) -> None:
        if not self.stuck:
            self._calls.put(None)


class Harvest:
    """The record side of a profile: pending entries, the tables they become, and what is
    needed to read tokens (reference tokens per device, interned queues and threads).

    Only the thread holding ``_harvest_lock`` takes entries out of ``_incoming`` or touches
    the tables; launching threads only append.
    """

    def __init__(self, backends: Sequence[Backend], timeout: float) -> None:
        self.backends = list(backends)
        self.timeout = timeout
        self._incoming: deque[tuple[Any, ...]] = deque()
        self._harvest_lock = threading.Lock()
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
        self.late_dropped = 0
        self.dropped_bad = 0
        # Per device key, for activity records: the offset from device clock to host clock,
        # and how it was found (merged into ``clocks`` at the end).
        self._offsets: dict[str, int] = {}
        #: Row -> what an activity backend said about it (launch configuration, ...).
        self.details: dict[int, str] = {}
        self.activity_clocks: dict[str, DeviceClock] = {}
        #: When the profile started (set by ``profile``): where activity records of a device
        #: without clock correlation are anchored.
        self.start_ns = time.perf_counter_ns()
        self._waiter: Waiter | None = None

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
        # Past the deadline nothing more is asked of any device (each question may be slow):
        # the fast path is skipped and _take marks what is left unresolved. The clock is read
        # every 8th entry (reading it costs ~85 ns, a tenth of an entry's harvest): at most 8
        # questions are asked after the deadline.
        clock = time.monotonic if deadline is not None else None
        past = False
        try:
            while taken < n:
                entry = popleft()
                slot, kind, name, qk, who, h0, h1, start, stop, nbytes, flags = entry
                if clock is not None and not taken & 7 and clock() >= deadline:  # type: ignore[operator]
                    past, clock = True, None
                q = (fast_queues.get(qk) if start is not None and kind < HOST_RANGE and not flags
                     else None)
                if (q is not None and (backend := q[0]).slot == slot and backend.broken is None
                        and not past):
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
                if kind in HOST_KINDS:
                    # Host entries go to the host table: no need to flush device rows first.
                    tid = thread_ids.get(who)
                    nid = name_ids.get(name) if type(name) is str else None
                    if tid is not None and nid is not None:
                        host_append(nid, HOST_KINDS[kind], tid, h0, h1)
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
        if kind in HOST_KINDS:
            self.host.append(self.names(name), HOST_KINDS[kind], self._thread_id(who), h0, h1)
            return True
        if kind >= ACTIVITY:
            self._take_activity(backend, kind - ACTIVITY, name, queue, who, h0, h1, start, stop,
                                nbytes, flags)
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
        held = False  # the tokens are still in use by a hook call that never returned
        if backend.broken is not None:
            error = f"backend disabled: {backend.broken}"
        elif deadline is not None and time.monotonic() >= deadline:
            error = self._timeout_reason()  # nothing more is asked of the device
        else:
            hook = "timestamp_done"
            try:
                done = backend.timestamp_done(backend, stop)
                if not done:
                    if deadline is None:
                        return False
                    if done is None:
                        # It can't tell, so a read waits itself: the first one is made in a
                        # thread, waited for until the deadline (then the work is done and
                        # the reads below return at once).
                        hook = "device_times" if backend.has_device_times else "elapsed_time"
                        if not self._read_in_time(backend, start, stop, deadline):
                            error, held = self._timeout_reason(hook), True
                    else:
                        error = self._wait(backend, stop, deadline)
                if error is None and flags & APPROXIMATE:
                    # Host-clock times, already placed: never a device's reference token.
                    hook = "device_times"
                    rel, end = self._device_times(backend, start, stop)
                    dur = end - rel
                    flags |= PLACED
                elif error is None:
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
            except NeverSubmitted as exc:
                # The plugin knows the work will never run (deferred submission): give it up
                # now rather than wait for it until the timeout; not an error of the plugin's.
                error = f"its work was never submitted to the device: {exc}".rstrip(": ")
            except Exception as exc:
                # A wrong return type is the plugin's bug: stop using it. An exception is a
                # device error (a failed command, an invalid event): this record has no time,
                # the next ones may.
                error = self._hook_failed(backend, hook, exc, disable=isinstance(exc, BadReturn))
        qid = self._queue_id(backend, queue)
        tid = self._thread_id(who)
        nid = self.names(name)
        if not held:
            self._release(backend, start, stop)
        if error is not None:
            row = self.table.append(nid, kind, qid, tid, h0, h1, h0, 0, nbytes,
                                    flags | UNRESOLVED | PLACED)
            self.errors[row] = error
        else:
            self.table.append(nid, kind, qid, tid, h0, h1, rel, dur, nbytes, flags)
        return True

    def _take_activity(self, backend: Backend, kind: int, name: str, queue: Any, who: Any,
                       launch_begin: int, launch_end: int, begin: int, end: int,
                       nbytes: int, detail: str | None) -> None:
        """A row of a delivered record: already complete, placed by its device's offset."""
        qid = self._queue_id(backend, queue)
        dkey = self.queues[qid].device_key
        offset = self._offsets.get(dkey)
        if offset is None:
            offset = self._activity_offset(backend, queue, qid, dkey, begin, launch_begin)
        start = begin + offset
        h0 = launch_begin + offset if launch_begin else start
        h1 = launch_end + offset if launch_end else h0
        row = self.table.append(self.names(name), kind, qid, self._thread_id(who), h0, h1, start,
                                end - begin, nbytes, PLACED)
        if detail:
            self.details[row] = str(detail)

    def _activity_offset(self, backend: Backend, queue: Any, qid: int, dkey: str,
                         device_ns: int, launch_ns: int) -> int:
        alignment = None
        try:
            alignment = backend.activity_align(backend, queue, device_ns)
            if alignment is not None and not isinstance(alignment, Alignment):
                raise BadReturn(f"activity_align returned {type(alignment).__name__}, expected "
                                f"kprof.Alignment")
        except Exception as exc:
            self._hook_failed(backend, "activity_align", exc, disable=False)
            alignment = None
        q = self.queues[qid]
        if alignment is not None:
            offset = alignment.host_ns - device_ns
            clock = DeviceClock(q.backend, q.device, alignment.method, alignment.error_ns)
        else:
            # The first record's launch (or, unknown, its work) at the profile's start.
            offset = self.start_ns - (launch_ns or device_ns)
            clock = DeviceClock(q.backend, q.device, "no clock correlation: the first device "
                                "record is placed at the profile's start", None)
        self._offsets[dkey] = offset
        self.activity_clocks[dkey] = clock
        return offset

    def _bad_entry(self, entry: tuple[Any, ...], exc: Exception) -> None:
        """Drop an entry kprof cannot make a row of; warn once per profile."""
        slot, kind, name, *_rest, start, stop, _n, _f = entry
        if kind >= ACTIVITY:
            start = stop = None  # device times, not tokens
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
                raise BadReturn(f"elapsed_time returned {type(ns).__name__} {ns!r}, expected "
                                 f"int nanoseconds")
            ns = int(ns)
        return ns

    def _device_times(self, backend: Backend, start: Any, stop: Any) -> tuple[int, int]:
        pair = backend.device_times(backend, start, stop)
        if (type(pair) is not tuple or len(pair) != 2 or type(pair[0]) is not int
                or type(pair[1]) is not int):
            raise BadReturn(f"device_times returned {pair!r}, expected a pair of int nanoseconds")
        return pair

    def _wait(self, backend: Backend, token: Any, deadline: float) -> str | None:
        """Poll until the token is done, sleeping a little more each time; None when done.

        ``deadline`` is shared by a whole harvest: a device that stopped making progress costs
        one timeout in all, not one per pending entry.
        """
        pause = 1e-5
        while not backend.timestamp_done(backend, token):
            if time.monotonic() >= deadline:
                return self._timeout_reason()
            time.sleep(pause)  # releases the GIL: other threads keep running
            pause = min(pause * 2, 0.005)
        return None

    def _timeout_reason(self, hook: str | None = None) -> str:
        what = f"{hook} did not return" if hook else "the device did not reach the timestamp"
        return (f"{what} within {self.timeout:g} s "
                f"(set profile(timeout=...) or KPROF_RESOLVE_TIMEOUT to wait longer)")

    def _read_in_time(self, backend: Backend, start: Any, stop: Any, deadline: float) -> bool:
        """Whether a read of tokens whose backend cannot tell if they are done
        (``timestamp_done`` returns None) returned by ``deadline``. ``device_times`` or
        ``elapsed_time`` then wait for the device themselves, so the read is made in the
        waiter thread. When it did not return, the call goes on in its thread and its tokens
        are not given back (being still in use). What it raised is raised here."""
        if self._waiter is None or self._waiter.stuck:
            self._waiter = Waiter()
        read = self._device_times if backend.has_device_times else self._elapsed
        return self._waiter.call(read, (backend, start, stop), deadline - time.monotonic())

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
                    raise BadReturn(f"queue_info returned {type(info).__name__}, expected "
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
            ident, name = thread_names[key]
            tid = self._thread_ids[who] = self._intern_thread(ThreadRecord(ident, name, task))
        return tid

    def _hook_failed(self, backend: Backend, hook: str, exc: BaseException,
                     disable: bool = True) -> str:
        """Warn once about a misbehaving hook (and stop using the backend); returns why."""
        if isinstance(exc, BadReturn):
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

