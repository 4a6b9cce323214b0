"""The harvest's column-wise route: a run of common entries (timed launches of one healthy
backend on known queues, threads and names, their work done) made into rows column by column,
the loop per record in C (``map``, ``zip``, ``array``, or ``_crecorder.run_columns``).
"""

from __future__ import annotations

from array import array
from functools import partial
from itertools import compress, repeat, takewhile
from operator import add, itemgetter, sub
from typing import TYPE_CHECKING, Any

from kprof_core.data.records import HostTable
from kprof_core.data.values import IN_LIMIT_TOP_BYTES, NON_NEGATIVE_TOP_BYTES, VALUE_LIMIT
from kprof_core.host.backend import Backend
from kprof_core.low_level.layout import (
    FIRST_HOST_KIND,
    FQ_BACKEND,
    FQ_DEVICE_KEY,
    FQ_QID,
    KIND,
    SLOT,
    WITH_HOST,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from kprof_core.recording.tables import Tables
    from kprof_core.recording.tokens import Tokens


_SLOT = itemgetter(SLOT)
_SHORT_RUN = 16  # runs shorter than this are cheaper entry by entry (see harvest_locked)
_DEADLINE_WINDOW = 512  # at most this many entries in one batch call once a deadline is set
_QID = itemgetter(FQ_QID)
_KIND = itemgetter(KIND)


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


class Columns:
    """The column-wise route, with the window it adapts to the runs it meets."""

    def __init__(self, tables: Tables, tokens: Tokens, compiled: Any) -> None:
        self.tables = tables
        self.tokens = tokens
        # The compiled recorder's harvest helpers (kprof_core.low_level._crecorder), or None.
        self.compiled = compiled
        self.window = 64  # entries the column-wise harvest looks at in one go (adaptive)
        self.solo = 0  # entries to take one by one before trying column-wise again

    def bulk(self, incoming: list[tuple[Any, ...]], i: int, n: int, deadline_set: bool) -> int:
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
        backend = self.tables.by_slot.get(slot)
        if backend is None or backend.broken is not None:
            return 0
        w = min(n - i, self.window)
        if deadline_set:
            # Between two reads of the clock: one batch call, or at most 8 questions per hook
            # (each may be slow), as entry by entry.
            w = min(w, _DEADLINE_WINDOW if backend.has_batch_times else 8)
        chunk = incoming[i : i + w]
        try:
            got, run = self.bulk_rows(backend, slot, chunk)
        except Exception:  # _take asks again, entry by entry, and reports what failed
            got = run = 0
        # Adapt the window to the runs seen (`run`: the entries of the run, done or not): long
        # when launches come in long runs, short when they alternate with ranges (slicing a
        # long window for a run of one costs O(window)); work not done yet says nothing.
        self.window = min(4096, w * 2) if run == w else max(16, run * 2)
        if 0 < run < min(w, _SHORT_RUN):  # other entries broke it early: one by one a while
            self.solo = 4 * _SHORT_RUN
        return got

    def bulk_rows(
        self, backend: Backend, slot: int, chunk: list[tuple[Any, ...]]
    ) -> tuple[int, int]:
        """Rows of the longest run of common entries at the start of ``chunk`` whose work is
        done; returns how many, and how long the run of common entries was, done or not (the
        table is untouched when it returns 0 rows)."""
        t, tokens = self.tables, self.tokens
        refs = tokens.refs
        absolute = backend.has_device_times  # placed by device time, else by elapsed time
        # What a device needs before its launches can go here: its reference token (set by
        # _take for the first launch seen there) and, for absolute clocks, its begin time.
        known: dict[str, Any] = tokens.ref_begin if absolute else refs
        mod = self.compiled
        if mod is not None:
            m, starts, stops, *raw = mod.run_columns(
                chunk,
                slot,
                backend,
                t.fast_queues,
                t.thread_ids,
                t.names.index,
                t.configs.ids_for(slot),
                known,
                FIRST_HOST_KIND,
            )
            cols = [array("q", b) for b in raw]
        else:
            m, starts, stops, cols = run_columns(t, chunk, slot, backend, known)
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
                ref_tok = {qid: refs[t.queues[qid].device_key][1] for qid in set(qcol[:k])}
                to_stop = list(map(el, map(ref_tok.__getitem__, qcol[:k]), stops))
                if k and (set(map(type, durs)) != {int} or set(map(type, to_stop)) != {int}):
                    return 0, m
                ends = array("q", to_stop)
                begins = array("q", map(sub, to_stop, durs))
        if not k:
            return 0, m
        k = self.add_rows(cols, begins, ends)
        if not k:
            return 0, m
        if backend.pools_tokens:
            for start, stop in zip(starts[:k], stops[:k]):
                tokens.release(backend, start, stop)
        return k, m

    def add_rows(self, cols: list[array[int]], begins: array[int], ends: array[int]) -> int:
        """Append the rows of a run whose device times are read: ``cols`` the 13 columns
        ``run_columns`` makes, ``begins`` and ``ends`` (as long as the rows to append, at most
        as long as ``cols``) the device's. Only the rows up to the first value kprof cannot
        keep; returns how many (0: let the one-by-one route have the first)."""
        t = self.tables
        k = len(begins)
        mod = self.compiled
        (
            names,
            kinds,
            queues,
            threads,
            h0s,
            h1s,
            nbytes,
            flags,
            sites,
            configs,
            flops,
            refb,
            host,
        ) = cols
        # start: relative to the first work seen on the device (refb: when it began; 0 for
        # elapsed-time backends, whose begins are already relative to it). Only the rows up to
        # the first value kprof cannot keep (harvest_take.bad_times says which): that row goes
        # to _take, which makes it unresolved with the reason.
        if mod is not None:
            k, rel_b, dur_b = mod.checked_rel_dur(
                begins.tobytes(),
                ends.tobytes(),
                refb.tobytes(),
                h0s.tobytes(),
                h1s.tobytes(),
                nbytes.tobytes(),
                VALUE_LIMIT,
            )
            rel, dur = array("q", rel_b), array("q", dur_b)
        else:
            k, rel, dur = checked_rel_dur(begins, ends, refb, h0s, h1s, nbytes)
        if not k:
            return 0
        if k < len(names):
            names, kinds, queues, threads = names[:k], kinds[:k], queues[:k], threads[:k]
            h0s, h1s, nbytes, flags = h0s[:k], h1s[:k], nbytes[:k], flags[:k]
            sites, configs, flops = sites[:k], configs[:k], flops[:k]
        table = t.table
        table.name.extend(names)
        table.kind.extend(kinds)
        table.queue.extend(queues)
        table.thread.extend(threads)
        table.launch_start.extend(h0s)
        table.launch_end.extend(h1s)
        table.start.extend(rel)
        table.duration.extend(dur)
        table.nbytes.extend(nbytes)
        table.flags.extend(flags)
        table.site.extend(sites)
        table.config.extend(configs)
        table.flops.extend(flops)
        if host[:k].count(0) != k:
            # Ranges' host sides (WITH_HOST): their host rows, in the same order.
            sel = host[:k]
            ht = t.host
            ht.name.extend(compress(names, sel))
            ht.thread.extend(compress(threads, sel))
            ht.start.extend(compress(h0s, sel))
            ht.end.extend(compress(h1s, sel))
            ht.site.extend(compress(sites, sel))
            ht.kind.extend(array("q", (HostTable.RANGE,)) * (k - sel.count(0)))
        return k


def _first_bad(col: array[int], top_bytes: bytes) -> int:
    """The index of the first value of ``col`` whose top byte is not in ``top_bytes``, or
    ``len(col)`` (at memory speed: the top bytes mapped to 0 or 1, then one find)."""
    marks = col.tobytes()[7::8].translate(_BAD_TOP[top_bytes])
    i = marks.find(1)
    return len(col) if i < 0 else i


_BAD_TOP = {
    tb: bytes(0 if b in tb else 1 for b in range(256))
    for tb in (IN_LIMIT_TOP_BYTES, NON_NEGATIVE_TOP_BYTES)
}


def checked_rel_dur(
    begins: array[int],
    ends: array[int],
    refb: array[int],
    h0s: array[int],
    h1s: array[int],
    nbytes: array[int],
) -> tuple[int, array[int], array[int]]:
    """The rows kprof keeps, up to the first it does not, with their place on the device and
    duration: ``(k, begins - refb, ends - begins)``; the twin of ``_crecorder.checked_rel_dur``
    (the same check as ``harvest_take.bad_times``, over columns)."""
    k = len(begins)
    k = min(
        k,
        *(_first_bad(c[:k], IN_LIMIT_TOP_BYTES) for c in (begins, ends, refb, h0s, h1s)),
        _first_bad(array("q", map(add, nbytes[:k], repeat(1, k))), NON_NEGATIVE_TOP_BYTES),
    )
    # Every value is within ±2**59 now: no difference leaves int64.
    rel = array("q", map(sub, begins[:k], refb[:k]))
    dur = array("q", map(sub, ends[:k], begins[:k]))
    k = min(
        k,
        _first_bad(rel, IN_LIMIT_TOP_BYTES),
        _first_bad(dur, NON_NEGATIVE_TOP_BYTES),
        _first_bad(array("q", map(sub, h1s[:k], h0s[:k])), NON_NEGATIVE_TOP_BYTES),
    )
    return k, rel[:k], dur[:k]


def run_columns(
    t: Tables, chunk: list[tuple[Any, ...]], slot: int, backend: Backend, known: dict[str, Any]
) -> tuple[int, Any, Any, list[array[int]]]:
    """The bookkeeping of a run, in Python (``_crecorder.run_columns`` in C): the longest
    prefix of ``chunk`` of timed launches of ``backend`` on known queues of a device in
    ``known``, by known threads, with known names; ``(m, starts, stops, columns)`` with the
    columns name, kind, queue id, thread id, h0, h1, nbytes, flags, site, config id, flops, the
    reference's begin time (0 where ``known`` holds no int) and 1 where the entry carries its
    range's host side (``WITH_HOST``; its flags 0), else 0."""
    m = len(chunk)
    slots = list(map(_SLOT, chunk))
    if slots.count(slot) != m:
        m = next(j for j, s in enumerate(slots) if s != slot)
    if not m:
        return 0, (), (), []
    # Host and activity entries end the run (activity entries are shorter: cut before zip).
    entry_kinds = list(map(_KIND, chunk[:m]))
    if max(entry_kinds) >= FIRST_HOST_KIND:
        m = next(j for j, k in enumerate(entry_kinds) if k >= FIRST_HOST_KIND)
        if not m:
            return 0, (), (), []
    _s, kinds, names, qks, whos, h0s, h1s, starts, stops, nbytes, flags, sites, cfgs, flops = zip(
        *chunk[:m]
    )
    if None in starts:  # host-timed (a queue without profiling)
        m = starts.index(None)
    host = array("q", (0,)) * m
    if any(flags[:m]):  # flagged (approximate: observed on the host): _take's
        m = next((j for j, f in enumerate(flags[:m]) if f and f != WITH_HOST), m)
        host = array("q", map(WITH_HOST.__eq__, flags[:m]))  # a range's host side too
    # Most runs have one queue, one thread and one name: one lookup each, not one a row.
    qs, m = _looked_up(t.fast_queues, qks, m)
    tids, m = _looked_up(t.thread_ids, whos, m)
    nids, m = _looked_up(t.names.index, names, m)
    try:
        cids, m = _looked_up(t.configs.ids_for(slot), cfgs, m)
    except TypeError:  # an unhashable configuration: _take keeps its repr
        return 0, (), (), []
    qs = qs[:m]
    for q in set(qs):
        if q[FQ_BACKEND] is not backend or q[FQ_DEVICE_KEY] not in known:  # a new device
            m = min(m, qs.index(q))
    if not m:
        return 0, (), (), []
    qs = qs[:m]
    refb = {q: (ref if type(ref := known[q[FQ_DEVICE_KEY]]) is int else 0) for q in set(qs)}
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
            array("q", sites[:m]),
            _column(cids, m),
            array("q", flops[:m]),
            _column(list(map(refb.__getitem__, qs)), m),
            host[:m],
        ]
    except (TypeError, OverflowError):  # a field that is not an int: _take reports it
        return 0, (), (), []
    return m, starts[:m], stops[:m], cols
