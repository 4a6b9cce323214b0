"""The harvest: pending launch entries turned into rows of the record tables.

The launch path (``recorder.py``) appends one entry per launch to ``_incoming``; this module
owns the other end. Tokens are turned into durations in batches: when enough are pending
(which bounds the number of live device events) and when the profile ends.

Entry formats are defined once, in ``kprof_core/low_level/layout.py`` (built by the launch and
range paths, read here by constant index or unpacked in that order)."""

from __future__ import annotations

import time
import warnings
from typing import TYPE_CHECKING, Any

from kprof_core import _clock
from kprof_core.data.records import (
    Details,
    DeviceClock,
    DeviceTable,
    HostTable,
    Interner,
    QueueRecord,
    ThreadRecord,
)
from kprof_core.host.backend import Backend, BadReturn, QueueInfo, checked_queue_info
from kprof_core.low_level import native
from kprof_core.low_level.layout import (
    A_RECORD,
    A_SLOT,
    ENTRY_ACTIVITY,
    ENTRY_ACTIVITY_COLUMNS,
    FIRST_HOST_KIND,
    FLAGS,
    H0,
    H1,
    KIND,
    NAME,
    SITE,
    SLOT,
    START,
    STOP,
    WHO,
    WITH_HOST,
    with_host,
)
from kprof_core.recording.configs import Configs
from kprof_core.recording.placement import place
from kprof_core.recording.threads import OwnedLock, thread_names

if TYPE_CHECKING:
    from collections.abc import Sequence

from kprof_core.recording import harvest_activity as activity_route
from kprof_core.recording import harvest_columns as columns_route
from kprof_core.recording import harvest_one as one_route
from kprof_core.recording import harvest_take as take_route

