"""The route for raw launches kept in C (``ENTRY_LAUNCH_BATCH``: a ``LaunchBatch`` of
``_crecorder``, filled by a plugin's C through ``native.raw_launch_capsule()``).

A batch's records are made rows column-wise from its first, their times read and their tokens
given back by the batch itself (the plugin's ``KprofRawOps``), up to the first record whose
work is not done, or that needs what only the one-by-one route does: a queue, device, thread,
name or configuration not known yet, a failed command, a value kprof cannot keep, a wait for
its work at the end. That record becomes an ordinary entry before the batch (``pop_entry``),
which the harvest takes as it takes any, so every unusual case behaves as it does for a launch
the Python path made; then the batch goes on column-wise. Where nothing more may be asked of
the device (past the deadline) or its backend cannot be read so, the whole rest becomes
ordinary entries in its place (``explode``).
"""

from __future__ import annotations

from array import array
from typing import TYPE_CHECKING, Any

from kprof_core import _clock
from kprof_core.low_level.layout import A_RECORD, A_SLOT, RAW_NOT_DONE

if TYPE_CHECKING:
    from kprof_core.recording.harvest_columns import Columns

#: What ``take`` says of the batch: every record taken and the batch closed (its entry may
#: go), its next record's work not done yet (no deadline: the harvest stops there), its next
#: record is the one-by-one route's (``ONE``), or the whole rest is (``REST``).
EMPTY, NOT_DONE, ONE, REST = 0, 1, 2, 3

_WINDOW = 4096  # records per columns() call: bounds the columns' memory
_DEADLINE_WINDOW = 512  # the same between two reads of the clock, once a deadline is set


def take(columns: Columns, entry: tuple[Any, ...], deadline: float | None) -> int:
    """Rows of the batch's complete common records, from its first; what stopped it."""
    batch, slot = entry[A_RECORD], entry[A_SLOT]
    t, tokens = columns.tables, columns.tokens
    backend = t.by_slot.get(slot)
    # Placed by device time only (a backend placed by elapsed times has no raw launches).
    if backend is None or backend.broken is not None or not backend.has_device_times:
        return REST
    window = _WINDOW if deadline is None else _DEADLINE_WINDOW
    configs = t.configs.ids_for(slot)
    while True:
        if deadline is not None and _clock.monotonic() >= deadline:
            return REST  # nothing more is asked of the device: the one-by-one route says so
        k, why, *raw = batch.columns(
            t.fast_queues, t.thread_ids, t.names.index, configs, tokens.ref_begin, backend, window
        )
        if k:
            cols = [array("q", b) for b in raw]
            ends = cols.pop()
            begins = cols.pop()
            got = columns.add_rows(cols, begins, ends)
            batch.consume(got)
            if got < k:
                return ONE  # a value kprof cannot keep: the one-by-one route reports it
        if why == RAW_NOT_DONE and deadline is None:
            return NOT_DONE
        if why:  # not known yet, failed, or to be waited for (a deadline is set)
            return ONE
        if k == window:
            continue
        if batch.close() == 0:  # nothing came in since: the entry may go
            batch.retire()
            return EMPTY
        # Records came in meanwhile: taken on the next turn (new ones go to a new batch).
