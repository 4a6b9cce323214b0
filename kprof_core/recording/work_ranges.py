"""The device side of ranges on a backend that reports its work itself (activity records,
CUPTI): no timestamps are put for them; a range's device row on each queue spans the work
launched inside it there, from the first record's start to the last one's end.

The range path appends an ``ENTRY_WORK_RANGE`` entry per such backend (``layout.py``); the
harvest keeps it as a ``WorkRange`` in ``Tables.work_ranges``, and at the profile's end, once
every record was delivered and placed on the host clock, ``derive`` turns each into rows. Work belongs to a range when
it was launched on the range's thread between the range's host start and end (a nested
range's work included), as the summary's range times count it (``data/tree.range_instances``).
A range without work gets no device row.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from itertools import compress, pairwise
from operator import add, eq, ne
from typing import TYPE_CHECKING

from kprof_core.data.records import APPROXIMATE, HOST_TIMED, PLACED, RANGE, UNRESOLVED

if TYPE_CHECKING:
    from kprof_core.data.records import DeviceTable, QueueRecord

#: The flags of the work a range's row inherits: how its times were taken.
_INHERITED = APPROXIMATE | HOST_TIMED


#: One range on one backend, waiting for its work's records: ``(slot, name, thread, h0, h1,
#: nbytes, flops, site)``: the backend's slot, the name's and thread's ids in the tables, the
#: range's host start and end, what the user said of its work (-1: not said), its site. A plain
#: tuple: the harvest makes one per range.
WorkRange = tuple[int, int, int, int, int, int, int, int]


def derive(
    table: DeviceTable, queues: list[QueueRecord], ranges: list[WorkRange], names: dict[int, str]
) -> int:
    """Append the device rows of ``ranges`` to ``table``, from the resolved work rows already
    there (placed on the host clock; ``queues``: the table's queue ids; ``names``: backend
    slot -> name); how many rows were appended."""
    if not ranges:
        return 0
    n = len(table)
    added = 0
    queue_backend = [q.backend for q in queues]
    # Work rows (kernels and copies with a time), per (backend, thread), by launch start.
    usable = list(
        map(
            bool.__and__,
            map(ne, table.kind, [RANGE] * n),
            map(eq, map(int.__and__, table.flags, [UNRESOLVED] * n), [0] * n),
        )
    )
    work: dict[tuple[str, int], tuple[array[int], list[int]]] = {}
    for i in compress(range(n), usable):
        key = (queue_backend[table.queue[i]], table.thread[i])
        got = work.get(key)
        if got is None:
            got = work[key] = (array("q"), [])
        got[0].append(table.launch_start[i])
        got[1].append(i)
    for key, (starts, rows) in work.items():
        if any(a > b for a, b in pairwise(starts)):
            order = sorted(range(len(rows)), key=starts.__getitem__)
            work[key] = (array("q", [starts[j] for j in order]), [rows[j] for j in order])
    start, end = table.start, list(map(add, table.start, table.duration))
    for slot, name, thread, h0, h1, nbytes, flops, site in ranges:
        got = work.get((names.get(slot, ""), thread))
        if got is None:
            continue
        starts, rows = got
        lo, hi = bisect_left(starts, h0), bisect_right(starts, h1)
        if lo == hi:
            continue
        inside = rows[lo:hi]
        for qid in dict.fromkeys(table.queue[i] for i in inside):
            mine = [i for i in inside if table.queue[i] == qid]
            first = min(start[i] for i in mine)
            flags = PLACED
            for i in mine:
                flags |= table.flags[i] & _INHERITED
            table.append(
                name,
                RANGE,
                qid,
                thread,
                h0,
                h1,
                first,
                max(end[i] for i in mine) - first,
                nbytes,
                flags,
                site,
                -1,
                flops,
            )
            added += 1
    return added


__all__ = ["WorkRange", "derive"]
