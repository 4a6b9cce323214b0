"""The harvest's route for activity rows delivered column-wise (``ActivityColumns``, from
``recording/activity.py``'s ``deliver_columns``): a whole batch appended to the table column
by column, its per-row work in C loops (``map``, ``array``). A batch with a row whose values
are not sane (found column-wise too, at memory speed) is taken row by row instead, by the
rule for a ``DeviceRecord`` (``harvest_delivered.take_row``): that row unresolved with the
reason, the others as they are."""

from __future__ import annotations

from array import array
from itertools import repeat
from operator import add, sub
from typing import TYPE_CHECKING, Any

from kprof_core.data.records import COPY, KERNEL, PLACED, QueueRecord
from kprof_core.data.values import byte_counts, name_of, small_values, within_limit
from kprof_core.host.backend import QueueInfo
from kprof_core.low_level.layout import A_RECORD, A_SLOT, A_WHO
from kprof_core.recording.configs import TEXT, Configs
from kprof_core.recording.sites import raw_sites

if TYPE_CHECKING:
    from kprof_core.host.backend import Backend
    from kprof_core.recording.activity_columns import ActivityColumns
    from kprof_core.recording.harvest_delivered import Delivered

__all__ = ["mapped", "take_activity_columns"]


def mapped(table: dict[int, int], col: array[int], n: int) -> array[int]:
    """``table[v]`` for each v of ``col``: one value repeated when the table has one (a batch
    on one queue, of one scope), else a lookup per row (in C, ``map``)."""
    if len(table) == 1:
        return array("q", table.values()) * n
    return array("q", map(table.__getitem__, col))


def take_activity_columns(d: Delivered, entry: tuple[Any, ...]) -> None:
    """Rows of a batch delivered column-wise (``ActivityColumns``): the per-row work is
    mapping the batch's name, queue and scope indices to the profile's, and adding each
    device's clock offset, all in C loops (``map``, ``array``). Rows are checked as a
    ``DeviceRecord`` is; a batch with a row that fails is taken row by row."""
    t = d.tables
    backend = t.by_slot[entry[A_SLOT]]
    cols, whos = entry[A_RECORD], entry[A_WHO]
    n = len(cols)
    if not n:
        return
    sane = sane_columns(cols, n)
    if sane is None:
        row_by_row(d, backend, cols, whos)
        return
    duration, names_used, queues_used = sane
    # Only the names and queues its rows use (the lists may be the backend's whole tables).
    qids: dict[int, int] = {}
    offsets: dict[int, int] = {}
    for j in sorted(queues_used):
        q = cols.queues[j]
        qids[j] = qid = t.queue_id(backend, q)
        dkey = t.queues[qid].device_key
        off = d.offsets.get(dkey)
        if off is None:
            i = cols.queue.index(j)
            off = d.activity_offset(backend, q, qid, dkey, cols.begin[i], cols.launch_begin[i])
        offsets[j] = off
    nids = {j: t.names(name_of(cols.names[j])) for j in names_used}
    tids = {scope: t.thread_id(who) for scope, who in whos.items()}
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
    if not (
        within_limit(start.tobytes()) and within_limit(h0.tobytes()) and within_limit(h1.tobytes())
    ):  # placed beyond what a file holds (a far clock offset): the rule per row says which
        row_by_row(d, backend, cols, whos)
        return
    table = t.table
    first = len(table)
    table.name.extend(mapped(nids, cols.name, n))
    table.kind.extend(cols.kind)
    table.queue.extend(mapped(qids, cols.queue, n))
    table.thread.extend(mapped(tids, cols.scope, n))
    table.launch_start.extend(h0)
    table.launch_end.extend(h1)
    table.start.extend(start)
    table.duration.extend(duration)
    table.nbytes.extend(cols.nbytes)
    table.flags.extend(array("q", (PLACED,)) * n)
    table.site.extend(array("q", (-1,)) * n if cols.site is None else raw_sites(cols.site))
    table.config.extend(config_ids(t.configs, cols, n))
    table.flops.extend(array("q", (-1,)) * n)
    if cols.detail is not None:
        fmt, columns = cols.detail
        t.details.add_block(first, n, fmt, tuple(columns))


class _Texts(dict[tuple[int, ...], int]):
    """A batch's configurations (tuples of its config columns' values) -> ids: each
    distinct one formatted once, as it is first met."""

    def __init__(self, configs: Configs, fmt: str) -> None:
        super().__init__()
        self.configs, self.fmt = configs, fmt

    def __missing__(self, key: tuple[int, ...]) -> int:
        i = self[key] = self.configs.intern(TEXT, self.fmt.format(*key))
        return i


