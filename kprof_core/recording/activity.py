"""Activity records: device work that a vendor tool reports after it ran (CUPTI's Activity API),
routed to the profile that launched it.

Such a tool sees every launch of the process and reports it later, often from a thread of
its own, so kprof cannot use its ``ContextVar`` at launch time. Instead it opens a *scope*
per profile per thread (on the thread that enters the profile, and in ``kprof.propagate``
-wrapped functions), tells the backend (``activity_scope_enter``), and the backend tags the
work launched there with that scope (CUPTI: an external correlation id pushed on the thread).
Records come back through :func:`deliver`; this module holds the scope registry that maps a
scope to its recorder and launching thread. The hooks are specified in ``hookspecs.py``.
"""

from __future__ import annotations

import itertools
import os
import threading
import warnings
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, NamedTuple

from kprof_core.recording.activity_columns import ActivityColumns
from kprof_core.recording.recorder import active as _active
from kprof_core.recording.sites import raw_site
from kprof_core.recording.threads import who as _who

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from kprof_core.host.backend import Backend
    from kprof_core.recording.recorder import Recorder

__all__ = [
    "ActivityColumns",
    "DeviceRecord",
    "deliver",
    "deliver_columns",
    "deliver_memory",
    "dropped",
    "launch_site",
    "stats",
]


class DeviceRecord(NamedTuple):
    """One completed piece of device work, as an activity backend hands it to kprof.

    ``scope``: the scope it was launched in (from ``activity_scope_enter``); ``kind``:
    ``kprof.plugin.KERNEL`` or ``COPY`` (a memset is a ``COPY`` named ``[memset]``);
    ``queue``: the backend's queue object (described by ``queue_info``; queues with the same
    ``device_key`` share one clock); ``begin``/``end``: on the device's clock, in ns;
    ``nbytes``: bytes moved or set (-1 for kernels); ``launch_begin``/``launch_end``: the
    launching host call on the same clock, or 0 when unknown; ``detail``: what else the tool
    says about it, in a few words (``"grid (4, 1, 1) block (256, 1, 1)"``), kept per row in
    ``Profile.details`` and shown in traces; ``config``: its launch configuration as reports
    show it (``"grid 4x1x1 block 256x1x1"``), for ``summary(by=("name", "config"))``.
    """

    scope: int
    kind: int
    name: str
    queue: Any
    begin: int
    end: int
    nbytes: int = -1
    launch_begin: int = 0
    launch_end: int = 0
    detail: str | None = None
    config: str | None = None
    site: int = -1


def launch_site() -> int:
    """The launch site of the work the calling thread is launching now, for an activity
    backend whose tool calls it on the launching thread as the launch begins (CUPTI's
    callback API): a raw id to hand back with the work's record (``DeviceRecord.site``,
    ``ActivityColumns(site=...)``, ``deliver_memory(site=...)``), valid in every profile of
    the process. -1 outside a profile, with sites off (``profile(sites=False)``), or when no
    frame is the user's (a thread without Python frames). With ``profile(stacks=...)`` the id
    stands for the launch's stack. Costs what a launch's site costs ``rec.launch``."""
    rec = _active()
    if rec is None or not rec.sites_on:
        return -1
    site: int = rec._site()
    return site


_ids = itertools.count(1)
_lock = threading.Lock()


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.Lock()  # another thread of the parent may have held it at the fork


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
#: scope -> (recorder, launching thread key); removed when its profile has been resolved.
_scopes: dict[int, tuple[Recorder, Any]] = {}
#: Recently ended scopes -> their profile's serial number, to count and say late records.
_ended: OrderedDict[int, int] = OrderedDict()
_serials = itertools.count(1)
_ENDED_KEPT = 4096
_stats = {"delivered": 0, "late": 0, "foreign": 0}


def stats() -> dict[str, int]:
    """Process-wide counts: records delivered to a profile, dropped as late (their profile had
    ended), and dropped as foreign (a scope kprof never opened)."""
    with _lock:
        return dict(_stats)


def open_scope(rec: Recorder, only: list[Backend] | None = None) -> tuple[int, list[Backend]]:
    """Open a scope of ``rec`` on the calling thread (for ``only`` of its backends, where
    given: one that joined the profile while it ran); returns it and the backends that will
    deliver its records (to be closed with :func:`close_scope` on this thread)."""
    who = _who()
    with _lock:
        # One scope per profile and thread (and task): a thread pool running a million
        # propagated calls holds one id per worker, not one per call.
        scope = rec.scope_ids.get(who)
        if scope is None:
            scope = rec.scope_ids[who] = next(_ids)
            _scopes[scope] = (rec, who)
            rec.scopes.append(scope)
        if not rec.activity_serial:
            rec.activity_serial = next(_serials)
    opened: list[Backend] = []
    for b in rec.backends if only is None else only:
        if not b.has_activity or b.broken is not None or not rec.device:
            continue
        try:
            if b.activity_scope_enter(b, scope):
                opened.append(b)
                rec.reports_work(b)
        except Exception as exc:
            rec._hook_failed(b, "activity_scope_enter", exc, disable=False)
    return scope, opened


