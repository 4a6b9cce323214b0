"""The harvest's route for everything unusual: host-timed and approximate entries, a new
queue or device, work not done (waited for, up to the deadline), a hook failing; what
goes wrong is reported here and the entry becomes an unresolved row, never lost.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kprof_core import _clock
from kprof_core.data.records import (
    APPROXIMATE,
    HOST_TIMED,
    KERNEL,
    PLACED,
    UNRESOLVED,
    HostTable,
)
from kprof_core.data.values import VALUE_LIMIT, bad_value, is_time, name_of, time_problem
from kprof_core.host.backend import BadReturn, NeverSubmitted
from kprof_core.low_level.layout import (
    ENTRY_ANNOTATE,
    ENTRY_HOST_LAUNCH,
    ENTRY_HOST_RANGE,
    ENTRY_MARK,
    ENTRY_WORK_RANGE,
    FLAGS,
    FLOPS,
    H0,
    H1,
    KIND,
    NAME,
    NBYTES,
    SITE,
    SLOT,
    WHO,
    WITH_HOST,
    host_entry,
    with_host,
)
from kprof_core.recording.tokens import device_times, elapsed

if TYPE_CHECKING:
    from kprof_core.recording.tables import Tables
    from kprof_core.recording.tokens import Tokens
    from kprof_core.recording.work_ranges import WorkRange


# Host-only entries travel through the same list as launches, tagged with their entry kinds.
HOST_KINDS = {
    ENTRY_HOST_RANGE: HostTable.RANGE,
    ENTRY_MARK: HostTable.MARK,
    ENTRY_HOST_LAUNCH: HostTable.LAUNCH,
}


def take(t: Tables, k: Tokens, entry: tuple[Any, ...], deadline: float | None) -> bool:
    """Make a row of one entry of the pending format; False (and no change) when its work
    is not done and we may not wait (``deadline`` is None)."""
    if entry[KIND] == ENTRY_ANNOTATE:
        annotate(t, entry)
        return True
    if entry[KIND] == ENTRY_WORK_RANGE:
        return work_range(t, k, entry)
    flags = entry[FLAGS]
    if type(flags) is int and flags & WITH_HOST and entry[KIND] not in HOST_KINDS:
        # A range's device entry carrying its host side: the device row, then the host one.
        if not take(t, k, (*entry[:FLAGS], flags & ~WITH_HOST, *entry[FLAGS + 1 :]), deadline):
            return False
        return take(t, k, host_entry(ENTRY_HOST_RANGE, *_host_side(entry)), deadline)
    return take_device(t, k, entry, deadline)


def work_range(t: Tables, k: Tokens, entry: tuple[Any, ...]) -> bool:
    """A range whose device side is its work's (``ENTRY_WORK_RANGE``): kept for the end
    (``work_ranges.derive``), its host range made a row now where it carries it. The route
    for one the harvest's fast path did not take (its values checked here)."""
    backend, _kind, name, _queue, who, h0, h1, _start, _stop, nbytes, flags, site, _c, flops = (
        t.decode(entry)
    )
    if is_time(h0) and is_time(h1) and h0 <= h1:  # kprof's own values: never, but never lost
        kept: WorkRange = (
            backend.slot,
            t.names(name_of(name)),
            t.thread_id(who),
            h0,
            h1,
            nbytes if type(nbytes) is int and -1 <= nbytes < VALUE_LIMIT else -1,
            flops if type(flops) is int and -1 <= flops < VALUE_LIMIT else -1,
            site if type(site) is int and -1 <= site < VALUE_LIMIT else -1,
        )
        t.work_ranges.append(kept)
    if type(flags) is int and flags & WITH_HOST:
        return take(t, k, host_entry(ENTRY_HOST_RANGE, *_host_side(entry)), None)
    return True


def keep_host_side(t: Tables, k: Tokens, entry: tuple[Any, ...]) -> None:
    """A malformed entry dropped (``Harvest.bad_entry``): its range's host side, kprof's own,
    is kept where it can be read."""
    try:
        if with_host(entry):
            take(t, k, host_entry(ENTRY_HOST_RANGE, *_host_side(entry)), None)
    except Exception:
        t.problems.dropped_bad += 1


def _host_side(entry: tuple[Any, ...]) -> tuple[Any, ...]:
    """A ``WITH_HOST`` entry's host range: name, thread, start, end, site."""
    return entry[NAME], entry[WHO], entry[H0], entry[H1], entry[SITE]


