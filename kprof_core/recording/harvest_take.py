"""The harvest's route for everything unusual: host-timed, approximate and activity entries,
a new queue or device, work not done (waited for, up to the deadline), a hook failing; what
goes wrong is reported here and the entry becomes an unresolved row, never lost.
"""

from __future__ import annotations

import queue
import threading
import warnings
from functools import partial
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
from kprof_core.host.backend import Backend, BadReturn, NeverSubmitted
from kprof_core.low_level.layout import (
    ENTRY_ACTIVITY,
    ENTRY_ANNOTATE,
    ENTRY_HOST_LAUNCH,
    ENTRY_HOST_RANGE,
    ENTRY_MARK,
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
from kprof_core.recording import harvest_delivered

if TYPE_CHECKING:
    from kprof_core.recording.harvest import Harvest


# Host-only entries travel through the same list as launches, tagged with their entry kinds.
HOST_KINDS = {
    ENTRY_HOST_RANGE: HostTable.RANGE,
    ENTRY_MARK: HostTable.MARK,
    ENTRY_HOST_LAUNCH: HostTable.LAUNCH,
}


#: Past the end's deadline, tokens are still given back until the releases made there took
#: this fraction of the timeout (see ``release_deferred``).
RELEASE_GRACE = 0.1


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


def take(h: Harvest, entry: tuple[Any, ...], deadline: float | None) -> bool:
    """Make a row of one entry; False (and no change) when its work is not done and we
    may not wait (``deadline`` is None)."""
    if entry[KIND] == ENTRY_ACTIVITY:
        harvest_delivered.take_activity(h, entry)
        return True
    if entry[KIND] == ENTRY_ANNOTATE:
        annotate(h, entry)
        return True
    flags = entry[FLAGS]
    if type(flags) is int and flags & WITH_HOST and entry[KIND] not in HOST_KINDS:
        # A range's device entry carrying its host side: the device row, then the host one.
        if not take(h, (*entry[:FLAGS], flags & ~WITH_HOST, *entry[FLAGS + 1 :]), deadline):
            return False
        return take(h, host_entry(ENTRY_HOST_RANGE, *_host_side(entry)), deadline)
    return take_device(h, entry, deadline)


def keep_host_side(h: Harvest, entry: tuple[Any, ...]) -> None:
    """A malformed entry dropped (``Harvest.bad_entry``): its range's host side, kprof's own,
    is kept where it can be read."""
    try:
        if with_host(entry):
            take(h, host_entry(ENTRY_HOST_RANGE, *_host_side(entry)), None)
    except Exception:
        h.dropped_bad += 1


def _host_side(entry: tuple[Any, ...]) -> tuple[Any, ...]:
    """A ``WITH_HOST`` entry's host range: name, thread, start, end, site."""
    return entry[NAME], entry[WHO], entry[H0], entry[H1], entry[SITE]


def take_device(h: Harvest, entry: tuple[Any, ...], deadline: float | None) -> bool:
    """``take`` for an entry of the pending format (a device or host entry)."""
    backend, kind, name, queue, who, h0, h1, start, stop, nbytes, flags, site, config, flops = (
        h.decode(entry)
    )
    if type(flops) is not int or not -1 <= flops < VALUE_LIMIT:
        flops = -1  # kprof's own (checked where the user gave it): never, but never lost
    name = name_of(name)
    cfg = -1 if config is None else h.configs.intern(entry[SLOT], config)
    if type(site) is not int or not -1 <= site < VALUE_LIMIT:
        site = -1  # kprof's own: never, but a row is never lost for it
    if kind in HOST_KINDS:
        if not (is_time(h0) and is_time(h1)):  # kprof's own clock: never, but never lost
            h0 = h1 = h.start_ns
        h.host.append(h.names(name), HOST_KINDS[kind], h.thread_id(who), h0, h1, site)
        return True
    error = None
    if not (is_time(h0) and is_time(h1)) or h1 < h0:
        # The plugin's launch window: kept only if it is one, else the profile's start.
        error = bad_value("the launch's host times", (h0, h1))
        h0 = h1 = h.start_ns
    if type(nbytes) is not int or not -1 <= nbytes < VALUE_LIMIT:
        error = error or bad_value("the byte count", nbytes)
        nbytes = -1
    if start is None:
        # Host timed: from the launch's start to after it synchronized (stop is a host time).
        end = stop if is_time(stop) and stop >= h0 else h1
        row = h.table.append(
            h.names(name),
            kind,
            h.queue_id(backend, queue),
            h.thread_id(who),
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
            h.errors[row] = error
        return True
    dur = rel = 0
    held = False  # the tokens are still in use by a hook call that never returned
    qid = h.queue_id(backend, queue)
    dkey = h.queues[qid].device_key
    if error is not None:
        pass
    elif backend.broken is not None:
        error = f"backend disabled: {backend.broken}"
    elif deadline is not None and _clock.monotonic() >= deadline:
        error = timeout_reason(h)  # nothing more is asked of the device
    else:
        hook = "timestamp_done"
        try:
            done = backend.timestamp_done(backend, stop)
            if not done:
                if deadline is None:
                    return False
                if dkey in h.stuck:
                    # It already let one deadline pass: not waited for again (a hung device
                    # costs one timeout, not one per back-pressure wait).
                    error = h.stuck[dkey]
                elif done is None:
                    # It can't tell, so a read waits itself: the first one is made in a
                    # thread, waited for until the deadline (then the work is done and
                    # the reads below return at once).
                    hook = "device_times" if backend.has_device_times else "elapsed_time"
                    if not read_in_time(h, backend, start, stop, deadline):
                        error, held = timeout_reason(h, hook), True
                        h.stuck[dkey] = stuck_reason(h, hook)
                else:
                    error = wait(h, backend, stop, deadline)
                    if error is not None:
                        h.stuck[dkey] = stuck_reason(h)
            if error is None and flags & APPROXIMATE:
                # Host-clock times, already placed: never a device's reference token.
                hook = "device_times"
                rel, end = device_times(h, backend, start, stop)
                dur = end - rel
                error = time_problem(hook, rel, end, rel)
                flags |= PLACED
            elif error is None:
                ref = h.refs.get(dkey)
                if backend.has_device_times:
                    hook = "device_times"
                    begin, end = device_times(h, backend, start, stop)
                    rel = 0 if ref is None else begin - h.ref_begin[dkey]
                else:
                    hook = "elapsed_time"
                    dur = elapsed(h, backend, start, stop)
                    end = elapsed(h, backend, ref[1], stop) if ref is not None else dur
                    begin = rel = end - dur
                dur = end - begin
                error = time_problem(hook, begin, end, rel)
                if error is None and ref is None:
                    if backend.has_device_times:
                        h.ref_begin[dkey] = begin
                    h.refs[dkey] = (backend, start, h0, h1)
                    h.ref_tokens.add(id(start))
        except NeverSubmitted as exc:
            # The plugin knows the work will never run (deferred submission): give it up
            # now rather than wait for it until the timeout; not an error of the plugin's.
            error = f"its work was never submitted to the device: {exc}".rstrip(": ")
        except Exception as exc:
            # A wrong return type is the plugin's bug: stop using it. An exception is a
            # device error (a failed command, an invalid event): this record has no time,
            # the next ones may.
            error = h.hook_failed(backend, hook, exc, disable=isinstance(exc, BadReturn))
    tid = h.thread_id(who)
    nid = h.names(name)
    if not held:
        h.release(backend, start, stop)
    if error is not None:
        row = h.table.append(
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
        h.errors[row] = error
    else:
        h.table.append(nid, kind, qid, tid, h0, h1, rel, dur, nbytes, flags, site, cfg, flops)
    return True


#: How far back ``annotate`` looks for the kernel it annotates (rows of other threads, harvested
#: meanwhile, lie between): beyond it the values are dropped rather than searched for.
ANNOTATE_REACH = 4096


def annotate(h: Harvest, entry: tuple[Any, ...]) -> None:
    """``kprof.annotate``'s values for a call (``ENTRY_ANNOTATE``): its bytes and flops go to
    the last kernel row of the same thread launched inside the call's host interval. That row
    was harvested already: entries are taken in order, and the call's launches were appended
    before it returned. Nothing is changed when there is none (a call that launched nothing
    kprof records, or kernels that an activity tracer reports later)."""
    tid = h.thread_ids.get(entry[WHO])
    if tid is None:
        return
    h0, h1, nbytes, flops = entry[H0], entry[H1], entry[NBYTES], entry[FLOPS]
    t = h.table
    for row in range(len(t) - 1, max(-1, len(t) - 1 - ANNOTATE_REACH), -1):
        if t.thread[row] != tid:
            continue
        if t.launch_start[row] < h0:
            return  # this thread's rows are in launch order: none of the call's is left
        if t.kind[row] == KERNEL and t.launch_end[row] <= h1:
            if nbytes >= 0:
                t.nbytes[row] = nbytes
            if flops >= 0:
                t.flops[row] = flops
            return


def stuck_reason(h: Harvest, hook: str | None = None) -> str:
    return (
        f"{timeout_reason(h, hook)}; the device was not waited for again, having let "
        f"earlier work pass a deadline"
    )


def elapsed(h: Harvest, backend: Backend, start: Any, stop: Any) -> int:
    ns = backend.elapsed_time(backend, start, stop)
    if type(ns) is not int:
        if isinstance(ns, bool) or not hasattr(ns, "__index__"):
            raise BadReturn(
                f"elapsed_time returned {type(ns).__name__} {ns!r}, expected int nanoseconds"
            )
        ns = int(ns)
    return ns


def device_times(h: Harvest, backend: Backend, start: Any, stop: Any) -> tuple[int, int]:
    pair = backend.device_times(backend, start, stop)
    if (
        type(pair) is not tuple
        or len(pair) != 2
        or type(pair[0]) is not int
        or type(pair[1]) is not int
    ):
        raise BadReturn(f"device_times returned {pair!r}, expected a pair of int nanoseconds")
    return pair


def wait(h: Harvest, backend: Backend, token: Any, deadline: float) -> str | None:
    """Poll until the token is done, sleeping a little more each time; None when done.

    ``deadline`` is shared by a whole harvest: a device that stopped making progress costs
    one timeout in all, not one per pending entry.
    """
    pause = 1e-5
    while not backend.timestamp_done(backend, token):
        if _clock.monotonic() >= deadline:
            return timeout_reason(
                h,
            )
        _clock.sleep(pause)  # releases the GIL: other threads keep running
        pause = min(pause * 2, 0.005)
    return None


def timeout_reason(h: Harvest, hook: str | None = None) -> str:
    what = f"{hook} did not return" if hook else "the device did not reach the timestamp"
    return (
        f"{what} within {h.timeout:g} s "
        f"(set profile(timeout=...) or KPROF_RESOLVE_TIMEOUT to wait longer)"
    )


def read_in_time(h: Harvest, backend: Backend, start: Any, stop: Any, deadline: float) -> bool:
    """Whether a read of tokens whose backend cannot tell if they are done
    (``timestamp_done`` returns None) returned by ``deadline``. ``device_times`` or
    ``elapsed_time`` then wait for the device themselves, so the read is made in the
    waiter thread. When it did not return, the call goes on in its thread and its tokens
    are not given back (being still in use). What it raised is raised here."""
    if h.waiter is None or h.waiter.stuck:
        h.waiter = Waiter()
    read = partial(device_times, h) if backend.has_device_times else partial(elapsed, h)
    return h.waiter.call(read, (backend, start, stop), deadline - _clock.monotonic())


def release_deferred(h: Harvest, deadline: float | None) -> None:
    """Give back the tokens ``release`` deferred while the end resolved. Releases are
    normally quick (µs), and every token is given back even when resolving used the whole
    timeout; but past the deadline, once the releases made there took ``RELEASE_GRACE`` of
    the timeout in all, the rest are left to the plugin (the garbage collector), said
    once: a slow ``release_timestamp`` cannot stretch the end past its bound."""
    deferred, h.deferred = h.deferred or [], None
    clock = _clock.monotonic
    budget = None if deadline is None else deadline + RELEASE_GRACE * h.timeout
    for i, (backend, tok) in enumerate(deferred):
        if budget is not None and clock() >= budget:
            h.unreleased += len(deferred) - i
            warnings.warn(
                f"kprof: {len(deferred) - i} timestamp(s) were not given back "
                f"(release_timestamp was slow past the resolve timeout of "
                f"{h.timeout:g} s); they are left to the plugin",
                RuntimeWarning,
                stacklevel=4,
            )
            return
        try:
            backend.release_timestamp(backend, tok)
        except Exception as exc:
            h.hook_failed(backend, "release_timestamp", exc)