def config_ids(configs: Configs, cols: ActivityColumns, n: int) -> array[int]:
    """The batch's config column: -1 without ``config`` and for copies, else one lookup per
    row (in C)."""
    if cols.config is None:
        return array("q", (-1,)) * n
    fmt, columns = cols.config
    texts = _Texts(configs, fmt)
    if COPY not in cols.kind:
        return array("q", map(texts.__getitem__, zip(*columns)))
    # A copy has no launch configuration (nor is its columns' text made).
    return array("q", [-1 if k == COPY else texts[c] for k, c in zip(cols.kind, zip(*columns))])


def sane_columns(cols: ActivityColumns, n: int) -> tuple[array[int], set[int], set[int]] | None:
    """The batch's durations and the name and queue indexes it uses, when every row's values
    are sane (what ``take_row`` checks, and indexes within ``names`` and ``queues``, a kind
    kprof knows), else None. Column-wise: bounds on their bytes, counts, sets: no loop in
    Python (about 5 % of the time the batch takes)."""
    columns = (cols.kind, cols.name, cols.queue, cols.begin, cols.end, cols.nbytes)
    times = (cols.begin, cols.end, cols.launch_begin, cols.launch_end)
    more = (*(cols.detail[1] if cols.detail is not None else ()),)
    more += (*(cols.config[1] if cols.config is not None else ()),)
    if any(type(c) is not array or len(c) != n for c in (*columns, *times[2:], *more)):
        # Changed after deliver_columns checked it: nothing of it can be trusted.
        raise ValueError("an ActivityColumns batch whose columns changed after its delivery")
    names, queues = set(cols.name), set(cols.queue)
    if (
        min(names) < 0
        or max(names) >= len(cols.names)
        or min(queues) < 0
        or max(queues) >= len(cols.queues)
        or not small_values(cols.kind, bytes((KERNEL, COPY)))
        or not all(within_limit(c.tobytes()) for c in times)
        or not byte_counts(cols.nbytes)
    ):
        return None
    duration = array("q", map(sub, cols.end, cols.begin))  # no overflow: within ±2**59
    if not within_limit(duration.tobytes(), non_negative=True):
        return None
    return duration, names, queues


def row_by_row(d: Delivered, backend: Backend, cols: ActivityColumns, whos: dict[int, Any]) -> None:
    """A batch with a row kprof cannot keep as it is: each row by the rule for a
    ``DeviceRecord`` (``take_row``), so both ways of delivering give the same rows; an index
    past ``names`` or ``queues`` makes its row unresolved too."""
    nn, nq = len(cols.names), len(cols.queues)
    fmt, more = cols.detail if cols.detail is not None else (None, [])
    cfmt, ccols = cols.config if cols.config is not None else (None, [])
    unknown_queue: int | None = None
    for i in range(len(cols)):
        j, k = cols.name[i], cols.queue[i]
        error = qid = None
        queue = None
        if 0 <= k < nq:
            queue = cols.queues[k]
        else:
            error = (
                f"the plugin handed a queue index {k} for a batch of {nq} queues (a plugin's "
                f"bug: the record is kept without a time)"
            )
            if unknown_queue is None:
                # What a queue is called when its plugin cannot say (``Tables.queue_id``);
                # the plugin is not asked about a queue it never named.
                info = QueueInfo(device=backend.name, label="queue")
                unknown_queue = d.tables.intern_queue(
                    QueueRecord(
                        backend.name, info.device, info.label, f"{backend.name}:{info.key()}"
                    )
                )
            qid = unknown_queue
        if not 0 <= j < nn:
            error = error or (
                f"the plugin handed a name index {j} for a batch of {nn} names (a plugin's "
                f"bug: the record is kept without a time)"
            )
        d.take_row(
            backend,
            queue,
            whos[cols.scope[i]],
            name_of(cols.names[j]) if 0 <= j < nn else "?",
            cols.kind[i],
            cols.begin[i],
            cols.end[i],
            cols.nbytes[i],
            cols.launch_begin[i],
            cols.launch_end[i],
            None if fmt is None else fmt.format(*(c[i] for c in more)),
            error,
            qid,
            None if cfmt is None or cols.kind[i] == COPY else cfmt.format(*(c[i] for c in ccols)),
            -1 if cols.site is None else cols.site[i],
        )