def take_device(t: Tables, k: Tokens, entry: tuple[Any, ...], deadline: float | None) -> bool:
    """``take`` for an entry of the pending format (a device or host entry)."""
    backend, kind, name, queue, who, h0, h1, start, stop, nbytes, flags, site, config, flops = (
        t.decode(entry)
    )
    if type(flops) is not int or not -1 <= flops < VALUE_LIMIT:
        flops = -1  # kprof's own (checked where the user gave it): never, but never lost
    name = name_of(name)
    cfg = -1 if config is None else t.configs.intern(entry[SLOT], config)
    if type(site) is not int or not -1 <= site < VALUE_LIMIT:
        site = -1  # kprof's own: never, but a row is never lost for it
    if kind in HOST_KINDS:
        if not (is_time(h0) and is_time(h1)):  # kprof's own clock: never, but never lost
            h0 = h1 = t.start_ns
        t.host.append(t.names(name), HOST_KINDS[kind], t.thread_id(who), h0, h1, site)
        return True
    error = None
    if not (is_time(h0) and is_time(h1)) or h1 < h0:
        # The plugin's launch window: kept only if it is one, else the profile's start.
        error = bad_value("the launch's host times", (h0, h1))
        h0 = h1 = t.start_ns
    if type(nbytes) is not int or not -1 <= nbytes < VALUE_LIMIT:
        error = error or bad_value("the byte count", nbytes)
        nbytes = -1
    if start is None:
        # Host timed: from the launch's start to after it synchronized (stop is a host time).
        end = stop if is_time(stop) and stop >= h0 else h1
        row = t.table.append(
            t.names(name),
            kind,
            t.queue_id(backend, queue),
            t.thread_id(who),
            h0,
            h1,
            h0,
            end - h0,
            nbytes,
            flags | HOST_TIMED | PLACED | (UNRESOLVED if error else 0),
            site,
            cfg,
            flops,
        )
        if error:
            t.errors[row] = error
        return True
    dur = rel = 0
    held = False  # the tokens are still in use by a hook call that never returned
    qid = t.queue_id(backend, queue)
    dkey = t.queues[qid].device_key
    if error is not None:
        pass
    elif backend.broken is not None:
        error = f"backend disabled: {backend.broken}"
    elif deadline is not None and _clock.monotonic() >= deadline:
        error = k.timeout_reason()  # nothing more is asked of the device
    else:
        hook = "timestamp_done"
        try:
            done = backend.timestamp_done(backend, stop)
            if not done:
                if deadline is None:
                    return False
                if dkey in k.stuck:
                    # It already let one deadline pass: not waited for again (a hung device
                    # costs one timeout, not one per back-pressure wait).
                    error = k.stuck[dkey]
                elif done is None:
                    # It can't tell, so a read waits itself: the first one is made in a
                    # thread, waited for until the deadline (then the work is done and
                    # the reads below return at once).
                    hook = "device_times" if backend.has_device_times else "elapsed_time"
                    if not k.read_in_time(backend, start, stop, deadline):
                        error, held = k.timeout_reason(hook), True
                        k.stuck[dkey] = k.stuck_reason(hook)
                else:
                    error = k.wait(backend, stop, deadline)
                    if error is not None:
                        k.stuck[dkey] = k.stuck_reason()
            if error is None and flags & APPROXIMATE:
                # Host-clock times, already placed: never a device's reference token.
                hook = "device_times"
                rel, end = device_times(backend, start, stop)
                dur = end - rel
                error = time_problem(hook, rel, end, rel)
                flags |= PLACED
            elif error is None:
                ref = k.refs.get(dkey)
                if backend.has_device_times:
                    hook = "device_times"
                    begin, end = device_times(backend, start, stop)
                    rel = 0 if ref is None else begin - k.ref_begin[dkey]
                else:
                    hook = "elapsed_time"
                    dur = elapsed(backend, start, stop)
                    end = elapsed(backend, ref[1], stop) if ref is not None else dur
                    begin = rel = end - dur
                dur = end - begin
                error = time_problem(hook, begin, end, rel)
                if error is None and ref is None:
                    if backend.has_device_times:
                        k.ref_begin[dkey] = begin
                    k.set_reference(dkey, backend, start, h0, h1)
        except NeverSubmitted as exc:
            # The plugin knows the work will never run (deferred submission): give it up
            # now rather than wait for it until the timeout; not an error of the plugin's.
            error = f"its work was never submitted to the device: {exc}".rstrip(": ")
        except Exception as exc:
            # A wrong return type is the plugin's bug: stop using it. An exception is a
            # device error (a failed command, an invalid event): this record has no time,
            # the next ones may.
            error = t.problems.hook_failed(backend, hook, exc, disable=isinstance(exc, BadReturn))
    tid = t.thread_id(who)
    nid = t.names(name)
    if not held:
        k.release(backend, start, stop)
    if error is not None:
        row = t.table.append(
            nid,
            kind,
            qid,
            tid,
            h0,
            h1,
            h0,
            0,
            nbytes,
            flags | UNRESOLVED | PLACED,
            site,
            cfg,
            flops,
        )
        t.errors[row] = error
    else:
        t.table.append(nid, kind, qid, tid, h0, h1, rel, dur, nbytes, flags, site, cfg, flops)
    return True


#: How far back ``annotate`` looks for the kernel it annotates (rows of other threads, harvested
#: meanwhile, lie between): beyond it the values are dropped rather than searched for.
ANNOTATE_REACH = 4096


def annotate(t: Tables, entry: tuple[Any, ...]) -> None:
    """``kprof.annotate``'s values for a call (``ENTRY_ANNOTATE``): its bytes and flops go to
    the last kernel row of the same thread launched inside the call's host interval. That row
    was harvested already: entries are taken in order, and the call's launches were appended
    before it returned. Nothing is changed when there is none (a call that launched nothing
    kprof records, or kernels that an activity tracer reports later)."""
    tid = t.thread_ids.get(entry[WHO])
    if tid is None:
        return
    h0, h1, nbytes, flops = entry[H0], entry[H1], entry[NBYTES], entry[FLOPS]
    table = t.table
    for row in range(len(table) - 1, max(-1, len(table) - 1 - ANNOTATE_REACH), -1):
        if table.thread[row] != tid:
            continue
        if table.launch_start[row] < h0:
            return  # this thread's rows are in launch order: none of the call's is left
        if table.kind[row] == KERNEL and table.launch_end[row] <= h1:
            if nbytes >= 0:
                table.nbytes[row] = nbytes
            if flops >= 0:
                table.flops[row] = flops
            return
