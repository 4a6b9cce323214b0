"""The harvest: pending launch entries turned into rows of the record tables.

The launch path (``recorder.py``) appends one entry per launch to ``_incoming``; this module
owns the other end. Tokens are turned into durations in batches: when enough are pending
(which bounds the number of live device events) and when the profile ends.

An entry is the tuple ``(slot, kind, name, queue_id, who, h0, h1, start, stop, nbytes, flags)``:
the backend's slot (None for host entries), a record kind (``KERNEL``, ``COPY``, ``RANGE``, or a
host kind below), the name, ``id(queue)``, the thread key from ``threads.who()``, the host call's
start and end, the two tokens (or None, or a host time in ``stop`` when host-timed), the bytes
of a copy (-1 otherwise) and record flags. It is built by ``Recorder._launch_py`` and the
compiled ``lp_launch`` (``_crecorder.c``), and read by ``_one``, ``_run_columns`` (and
``run_columns`` in C), ``_take`` and ``Recorder._drop_late``: change them together.
"""

from __future__ import annotations

import queue
import threading
import time
import warnings
from array import array
from functools import partial
from itertools import repeat, takewhile
from operator import add, itemgetter, sub
from typing import TYPE_CHECKING, Any

from . import native
from .backend import Alignment, Backend, BadReturn, NeverSubmitted, QueueInfo
from .placement import DeviceClock
from .records import (
    APPROXIMATE,
    HOST_TIMED,
    PLACED,
    UNRESOLVED,
    Details,
    DeviceTable,
    HostTable,
    Interner,
    QueueRecord,
    ThreadRecord,
)
from .threads import thread_names

if TYPE_CHECKING:
    from collections.abc import Sequence

# Host-only entries travel through the same list as launches, tagged with these kinds.
HOST_RANGE, MARK, HOST_LAUNCH = 10, 11, 12
HOST_KINDS = {HOST_RANGE: HostTable.RANGE, MARK: HostTable.MARK, HOST_LAUNCH: HostTable.LAUNCH}
HOST_QUEUE = QueueRecord("host", "host", "host", "host")
# Delivered activity records (activity.py) are tagged ACTIVITY + their record kind; their
# h0/h1 and start/stop are times on the device clock, placed here as they are harvested.
ACTIVITY = 20
# A batch of activity rows delivered column-wise (``ActivityColumns``): one entry for them all.
ACTIVITY_COLUMNS = 40
_SLOT = itemgetter(0)
_SHORT_RUN = 16  # runs shorter than this are cheaper entry by entry (see _harvest)
_DEADLINE_WINDOW = 512  # at most this many entries in one batch call once a deadline is set
_QID = itemgetter(1)


def _mapped(table: dict[int, int], col: array[int], n: int) -> array[int]:
    """``table[v]`` for each v of ``col``: one value repeated when the table has one (a batch
    on one queue, of one scope), else a lookup per row (in C, ``map``)."""
    if len(table) == 1:
        return array("q", table.values()) * n
    return array("q", map(table.__getitem__, col))


def _looked_up(table: dict[Any, Any], keys: Sequence[Any], m: int) -> tuple[Any, int]:
    """``table[k]`` for the first ``m`` keys, and how many of them, from the first, are there;
    one lookup when they are all the same key (the common run)."""
    if keys[:m].count(keys[0]) == m:
        v = table.get(keys[0])
        return ([v] * m, m) if v is not None else ([], 0)
    values: list[Any] = list(map(table.get, keys[:m]))
    if None in values:
        m = values.index(None)
    return values, m


