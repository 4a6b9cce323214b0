"""The harvest's one-by-one route: a common entry that came alone or in a short run (launches
between ranges), made into a row as the column-wise route would, without its fixed cost.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kprof_core.data.records import HostTable
from kprof_core.data.values import launch_problem, time_problem
from kprof_core.low_level.layout import (
    FIRST_HOST_KIND,
    FQ_BACKEND,
    FQ_DEVICE_KEY,
    FQ_QID,
    WITH_HOST,
)

if TYPE_CHECKING:
    from kprof_core.recording.tables import Tables
    from kprof_core.recording.tokens import Tokens


def one(t: Tables, k: Tokens, entry: tuple[Any, ...]) -> bool:
    """Make a row of one common entry (as ``_bulk`` would, for a run of one); False, with
    nothing changed, for anything else (``_take`` then handles it)."""
    slot, kind, name, qk, who, h0, h1, start, stop, nbytes, flags, site, config, flops = entry
    q = t.fast_queues.get(qk)
    if (
        q is None
        or (backend := q[FQ_BACKEND]).slot != slot
        or backend.broken is not None
        or (flags and flags != WITH_HOST)
        or type(site) is not int
        or type(flops) is not int
        or type(kind) is not int
        or kind >= FIRST_HOST_KIND
    ):
        return False
    tid = t.thread_ids.get(who)
    nid = t.names.index.get(name) if type(name) is str else None
    try:
        cfg = t.configs.ids_for(slot).get(config)  # not interned yet: _take interns it
    except TypeError:
        cfg = None
    dkey = q[FQ_DEVICE_KEY]
    ref = k.refs.get(dkey)
    if tid is None or nid is None or cfg is None or ref is None:
        return False
    try:
        if not backend.timestamp_done(backend, stop):
            return False
        if backend.has_device_times:
            pair = backend.device_times(backend, start, stop)
            if type(pair) is not tuple or len(pair) != 2:
                return False
            begin, end = pair
            rel = begin - k.ref_begin[dkey]
        else:
            dur = backend.elapsed_time(backend, start, stop)
            end = backend.elapsed_time(backend, ref[1], stop)
            begin = rel = end - dur
        if (
            type(begin) is not int
            or type(end) is not int
            or type(flags) is not int
            or launch_problem(h0, h1, nbytes)
            or time_problem("", begin, end, rel) is not None
        ):
            return False  # _take makes it unresolved, with the reason
        dur = end - begin
    except Exception:
        return False  # _take asks again and reports the failure properly
    t.table.append(nid, kind, q[FQ_QID], tid, h0, h1, rel, dur, nbytes, 0, site, cfg, flops)
    if flags:  # WITH_HOST: the range's host side, on the same thread, interval and site
        t.host.append(nid, HostTable.RANGE, tid, h0, h1, site)
    if backend.pools_tokens:
        k.release(backend, start, stop)
    return True
