"""The harvest: pending launch entries turned into rows of the record tables.

The launch path (``recorder.py``) appends one entry per launch to ``_incoming``; this module
owns the other end. Tokens are turned into durations in batches: when enough are pending
(which bounds the number of live device events) and when the profile ends.

Entry formats are defined once, in ``kprof_core/low_level/layout.py`` (built by the launch and
range paths, read here by constant index or unpacked in that order)."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from kprof_core import _clock
from kprof_core.data.records import DeviceClock, HostTable
from kprof_core.host.backend import Backend
from kprof_core.low_level import native
from kprof_core.low_level.layout import (
    A_RECORD,
    A_SLOT,
    ENTRY_ACTIVITY,
    ENTRY_ACTIVITY_COLUMNS,
    ENTRY_LAUNCH_BATCH,
    ENTRY_WORK_RANGE,
    FIRST_HOST_KIND,
    FLAGS,
    FLOPS,
    H0,
    H1,
    KIND,
    NAME,
    NBYTES,
    SITE,
    SLOT,
    START,
    STOP,
    WHO,
    WITH_HOST,
    with_host,
)
from kprof_core.recording import harvest_batch, harvest_one, work_ranges
from kprof_core.recording import harvest_take as take_route
from kprof_core.recording.harvest_activity import take_activity_columns
from kprof_core.recording.harvest_columns import Columns
from kprof_core.recording.harvest_delivered import Delivered
from kprof_core.recording.placement import place
from kprof_core.recording.problems import Problems
from kprof_core.recording.tables import Tables
from kprof_core.recording.threads import OwnedLock
from kprof_core.recording.tokens import Tokens

if TYPE_CHECKING:
    from collections.abc import Sequence

HOST_KINDS = take_route.HOST_KINDS
HOST_RANGE = HostTable.RANGE


class Harvest:
    """The record side of a profile: the pending entries and the lock that takes them, and
    the parts the entries become rows through: the ``tables`` (with their interners), the
    ``tokens`` (reading the device's), the ``delivered`` records' placement, the column-wise
    route and what went wrong (``problems``).

    Only the thread holding ``lock`` takes entries out of ``incoming`` or touches the
    tables; launching threads only append.
    """

    def __init__(self, backends: Sequence[Backend], timeout: float) -> None:
        # Pending entries, oldest first. A list, not a deque: the harvest reads runs of it as
        # slices and deletes what it took in one step (launching threads only append).
        self.incoming: list[tuple[Any, ...]] = []
        self.lock = OwnedLock()  # see threads.OwnedLock: a signal handler never waits on it
        self.finished = False  # everything is resolved and placed; tables are final
        self.problems = Problems()
        self.tables = Tables(backends, self.problems)
        self.tokens = Tokens(timeout, self.problems)
        self.delivered = Delivered(self.tables)
        self.columns = Columns(self.tables, self.tokens, native.compiled())
        #: Per device, how its rows were placed on the host clock (filled at the end).
        self.clocks: dict[str, DeviceClock] = {}

    def add_backend(self, backend: Backend) -> None:
        """A backend that joined the profile while it ran (``Recorder.add_backend``)."""
        self.tables.add_backend(backend)

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
            deadline = _clock.monotonic() + self.tokens.timeout if wait else None
            return self.harvest_locked(limit, deadline)
        finally:
            self.lock.release()

    def harvest_locked(self, limit: int | None, deadline: float | None) -> int:
        """The harvest proper; the caller holds ``lock`` (so entries only get added).

        Entries are read in place and deleted from the front of ``incoming`` in one step at
        the end (launching threads only append): an interrupt or an error loses nothing, and
        nothing is taken twice. Runs of common device entries go column-wise (``Columns``),
        raw launches' batches too (``take_batch``); host entries go straight to the host
        table; everything else to ``take``, where a run stops at work not done yet (waiting
        there only with a deadline)."""
        incoming = self.incoming
        n = len(incoming) if limit is None else min(limit, len(incoming))
        taken = 0
        tables, tokens, columns = self.tables, self.tokens, self.columns
        thread_ids, name_ids = tables.thread_ids, tables.names.index
        host_append, one = tables.host.append, harvest_one.one
        work_append = tables.work_ranges.append
        # Past the deadline nothing more is asked of any device (each question may be slow):
        # _take marks what is left unresolved. The clock is read before each column-wise or
        # one-by-one call (~85 ns); a column-wise call makes one batch call or at most 8.
        clock = _clock.monotonic if deadline is not None else None
        past = False
        deadline_set = deadline is not None
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
                elif kind == ENTRY_WORK_RANGE and (flags := entry[FLAGS]) in (0, WITH_HOST):
                    # A range its work times (work_ranges.py): kept for the end, its host
                    # range a row now (the common case; anything else by take's route).
                    who, name = entry[WHO], entry[NAME]
                    tid = thread_ids.get(who)
                    nid = name_ids.get(name) if type(name) is str else None
                    if tid is not None and nid is not None:
                        h0, h1, site = entry[H0], entry[H1], entry[SITE]
                        work_append(
                            (entry[SLOT], nid, tid, h0, h1, entry[NBYTES], entry[FLOPS], site)
                        )
                        if flags:
                            host_append(nid, HOST_RANGE, tid, h0, h1, site)
                        taken += 1
                        continue
                elif kind == ENTRY_LAUNCH_BATCH:
                    if (moved := self.take_batch(taken, deadline, past)) is None:
                        break  # its next record's work is not done
                    taken, n = taken + moved[0], n + moved[1]
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
                        columns.solo <= 0
                        and taken + 1 < n
                        and (nxt := incoming[taken + 1])[SLOT] == entry[SLOT]
                        and nxt[KIND] < FIRST_HOST_KIND  # not an (shorter) activity entry
                        and nxt[START] is not None
                    ):
                        got = columns.bulk(incoming, taken, n, deadline_set)
                        if got:
                            taken += got
                            continue
                    elif one(tables, tokens, entry):
                        columns.solo -= 1
                        taken += 1
                        continue
                try:
                    done = self.take(entry, deadline)
                except Exception as exc:  # a malformed entry (a plugin's bug), not the user's
                    self.bad_entry(entry, exc)
                    done = True
                if not done:
                    break
                taken += 1
        finally:
            # BaseException (KeyboardInterrupt while waiting) included: what was not taken stays.
            del incoming[:taken]
        return taken

    def take_batch(self, i: int, deadline: float | None, past: bool) -> tuple[int, int] | None:
        """The raw launches of the batch entry at ``incoming[i]`` (``harvest_batch.py``):
        None where its next record's work is not done (and no deadline is set); else how
        many entries were taken (1: the batch, whole) and how many more are pending from
        ``i`` on (its next record, or the whole rest, put before or in its place as ordinary
        entries for the one-by-one route)."""
        incoming = self.incoming
        entry = incoming[i]
        batch = entry[A_RECORD]
        try:
            state = (
                harvest_batch.REST if past else harvest_batch.take(self.columns, entry, deadline)
            )
        except Exception as exc:  # a plugin's bug: the batch is dropped, said once
            self.bad_entry(entry, exc)
            return 1, 0
        if state == harvest_batch.EMPTY:
            return 1, 0
        if state == harvest_batch.NOT_DONE:
            return None
        if state == harvest_batch.ONE:  # its first record to the one-by-one route, before it
            incoming.insert(i, batch.pop_entry())
            return 0, 1
        rest = batch.explode()
        incoming[i : i + 1] = rest
        return 0, len(rest) - 1

    def bad_entry(self, entry: tuple[Any, ...], exc: Exception) -> None:
        """Drop an entry kprof cannot make a row of; warn once per profile."""
        rows = 1
        if entry[KIND] == ENTRY_LAUNCH_BATCH:  # raw launches: each given back and dropped
            slot, start, stop = entry[A_SLOT], None, None
            rows = entry[A_RECORD].drop()
            what = f"a batch of {rows} launches"
        elif entry[KIND] == ENTRY_ACTIVITY_COLUMNS:  # a batch: each of its rows is dropped
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
        backend = self.tables.by_slot.get(slot) if slot is not None else None
        problems = self.problems
        problems.dropped_bad += rows
        take_route.keep_host_side(self.tables, self.tokens, entry)
        if "bad entry" not in problems.warned:
            problems.warned.add("bad entry")
            who = f"backend {backend.name!r} ({backend.plugin_label})" if backend else "kprof"
            warnings.warn(
                f"kprof: {what} from {who} was dropped, as it could not "
                f"be read: {type(exc).__name__}: {exc}",
                RuntimeWarning,
                stacklevel=2,
            )
        if backend is not None and start is not None:
            self.tokens.release(backend, start, stop)

    def take(self, entry: tuple[Any, ...], deadline: float | None) -> bool:
        """Make a row of one entry by the route for anything unusual (``harvest_take``);
        False (and no change) when its work is not done and ``deadline`` is None."""
        kind = entry[KIND]
        if kind == ENTRY_ACTIVITY_COLUMNS:  # a batch: complete rows, never waits
            take_activity_columns(self.delivered, entry)
            return True
        if kind == ENTRY_ACTIVITY:  # one record: complete, never waits
            self.delivered.take_activity(entry)
            return True
        return take_route.take(self.tables, self.tokens, entry, deadline)

    def drop_late(self) -> None:
        """Drop what is pending (after the profile ended), giving its tokens back."""
        incoming = self.incoming
        late = incoming[:]
        del incoming[: len(late)]  # threads may still append: those come back here
        for entry in late:
            if entry[KIND] == ENTRY_LAUNCH_BATCH:  # raw launches: each given back
                self.problems.late_dropped += entry[A_RECORD].drop()
                continue
            if entry[KIND] == ENTRY_ACTIVITY_COLUMNS:  # a batch: its rows, no tokens
                self.problems.late_dropped += len(entry[A_RECORD])
                continue
            self.problems.late_dropped += 2 if with_host(entry) else 1
            slot = entry[SLOT]
            if entry[KIND] != ENTRY_ACTIVITY and slot is not None and entry[START] is not None:
                # It holds tokens.
                self.tokens.release(self.tables.by_slot[slot], entry[START], entry[STOP])

    def end(self, deadline: float | None = None) -> None:
        """Once, holding the lock, after the last entry: device rows placed on the host clock,
        the tables made final, every reference token given back, the user's queues forgotten.
        ``align_clock`` is asked only before ``deadline``."""
        t = self.tables
        try:
            self.clocks.update(
                place(t.table, t.queues, self.tokens.refs, self.problems.hook_failed, deadline)
            )
            for dkey, clock in self.delivered.clocks.items():
                # A device timed both ways (events for ranges, records for kernels) has two.
                self.clocks[dkey if dkey not in self.clocks else f"{dkey} (activity)"] = clock
            # Ranges timed by their work: every record is in, on the host clock.
            names = {slot: b.name for slot, b in t.by_slot.items()}
            work_ranges.derive(t.table, t.queues, t.work_ranges, names)
            t.work_ranges.clear()
            # Final: exactly sized columns (a million records' arrays over-allocate up to 5 MB).
            t.table.trim()
            t.host.trim()
        finally:
            self.tokens.end()
            t.forget_queues()