def _column(values: Sequence[int], m: int) -> array[int]:
    """The first ``m`` of kprof's own ints (ids, flags) as an int64 column; a repeat of one
    value when they are one. Not for what a plugin passed: 1 == 1.0 would pass for an int."""
    if values[:m].count(values[0]) == m:
        return array("q", (values[0],)) * m
    return array("q", values[:m])


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
        # Pending entries, oldest first. A list, not a deque: the harvest reads runs of it as
        # slices and deletes what it took in one step (launching threads only append).
        self._incoming: list[tuple[Any, ...]] = []
        self._window = 64  # entries the column-wise harvest looks at in one go (adaptive)
        self._solo = 0  # entries to take one by one before trying column-wise again
        self._deadline_set = False  # the harvest under way has a deadline (see _harvest)
        # The compiled recorder's harvest helpers (kprof_core._crecorder), or None.
        self._compiled = native.compiled()
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
        self.details = Details()
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

        Entries are read in place and deleted from the front of ``_incoming`` in one step at
        the end (launching threads only append): an interrupt or an error loses nothing, and
        nothing is taken twice. Runs of common device entries go column-wise (``_bulk``); host
        entries go straight to the host table; everything else goes to ``_take``, which is
        also where a run stops at work not done yet (waiting there only with a deadline).
        """
        incoming = self._incoming
        n = len(incoming) if limit is None else min(limit, len(incoming))
        taken = 0
        thread_ids = self._thread_ids
        name_ids = self.names.index
        host_append = self.host.append
        bulk = self._bulk
        one = self._one
        # Past the deadline nothing more is asked of any device (each question may be slow):
        # the column-wise and one-by-one paths are skipped and _take marks what is left
        # unresolved. The clock is read before each of their calls (~85 ns, a twentieth of a
        # one-by-one entry); a column-wise call then makes one batch call (of at most
        # _DEADLINE_WINDOW entries) or at most 8 questions per hook (see _bulk).
        clock = time.monotonic if deadline is not None else None
        past = False
        self._deadline_set = deadline is not None
        try:
            while taken < n:
                entry = incoming[taken]
                kind = entry[1]
                if kind in HOST_KINDS:
                    who, name = entry[4], entry[2]
                    tid = thread_ids.get(who)
                    nid = name_ids.get(name) if type(name) is str else None
                    if tid is not None and nid is not None:
                        host_append(nid, HOST_KINDS[kind], tid, entry[5], entry[6])
                        taken += 1
                        continue
                elif kind < HOST_RANGE and entry[7] is not None and not entry[10] and not past:
                    # Long runs of launches go column-wise. A column-wise call costs a few µs
                    # whatever its length, so entries that come alone or in short runs
                    # (launches inside ranges: kernel, host range, range, ...) go one by one,
                    # until a few dozen later the next try finds a long run again. Flagged
                    # entries (approximate ones, observed on the host) and delivered activity
                    # records (kind >= ACTIVITY) go to _take.
                    if clock is not None and clock() >= deadline:  # type: ignore[operator]
                        past, clock = True, None
                    elif (
                        self._solo <= 0
                        and taken + 1 < n
                        and (nxt := incoming[taken + 1])[0] == entry[0]
                        and nxt[7] is not None
                    ):
                        got = bulk(incoming, taken, n)
                        if got:
                            taken += got
                            continue
                    elif one(entry):
                        self._solo -= 1
                        taken += 1
                        continue
                try:
                    done = self._take(entry, deadline)
                except (
                    Exception
                ) as exc:  # a malformed entry (a plugin's bug): never the user's problem
                    self._bad_entry(entry, exc)
                    done = True
                if not done:
                    break
                taken += 1
        finally:
            # BaseException (KeyboardInterrupt while waiting) included: what was not taken stays.
            del incoming[:taken]
        return taken

    def _one(self, entry: tuple[Any, ...]) -> bool:
        """Make a row of one common entry (as ``_bulk`` would, for a run of one); False, with
        nothing changed, for anything else (``_take`` then handles it)."""
        slot, kind, name, qk, who, h0, h1, start, stop, nbytes, flags = entry
        q = self._fast_queues.get(qk)
        if (
            q is None
            or (backend := q[0]).slot != slot
            or backend.broken is not None
            or flags
            or type(kind) is not int
            or kind >= HOST_RANGE
        ):
            return False
        tid = self._thread_ids.get(who)
        nid = self.names.index.get(name) if type(name) is str else None
        ref = self._refs.get(q[2])
        if tid is None or nid is None or ref is None:
            return False
        try:
            if not backend.timestamp_done(backend, stop):
                return False
            if backend.has_device_times:
                pair = backend.device_times(backend, start, stop)
                if type(pair) is not tuple or len(pair) != 2:
                    return False
                dur = pair[1] - pair[0]
                rel = pair[0] - self._ref_begin[q[2]]
            else:
                dur = backend.elapsed_time(backend, start, stop)
                rel = backend.elapsed_time(backend, ref[1], stop) - dur
            if (
                type(dur) is not int
                or type(rel) is not int
                or type(nbytes) is not int
                or type(flags) is not int
                or type(kind) is not int
                or type(h0) is not int
                or type(h1) is not int
            ):
                return False
        except Exception:
            return False  # _take asks again and reports the failure properly
        self.table.append(nid, kind, q[1], tid, h0, h1, rel, dur, nbytes, flags)
        if backend.pools_tokens:
            self._release(backend, start, stop)
        return True

    def _bulk(self, incoming: list[tuple[Any, ...]], i: int, n: int) -> int:
        """Make rows of the longest run of common entries from ``incoming[i]`` on, column by
        column; returns how many (0: let ``_one`` or ``_take`` have ``incoming[i]``).

        A common entry is a timed launch of a healthy backend on a queue, thread and name
        already known, on a device whose reference token is set, with its work done. The run
        is read with one batch call where the plugin has ``device_times_batch`` (OpenCL), else
        with the per-token hooks mapped over it; either way the loop per record is in C
        (``map``, ``zip``, ``array``), which is what makes a million records cheap (measured in
        bench/run.py). Anything unusual (a hook failing, a wrong type, a new queue) ends the run
        there and ``_take`` handles that entry and reports it, exactly as before.
        """
        slot = incoming[i][0]
        backend = self._by_slot.get(slot)
        if backend is None or backend.broken is not None:
            return 0
        w = min(n - i, self._window)
        if self._deadline_set:
            # Between two reads of the clock: one batch call, or at most 8 questions per hook
            # (each may be slow), as entry by entry.
            w = min(w, _DEADLINE_WINDOW if backend.has_batch_times else 8)
        chunk = incoming[i : i + w]
        try:
            got, run = self._bulk_rows(backend, slot, chunk)
        except Exception:  # _take asks again, entry by entry, and reports what failed
            got = run = 0
        # Adapt the window to the runs seen (`run`: the entries of the run, done or not): long
        # when launches come in long runs, short when they alternate with ranges (slicing a
        # long window for a run of one costs O(window)); work not done yet says nothing.
        self._window = min(4096, w * 2) if run == w else max(16, run * 2)
        if 0 < run < min(w, _SHORT_RUN):  # other entries broke it early: one by one a while
            self._solo = 4 * _SHORT_RUN
        return got

    def _bulk_rows(
        self, backend: Backend, slot: int, chunk: list[tuple[Any, ...]]
    ) -> tuple[int, int]:
        """Rows of the longest run of common entries at the start of ``chunk`` whose work is
        done; returns how many, and how long the run of common entries was, done or not (the
        table is untouched when it returns 0 rows)."""
        refs = self._refs
        absolute = backend.has_device_times  # placed by device time, else by elapsed time
        # What a device needs before its launches can go here: its reference token (set by
        # _take for the first launch seen there) and, for absolute clocks, its begin time.
        known: dict[str, Any] = self._ref_begin if absolute else refs
        mod = self._compiled
        if mod is not None:
            m, starts, stops, *raw = mod.run_columns(
                chunk,
                slot,
                backend,
                self._fast_queues,
                self._thread_ids,
                self.names.index,
                known,
                HOST_RANGE,
            )
            cols = [array("q", b) for b in raw]
        else:
            m, starts, stops, cols = self._run_columns(chunk, slot, backend, known)
        if not m:
            return 0, 0
        if backend.has_batch_times:
            got = backend.device_times_batch(backend, starts, stops)
            if type(got) is not tuple or len(got) != 2:
                return 0, m
            begins, ends = array("q", got[0]), array("q", got[1])
            k = len(begins)
            if len(ends) != k or k > m:
                return 0, m
        else:
            done = partial(backend.timestamp_done, backend)
            k = len(list(takewhile(bool, map(done, stops))))
            starts, stops = starts[:k], stops[:k]
            if absolute:
                pairs = list(map(partial(backend.device_times, backend), starts, stops))
                if pairs and (set(map(type, pairs)) != {tuple} or set(map(len, pairs)) != {2}):
                    return 0, m
                begins_t, ends_t = zip(*pairs) if pairs else ((), ())
                if k and (set(map(type, begins_t)) != {int} or set(map(type, ends_t)) != {int}):
                    return 0, m
                begins, ends = array("q", begins_t), array("q", ends_t)
            else:
                el = partial(backend.elapsed_time, backend)
                durs = list(map(el, starts, stops))
                # Placed by the elapsed time from the device's reference token to each stop.
                qcol = cols[2]
                ref_tok = {qid: refs[self.queues[qid].device_key][1] for qid in set(qcol[:k])}
                to_stop = list(map(el, map(ref_tok.__getitem__, qcol[:k]), stops))
                if k and (set(map(type, durs)) != {int} or set(map(type, to_stop)) != {int}):
                    return 0, m
                ends = array("q", to_stop)
                begins = array("q", map(sub, to_stop, durs))
        if not k:
            return 0, m
        names, kinds, queues, threads, h0s, h1s, nbytes, flags, refb = cols
        # start: relative to the first work seen on the device (refb: when it began; 0 for
        # elapsed-time backends, whose begins are already relative to it).
        if mod is not None:
            rel_b, dur_b = mod.rel_dur(begins.tobytes(), ends.tobytes(), refb.tobytes())
            rel, dur = array("q", rel_b), array("q", dur_b)
        else:
            rel, dur = array("q", map(sub, begins, refb)), array("q", map(sub, ends, begins))
        if k < m:
            names, kinds, queues, threads = names[:k], kinds[:k], queues[:k], threads[:k]
            h0s, h1s, nbytes, flags = h0s[:k], h1s[:k], nbytes[:k], flags[:k]
        t = self.table
        t.name.extend(names)
        t.kind.extend(kinds)
        t.queue.extend(queues)
        t.thread.extend(threads)
        t.launch_start.extend(h0s)
        t.launch_end.extend(h1s)
        t.start.extend(rel)
        t.duration.extend(dur)
        t.nbytes.extend(nbytes)
        t.flags.extend(flags)
        if backend.pools_tokens:
            for start, stop in zip(starts[:k], stops[:k]):
                self._release(backend, start, stop)
        return k, m

    def _run_columns(
        self, chunk: list[tuple[Any, ...]], slot: int, backend: Backend, known: dict[str, Any]
    ) -> tuple[int, Any, Any, list[array[int]]]:
        """The bookkeeping of a run, in Python (``_crecorder.run_columns`` in C): the longest
        prefix of ``chunk`` of timed launches of ``backend`` on known queues of a device in
        ``known``, by known threads, with known names; ``(m, starts, stops, columns)`` with the
        columns name, kind, queue id, thread id, h0, h1, nbytes, flags and the reference's
        begin time (0 where ``known`` holds no int)."""
        m = len(chunk)
        slots = list(map(_SLOT, chunk))
        if slots.count(slot) != m:
            m = next(j for j, s in enumerate(slots) if s != slot)
        if not m:
            return 0, (), (), []
        _s, kinds, names, qks, whos, h0s, h1s, starts, stops, nbytes, flags = zip(*chunk[:m])
        if None in starts:  # host-timed (a queue without profiling)
            m = starts.index(None)
        if any(flags[:m]):  # flagged (approximate: observed on the host): _take's
            m = next(j for j, f in enumerate(flags) if f)
        if m and max(kinds[:m]) >= HOST_RANGE:  # activity records (and host kinds): _take's
            m = next(j for j, k in enumerate(kinds) if k >= HOST_RANGE)
        # Most runs have one queue, one thread and one name: one lookup each, not one a row.
        qs, m = _looked_up(self._fast_queues, qks, m)
        tids, m = _looked_up(self._thread_ids, whos, m)
        nids, m = _looked_up(self.names.index, names, m)
        qs = qs[:m]
        for q in set(qs):
            if q[0] is not backend or q[2] not in known:  # another backend's; a new device
                m = min(m, qs.index(q))
        if not m:
            return 0, (), (), []
        qs = qs[:m]
        refb = {q: (known[q[2]] if type(known[q[2]]) is int else 0) for q in set(qs)}
        try:
            cols = [
                _column(nids, m),
                array("q", kinds[:m]),
                _column(list(map(_QID, qs)), m),
                _column(tids, m),
                array("q", h0s[:m]),
                array("q", h1s[:m]),
                array("q", nbytes[:m]),
                array("q", (0,)) * m,
                _column(list(map(refb.__getitem__, qs)), m),
            ]
        except (TypeError, OverflowError):  # a field that is not an int: _take reports it
            return 0, (), (), []
        return m, starts[:m], stops[:m], cols

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
        if kind == ACTIVITY_COLUMNS:
            self._take_columns(backend, name, who)
            return True
        if kind >= ACTIVITY:
            self._take_activity(
                backend, kind - ACTIVITY, name, queue, who, h0, h1, start, stop, nbytes, flags
            )
            return True
        if start is None:
            # Host timed: from the launch's start to after it synchronized (stop is a host time).
            end = stop if isinstance(stop, int) else h1
            self.table.append(
                self.names(name),
                kind,
                self._queue_id(backend, queue),
                self._thread_id(who),
                h0,
                h1,
                h0,
                end - h0,
                nbytes,
                flags | HOST_TIMED | PLACED,
            )
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
            row = self.table.append(
                nid, kind, qid, tid, h0, h1, h0, 0, nbytes, flags | UNRESOLVED | PLACED
            )
            self.errors[row] = error
        else:
            self.table.append(nid, kind, qid, tid, h0, h1, rel, dur, nbytes, flags)
        return True

    def _take_activity(
        self,
        backend: Backend,
        kind: int,
        name: str,
        queue: Any,
        who: Any,
        launch_begin: int,
        launch_end: int,
        begin: int,
        end: int,
        nbytes: int,
        detail: str | None,
    ) -> None:
        """A row of a delivered record: already complete, placed by its device's offset."""
        qid = self._queue_id(backend, queue)
        dkey = self.queues[qid].device_key
        offset = self._offsets.get(dkey)
        if offset is None:
            offset = self._activity_offset(backend, queue, qid, dkey, begin, launch_begin)
        start = begin + offset
        h0 = launch_begin + offset if launch_begin else start
        h1 = launch_end + offset if launch_end else h0
        row = self.table.append(
            self.names(name),
            kind,
            qid,
            self._thread_id(who),
            h0,
            h1,
            start,
            end - begin,
            nbytes,
            PLACED,
        )
        if detail:
            self.details[row] = str(detail)

    def _take_columns(self, backend: Backend, cols: Any, whos: dict[int, Any]) -> None:
        """Rows of a batch delivered column-wise (``ActivityColumns``): the per-row work is
        mapping the batch's name, queue and scope indices to the profile's, and adding each
        device's clock offset, all in C loops (``map``, ``array``)."""
        n = len(cols)
        if not n:
            return
        # Only the names and queues its rows use (the lists may be the backend's whole tables).
        qids: dict[int, int] = {}
        offsets: dict[int, int] = {}
        for j in sorted(set(cols.queue)):
            q = cols.queues[j]
            qids[j] = qid = self._queue_id(backend, q)
            dkey = self.queues[qid].device_key
            off = self._offsets.get(dkey)
            if off is None:
                i = cols.queue.index(j)
                off = self._activity_offset(
                    backend, q, qid, dkey, cols.begin[i], cols.launch_begin[i]
                )
            offsets[j] = off
        nids = {j: self.names(cols.names[j]) for j in set(cols.name)}
        tids = {scope: self._thread_id(who) for scope, who in whos.items()}
        one = set(offsets.values())
        if len(one) == 1:
            off = one.pop()
            start = array("q", map(add, cols.begin, repeat(off, n)))
            # A launch time of 0 is unknown: the row's own start stands for it (rare: only
            # then a loop per row in Python).
            if 0 in cols.launch_begin or 0 in cols.launch_end:
                h0 = array("q", [b + off if b else s for b, s in zip(cols.launch_begin, start)])
                h1 = array("q", [e + off if e else s for e, s in zip(cols.launch_end, h0)])
            else:
                h0 = array("q", map(add, cols.launch_begin, repeat(off, n)))
                h1 = array("q", map(add, cols.launch_end, repeat(off, n)))
        else:
            per = array("q", map(offsets.__getitem__, cols.queue))
            start = array("q", map(add, cols.begin, per))
            lb = zip(cols.launch_begin, per, start)
            h0 = array("q", [b + o if b else s for b, o, s in lb])
            h1 = array("q", [e + o if e else s for e, o, s in zip(cols.launch_end, per, h0)])
        t = self.table
        first = len(t)
        t.name.extend(_mapped(nids, cols.name, n))
        t.kind.extend(cols.kind)
        t.queue.extend(_mapped(qids, cols.queue, n))
        t.thread.extend(_mapped(tids, cols.scope, n))
        t.launch_start.extend(h0)
        t.launch_end.extend(h1)
        t.start.extend(start)
        t.duration.extend(array("q", map(sub, cols.end, cols.begin)))
        t.nbytes.extend(cols.nbytes)
        t.flags.extend(array("q", (PLACED,)) * n)
        if cols.detail is not None:
            fmt, columns = cols.detail
            self.details.add_block(first, n, fmt, tuple(columns))

    def _activity_offset(
        self, backend: Backend, queue: Any, qid: int, dkey: str, device_ns: int, launch_ns: int
    ) -> int:
        alignment = None
        try:
            alignment = backend.activity_align(backend, queue, device_ns)
            if alignment is not None and not isinstance(alignment, Alignment):
                raise BadReturn(
                    f"activity_align returned {type(alignment).__name__}, expected kprof.Alignment"
                )
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
            clock = DeviceClock(
                q.backend,
                q.device,
                "no clock correlation: the first device record is placed at the profile's start",
                None,
            )
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
            warnings.warn(
                f"kprof: a record of {name!r} from {who} was dropped, as it could not "
                f"be read: {type(exc).__name__}: {exc}",
                RuntimeWarning,
                stacklevel=2,
            )
        if backend is not None and start is not None:
            self._release(backend, start, stop)

    def _elapsed(self, backend: Backend, start: Any, stop: Any) -> int:
        ns = backend.elapsed_time(backend, start, stop)
        if type(ns) is not int:
            if isinstance(ns, bool) or not hasattr(ns, "__index__"):
                raise BadReturn(
                    f"elapsed_time returned {type(ns).__name__} {ns!r}, expected int nanoseconds"
                )
            ns = int(ns)
        return ns

    def _device_times(self, backend: Backend, start: Any, stop: Any) -> tuple[int, int]:
        pair = backend.device_times(backend, start, stop)
        if (
            type(pair) is not tuple
            or len(pair) != 2
            or type(pair[0]) is not int
            or type(pair[1]) is not int
        ):
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
        return (
            f"{what} within {self.timeout:g} s "
            f"(set profile(timeout=...) or KPROF_RESOLVE_TIMEOUT to wait longer)"
        )

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
                    raise BadReturn(
                        f"queue_info returned {type(info).__name__}, expected kprof.QueueInfo"
                    )
            except Exception as exc:
                self._hook_failed(backend, "queue_info", exc, disable=False)
                info = None
            if info is None:
                info = QueueInfo(device=backend.name, label="queue")
            rec = QueueRecord(backend.name, info.device, info.label, f"{backend.name}:{info.key()}")
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

    def _hook_failed(
        self, backend: Backend, hook: str, exc: BaseException, disable: bool = True
    ) -> str:
        """Warn once about a misbehaving hook (and stop using the backend); returns why."""
        if isinstance(exc, BadReturn):
            reason = str(exc)
        else:
            reason = f"{hook} raised {type(exc).__name__}: {exc}"
        if disable:
            backend.disable(reason)
        elif reason not in self._warned:
            self._warned.add(reason)
            warnings.warn(
                f"kprof: backend {backend.name!r} ({backend.plugin_label}): {reason}",
                RuntimeWarning,
                stacklevel=3,
            )
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
