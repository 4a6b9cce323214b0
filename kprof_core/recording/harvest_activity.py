"""The harvest's route for activity rows delivered column-wise (``ActivityColumns``, from
``recording/activity.py``'s ``deliver_columns``): a whole batch appended to the table column
by column, its per-row work in C loops (``map``, ``array``)."""

from __future__ import annotations

from array import array
from itertools import repeat
from operator import add, sub
from typing import TYPE_CHECKING, Any

from kprof_core.data.records import PLACED
from kprof_core.low_level.layout import A_RECORD, A_SLOT, A_WHO
from kprof_core.recording.harvest_delivered import activity_offset

if TYPE_CHECKING:
    from kprof_core.recording.harvest import Harvest

__all__ = ["mapped", "take_activity_columns"]


def mapped(table: dict[int, int], col: array[int], n: int) -> array[int]:
    """``table[v]`` for each v of ``col``: one value repeated when the table has one (a batch
    on one queue, of one scope), else a lookup per row (in C, ``map``)."""
    if len(table) == 1:
        return array("q", table.values()) * n
    return array("q", map(table.__getitem__, col))


def take_activity_columns(h: Harvest, entry: tuple[Any, ...]) -> None:
    """Rows of a batch delivered column-wise (``ActivityColumns``): the per-row work is
    mapping the batch's name, queue and scope indices to the profile's, and adding each
    device's clock offset, all in C loops (``map``, ``array``)."""
    backend = h.by_slot[entry[A_SLOT]]
    cols, whos = entry[A_RECORD], entry[A_WHO]
    n = len(cols)
    if not n:
        return
    # Only the names and queues its rows use (the lists may be the backend's whole tables).
    qids: dict[int, int] = {}
    offsets: dict[int, int] = {}
    for j in sorted(set(cols.queue)):
        q = cols.queues[j]
        qids[j] = qid = h.queue_id(backend, q)
        dkey = h.queues[qid].device_key
        off = h.offsets.get(dkey)
        if off is None:
            i = cols.queue.index(j)
            off = activity_offset(h, backend, q, qid, dkey, cols.begin[i], cols.launch_begin[i])
        offsets[j] = off
    nids = {j: h.names(cols.names[j]) for j in set(cols.name)}
    tids = {scope: h.thread_id(who) for scope, who in whos.items()}
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
    t = h.table
    first = len(t)
    t.name.extend(mapped(nids, cols.name, n))
    t.kind.extend(cols.kind)
    t.queue.extend(mapped(qids, cols.queue, n))
    t.thread.extend(mapped(tids, cols.scope, n))
    t.launch_start.extend(h0)
    t.launch_end.extend(h1)
    t.start.extend(start)
    t.duration.extend(array("q", map(sub, cols.end, cols.begin)))
    t.nbytes.extend(cols.nbytes)
    t.flags.extend(array("q", (PLACED,)) * n)
    t.site.extend(array("q", (-1,)) * n)  # the launch's site is not joined yet
    if cols.detail is not None:
        fmt, columns = cols.detail
        h.details.add_block(first, n, fmt, tuple(columns))