HOST_KINDS = take_route.HOST_KINDS
HOST_QUEUE = QueueRecord("host", "host", "host", "host")


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
        self.incoming: list[tuple[Any, ...]] = []
        self.window = 64  # entries the column-wise harvest looks at in one go (adaptive)
        self.solo = 0  # entries to take one by one before trying column-wise again
        self.deadline_set = False  # the harvest under way has a deadline (see _harvest)
        # The compiled recorder's harvest helpers (kprof_core.low_level._crecorder), or None.
        self.compiled = native.compiled()
        self.lock = OwnedLock()  # see threads.OwnedLock: a signal handler never waits on it
        self.finished = False  # everything is resolved and placed; tables are final
        self.table = DeviceTable()
        self.host = HostTable()
        self.names = Interner()
        self.configs = Configs()  # launch configurations, per backend (configs.py)
        self.queues: list[QueueRecord] = []
        # id(queue) -> queue, for every queue an entry refers to (entries hold the id only);
        # kept alive until the profile ends, so that no other queue can take its id meanwhile.
        self.live_queues: dict[int, Any] = {}
        # (id(backend), id(queue)) -> queue id in self.queues.
        self.queue_ids: dict[tuple[int, int], int] = {}
        # id(queue) -> (backend, queue id, device key), for the harvest's fast path.
        self.fast_queues: dict[int, tuple[Backend, int, str]] = {}
        self.by_slot = {b.slot: b for b in self.backends}
        self.queue_index: dict[QueueRecord, int] = {}
        self.threads: list[ThreadRecord] = []
        self.thread_ids: dict[Any, int] = {}
        self.thread_index: dict[ThreadRecord, int] = {}
        self.errors: dict[int, str] = {}
        self.clocks: dict[str, DeviceClock] = {}
        # Per device key: the first token seen there (kept alive), its launch window, and the
        # backend; every other token on the device is placed by elapsed_time from it.
        self.refs: dict[str, tuple[Backend, Any, int, int]] = {}
        # Per device key, for backends with device_times: when the reference token's work began.
        self.ref_begin: dict[str, int] = {}
        self.ref_tokens: set[int] = set()
        self.warned: set[str] = set()
        self.late_dropped = 0
        self.dropped_bad = 0
        # Per device key, for activity records: the offset from device clock to host clock,
        # and how it was found (merged into ``clocks`` at the end).
        self.offsets: dict[str, int] = {}
        #: Row -> what an activity backend said about it (launch configuration, ...).
        self.details = Details()
        self.activity_clocks: dict[str, DeviceClock] = {}
        #: When the profile started (set by ``profile``): where activity records of a device
        #: without clock correlation are anchored.
        self.start_ns = time.perf_counter_ns()
        self.waiter: take_route.Waiter | None = None
        #: Device key -> why its work is no longer waited for: it let a deadline pass (a hung
        #: device costs one timeout, then back-pressure and the end stop waiting on it).
        self.stuck: dict[str, str] = {}
        #: While the end resolves: tokens to give back afterwards (``release_deferred``), so
        #: that slow ``release_timestamp`` calls do not eat the time left for resolving.
        self.deferred: list[tuple[Backend, Any]] | None = None
        self.unreleased = 0  # tokens not given back: the deadline had passed

    def add_backend(self, backend: Backend) -> None:
        """A backend that joined the profile while it ran (``Recorder.add_backend``)."""
        self.by_slot[backend.slot] = backend
        self.backends.append(backend)

    def harvest(self, wait: bool = False, limit: int | None = None) -> int:
        """Turn pending entries into rows, oldest first; returns how many were taken.

        Without ``wait`` it stops at the first entry whose work is not done. With ``wait`` it
        waits for them (cooperatively, at most ``timeout`` seconds in all). It takes at most
        what was pending when it started, so launching threads cannot keep it busy forever.
        """
        if not self.lock.acquire(blocking=wait):
            return 0
        try:
            if self.finished:
                return 0
            deadline = _clock.monotonic() + self.timeout if wait else None
            return self.harvest_locked(limit, deadline)
        finally:
            self.lock.release()

    def harvest_locked(self, limit: int | None, deadline: float | None) -> int:
        """The harvest proper; the caller holds ``_harvest_lock`` (so entries only get added).

        Entries are read in place and deleted from the front of ``_incoming`` in one step at
        the end (launching threads only append): an interrupt or an error loses nothing, and
        nothing is taken twice. Runs of common device entries go column-wise (``_bulk``); host
        entries go straight to the host table; everything else goes to ``_take``, which is
        also where a run stops at work not done yet (waiting there only with a deadline).
        """
        incoming = self.incoming
        n = len(incoming) if limit is None else min(limit, len(incoming))
        taken = 0
        thread_ids = self.thread_ids
        name_ids = self.names.index
        host_append = self.host.append
        bulk = columns_route.bulk
        one = one_route.one
        # Past the deadline nothing more is asked of any device (each question may be slow):
        # the column-wise and one-by-one paths are skipped, _take marks what is left
        # unresolved. The clock is read before each of their calls (~85 ns, a twentieth of a
        # one-by-one entry); a column-wise call then makes one batch call or at most 8.
        clock = _clock.monotonic if deadline is not None else None
        past = False
        self.deadline_set = deadline is not None
        try:
            while taken < n:
                entry = incoming[taken]
                kind = entry[KIND]
                if kind in HOST_KINDS:
                    who, name = entry[WHO], entry[NAME]
                    tid = thread_ids.get(who)
                    nid = name_ids.get(name) if type(name) is str else None
                    if tid is not None and nid is not None:
                        host_append(nid, HOST_KINDS[kind], tid, entry[H0], entry[H1], entry[SITE])
                        taken += 1
                        continue
                elif (
                    kind < FIRST_HOST_KIND
                    and entry[START] is not None
                    and (not (flags := entry[FLAGS]) or flags == WITH_HOST)
                    and not past
                ):
                    # Long runs of launches (and ranges: WITH_HOST) go column-wise; a call costs
                    # a few µs whatever its length, so entries alone or in short runs (between
                    # marks) go one by one, until a few dozen later the next try finds a long
                    # run again. Flagged entries (approximate: observed on the host) and
                    # delivered activity records (ENTRY_ACTIVITY) go to _take.
                    if clock is not None and clock() >= deadline:  # type: ignore[operator]
                        past, clock = True, None
                    elif (
                        self.solo <= 0
                        and taken + 1 < n
                        and (nxt := incoming[taken + 1])[SLOT] == entry[SLOT]
                        and nxt[KIND] < FIRST_HOST_KIND  # not an (shorter) activity entry
                        and nxt[START] is not None
                    ):
                        got = bulk(self, incoming, taken, n)
                        if got:
                            taken += got
                            continue
                    elif one(self, entry):
                        self.solo -= 1
                        taken += 1
                        continue
                try:
                    done = self.take(entry, deadline)
                except (
                    Exception
                ) as exc:  # a malformed entry (a plugin's bug): never the user's problem
                    self.bad_entry(entry, exc)
                    done = True
                if not done:
                    break
                taken += 1
        finally:
            # BaseException (KeyboardInterrupt while waiting) included: what was not taken stays.
            del incoming[:taken]
        return taken

    def decode(self, entry: tuple[Any, ...]) -> tuple[Any, ...]:
        """An entry with its backend and queue objects in place of their slot and id."""
        slot, kind, name, qk, *rest = entry  # ENTRY_FIELDS order
        backend = None if slot is None else self.by_slot[slot]
        queue = None if qk is None else self.live_queues.get(qk)
        return (backend, kind, name, queue, *rest)

    def bad_entry(self, entry: tuple[Any, ...], exc: Exception) -> None:
        """Drop an entry kprof cannot make a row of; warn once per profile."""
        rows = 1
        if entry[KIND] == ENTRY_ACTIVITY_COLUMNS:  # a batch: each of its rows is dropped
            slot, start, stop = entry[A_SLOT], None, None
            try:
                rows = len(entry[A_RECORD].scope)
            except Exception:
                pass
            what = f"a batch of {rows} activity rows"
        elif entry[KIND] == ENTRY_ACTIVITY:  # no tokens to give back
            slot, start, stop = entry[A_SLOT], None, None
            what = f"a record of {getattr(entry[A_RECORD], 'name', '?')!r}"
        else:
            slot, name, start, stop = entry[SLOT], entry[NAME], entry[START], entry[STOP]
            what = f"a record of {name!r}"
        backend = self.by_slot.get(slot) if slot is not None else None
        self.dropped_bad += rows
        take_route.keep_host_side(self, entry)
        if "bad entry" not in self.warned:
            self.warned.add("bad entry")
            who = f"backend {backend.name!r} ({backend.plugin_label})" if backend else "kprof"
            warnings.warn(
                f"kprof: {what} from {who} was dropped, as it could not "
                f"be read: {type(exc).__name__}: {exc}",
                RuntimeWarning,
                stacklevel=2,
            )
        if backend is not None and start is not None:
            self.release(backend, start, stop)

    def release(self, backend: Backend, start: Any, stop: Any) -> None:
        """Give tokens back once (``start`` may be ``stop``); reference tokens stay for now.
        While the end resolves, they are given back afterwards (``release_deferred``)."""
        refs = self.ref_tokens
        deferred = self.deferred
        for tok in (start, stop) if stop is not start else (start,):
            if tok is None or id(tok) in refs:
                continue
            if deferred is not None:
                deferred.append((backend, tok))
                continue
            try:
                backend.release_timestamp(backend, tok)
            except Exception as exc:
                self.hook_failed(backend, "release_timestamp", exc)

    def release_deferred(self, deadline: float | None) -> None:
        """Give back the tokens ``release`` deferred while the end resolved
        (``harvest_take.release_deferred``: bounded past the deadline)."""
        take_route.release_deferred(self, deadline)

    def queue_id(self, backend: Backend | None, queue: Any) -> int:
        key = (0, 0) if backend is None else (id(backend), id(queue))
        qid = self.queue_ids.get(key)
        if qid is not None:
            return qid
        if backend is None:
            rec = HOST_QUEUE
        else:
            info: QueueInfo | None = None
            try:
                info = backend.queue_info(backend, queue)
                checked_queue_info(info)
            except Exception as exc:
                self.hook_failed(backend, "queue_info", exc, disable=False)
                info = None
            if info is None:
                info = QueueInfo(device=backend.name, label="queue")
            rec = QueueRecord(backend.name, info.device, info.label, f"{backend.name}:{info.key()}")
        qid = self.queue_ids[key] = self.intern_queue(rec)
        if backend is not None:
            self.fast_queues.setdefault(id(queue), (backend, qid, rec.device_key))
        return qid

    def thread_id(self, who: Any) -> int:
        tid = self.thread_ids.get(who)
        if tid is None:
            key, task = who if isinstance(who, tuple) else (who, None)
            ident, name = thread_names[key]
            tid = self.thread_ids[who] = self.intern_thread(ThreadRecord(ident, name, task))
        return tid

    def hook_failed(
        self, backend: Backend, hook: str, exc: BaseException, disable: bool = True
    ) -> str:
        """Warn once about a misbehaving hook (and stop using the backend); returns why."""
        if isinstance(exc, BadReturn):
            reason = str(exc)
        else:
            reason = f"{hook} raised {type(exc).__name__}: {exc}"
        if disable:
            backend.disable(reason)
        elif (key := f"{backend.slot} {hook} {type(exc).__name__}") not in self.warned:
            # One warning per backend, hook and kind of failure: device errors differ per
            # record (an event's address in the message) and would warn once each.
            self.warned.add(key)
            warnings.warn(
                f"kprof: backend {backend.name!r} ({backend.plugin_label}): {reason}",
                RuntimeWarning,
                stacklevel=3,
            )
        return reason

    def intern_queue(self, q: QueueRecord) -> int:
        qid = self.queue_index.get(q)
        if qid is None:
            qid = self.queue_index[q] = len(self.queues)
            self.queues.append(q)
        return qid

    def intern_thread(self, th: ThreadRecord) -> int:
        tid = self.thread_index.get(th)
        if tid is None:
            tid = self.thread_index[th] = len(self.threads)
            self.threads.append(th)
        return tid

    def take(self, entry: tuple[Any, ...], deadline: float | None) -> bool:
        """Make a row of one entry by the route for anything unusual (``harvest_take``);
        False (and no change) when its work is not done and ``deadline`` is None."""
        if entry[KIND] == ENTRY_ACTIVITY_COLUMNS:  # a batch: complete rows, never waits
            activity_route.take_activity_columns(self, entry)
            return True
        return take_route.take(self, entry, deadline)

    def drop_late(self) -> None:
        """Drop what is pending (after the profile ended), giving its tokens back."""
        incoming = self.incoming
        late = incoming[:]
        del incoming[: len(late)]  # threads may still append: those come back here
        for entry in late:
            if entry[KIND] == ENTRY_ACTIVITY_COLUMNS:  # a batch: its rows, no tokens
                self.late_dropped += len(entry[A_RECORD])
                continue
            self.late_dropped += 2 if with_host(entry) else 1
            slot = entry[SLOT]
            if entry[KIND] != ENTRY_ACTIVITY and slot is not None and entry[START] is not None:
                self.release(self.by_slot[slot], entry[START], entry[STOP])  # holds tokens

    def end(self, deadline: float | None = None) -> None:
        """Once, holding the lock, after the last entry: device rows placed on the host clock,
        the tables made final, every reference token given back, the user's queues forgotten.
        ``align_clock`` is asked only before ``deadline``."""
        try:
            self.clocks.update(
                place(self.table, self.queues, self.refs, self.hook_failed, deadline)
            )
            for dkey, clock in self.activity_clocks.items():
                # A device timed both ways (events for ranges, records for kernels) has two.
                self.clocks[dkey if dkey not in self.clocks else f"{dkey} (activity)"] = clock
            # Final: exactly sized columns (a million records' arrays over-allocate up to 5 MB).
            self.table.trim()
            self.host.trim()
        finally:
            for backend, tok, _h0, _h1 in self.refs.values():
                self.ref_tokens.discard(id(tok))
                self.release(backend, tok, None)
            self.refs.clear()
            if self.waiter is not None:
                self.waiter.close()
            self.queue_ids.clear()  # drop references to the user's queues
            self.fast_queues.clear()
            self.live_queues.clear()