def close_scope(rec: Recorder, scope: int, opened: list[Backend]) -> None:
    """Close what :func:`open_scope` opened, innermost backend last-in first-out."""
    for b in reversed(opened):
        try:
            b.activity_scope_exit(b, scope)
        except Exception as exc:
            rec._hook_failed(b, "activity_scope_exit", exc, disable=False)


def flush(rec: Recorder) -> None:
    """Ask every backend that delivers records of ``rec`` for all of them now (the profile is
    ending); say how many launches got no record within the profile's timeout."""
    scopes = tuple(rec.scopes)
    for b in list(rec.activity_backends):
        try:
            missing = b.activity_flush(b, scopes, rec.timeout)
        except Exception as exc:
            rec._hook_failed(b, "activity_flush", exc, disable=False)
            continue
        if missing and rec.activity_dropped.get(b.name):
            # The tracer lost records: launches whose record was lost are not waited for and
            # never blamed on the device.
            rec.activity_missing += int(missing)
            n, why = rec.activity_dropped[b.name]
            warnings.warn(
                f"kprof: backend {b.name!r}: {missing} launch(es) of the profile have no "
                f"device record: {n} activity record(s) were dropped while it ran ({why})",
                RuntimeWarning,
                stacklevel=3,
            )
        elif missing:
            rec.activity_missing += int(missing)
            warnings.warn(
                f"kprof: backend {b.name!r}: {missing} launch(es) of the profile had no "
                f"device record after {rec.timeout:g} s (the device may be hung; set "
                f"profile(timeout=...) or KPROF_RESOLVE_TIMEOUT to wait longer)",
                RuntimeWarning,
                stacklevel=3,
            )


def forget(rec: Recorder) -> None:
    """``rec`` has been resolved: records of its scopes arriving from now on are late."""
    with _lock:
        for scope in rec.scopes:
            if _scopes.pop(scope, None) is not None:
                _ended[scope] = rec.activity_serial
        while len(_ended) > _ENDED_KEPT:
            _ended.popitem(last=False)


def dropped(backend: Backend, n: int, reason: str) -> None:
    """Say that ``backend``'s tracer lost ``n`` records (``reason``: why, in words), while the
    profiles it delivers to ran: each keeps the count (``Profile.dropped``), their end does not
    wait for launches whose records were lost, and the warning says so, not that the device
    hung. Tracers report drops differently (CUPTI: a count reset when read; rocprofiler-sdk: a
    cumulative count on each batch; PTI: none): pass what was lost since the last call."""
    if n <= 0:
        return
    with _lock:
        recs = {id(r): r for r, _who in _scopes.values()}
    for rec in recs.values():
        if backend in rec.activity_backends:
            old, _why = rec.activity_dropped.get(backend.name, (0, ""))
            rec.activity_dropped[backend.name] = (old + n, reason)


def deliver_columns(backend: Backend, cols: ActivityColumns) -> int:
    """Hand a batch of completed device work, column-wise, to the profiles whose scopes
    launched it: the batched twin of :func:`deliver` (same rules: thread-safe, late and
    foreign rows dropped and counted, never raises for a row it cannot use). The batch is
    queued whole (split only when its rows belong to several profiles) and made into rows
    column by column at the next harvest. Returns how many rows were dropped.

    Raises ``TypeError`` or ``ValueError`` (nothing delivered) for a batch of the wrong shape
    (``ActivityColumns.check``: a column changed since it was made is checked again); a row
    whose values are wrong is kept unresolved, with the reason, as ``deliver`` keeps one."""
    if not isinstance(cols, ActivityColumns):
        raise TypeError(
            f"deliver_columns takes a kprof.plugin.ActivityColumns, not {type(cols).__name__}"
        )
    cols.check()
    n = len(cols)
    if not n:
        return 0
    first = cols.scope[0]
    scopes = {first} if cols.scope.count(first) == n else set(cols.scope)
    owners: dict[int, tuple[Recorder, dict[int, Any]]] = {}
    unknown: set[int] = set()
    late_profiles: set[int] = set()
    with _lock:
        for s in scopes:
            entry = _scopes.get(s)
            if entry is None:
                unknown.add(s)
                serial = _ended.get(s)
                if serial is not None:
                    late_profiles.add(serial)
                continue
            rec, who = entry
            owners.setdefault(id(rec), (rec, {}))[1][s] = who
    accepted = late = foreign = 0
    for rec, whos in owners.values():
        part = cols
        if len(whos) != len(scopes):
            mine = whos.keys()
            part = cols.take([i for i, s in enumerate(cols.scope) if s in mine])
        if rec.take_activity_columns(backend, part, whos):
            accepted += len(part)
            # A batch is one entry however many rows it holds: made into rows now, never
            # waiting (this runs on the backend's own thread).
            rec.harvest(wait=False)
        else:
            late += len(part)
            late_profiles.add(rec.activity_serial)
    if unknown:
        with _lock:
            ended = {s for s in unknown if s in _ended}
        for s in cols.scope:
            if s in unknown:
                if s in ended:
                    late += 1
                else:
                    foreign += 1
    with _lock:
        _stats["delivered"] += accepted
        _stats["late"] += late
        _stats["foreign"] += foreign
    if late:
        _say_late(backend, late, late_profiles)
    return late + foreign


def deliver(backend: Backend, records: Iterable[DeviceRecord]) -> int:
    """Hand completed device records to the profiles whose scopes launched them.

    Thread-safe; call it from any thread (a vendor tool's buffer callback), while profiles run
    and during ``activity_flush``. Returns how many records were dropped: late ones (their
    profile had ended: counted, and said once per backend) and foreign ones (no kprof scope).
    Never raises for a record it cannot use.
    """
    dropped = late = 0
    accepted = 0
    touched: list[Recorder] = []
    late_profiles: set[int] = set()
    for r in records:
        with _lock:
            entry = _scopes.get(r.scope)
            serial = _ended.get(r.scope) if entry is None else None
        if entry is None:
            dropped += 1
            if serial is not None:
                late += 1
                late_profiles.add(serial)
            continue
        rec, who = entry
        if rec.take_activity(backend, r, who):
            accepted += 1
            if not touched or touched[-1] is not rec:
                touched.append(rec)
        else:  # its profile is resolving or resolved: too late
            dropped += 1
            late += 1
            late_profiles.add(rec.activity_serial)
    for rec in touched:
        rec.activity_pressure()
    with _lock:
        _stats["delivered"] += accepted
        _stats["late"] += late
        _stats["foreign"] += dropped - late
    if late:
        _say_late(backend, late, late_profiles)
    return dropped


_said: OrderedDict[int, None] = OrderedDict()


def _say_late(backend: Backend, n: int, serials: set[int]) -> None:
    """Warn once per ended profile that records of it came too late."""
    with _lock:
        new = [s for s in serials if s not in _said]
        for s in new:
            _said[s] = None
        while len(_said) > _ENDED_KEPT:
            _said.popitem(last=False)
    if new:
        warnings.warn(
            f"kprof: backend {backend.name!r}: {n} device record(s) arrived after "
            f"their profile had ended and were dropped (counted in "
            f"kprof.plugin.activity_stats(); the device finished that work after "
            f"profile(timeout=...) ran out)",
            RuntimeWarning,
            stacklevel=3,
        )


def deliver_memory(
    backend: Backend,
    scope: Sequence[int],
    kind: Sequence[int],
    device: Sequence[str],
    address: Sequence[int],
    nbytes: Sequence[int],
    time_ns: Sequence[int],
    site: Sequence[int] | None = None,
) -> int:
    """Allocations and frees an activity API saw (CUPTI's MEMORY2 records), each tagged with
    the scope of the call that made it, into the memory of the profiles of those scopes
    (``Profile.memory``), as ``kprof.plugin.allocated``/``freed`` would record them on the
    allocating thread. ``kind``: 1 an allocation, 0 a free (``kprof_core.data.memory``'s
    ``ALLOC``/``FREE``); ``device``: its label as the plugin's ``queue_info`` names devices;
    ``time_ns``: on the host clock (``perf_counter_ns``). Thread-safe; events of scopes
    kprof does not know (ended profiles, foreign work) are dropped; ``site``: each event's
    raw launch site id (:func:`launch_site`, taken on the allocating thread when the call was
    made), -1 or None unknown. Returns how many were recorded."""
    with _lock:
        owners = {s: _scopes.get(s) for s in set(scope)}
    n = 0
    sites = site if site is not None else itertools.repeat(-1)
    for s, k, d, a, b, t, r in zip(scope, kind, device, address, nbytes, time_ns, sites):
        entry = owners.get(s)
        if entry is not None:
            # Never the frames here (the drain's or a profile's end): the site the call had.
            entry[0].memory.add(
                backend, int(k), d, int(a), int(b), int(t), None, catch=False, raw=raw_site(r)
            )
            n += 1
    return n
