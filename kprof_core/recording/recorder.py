"""The recorder: what runs on the user's threads while a profile is active, and its end.

The launch path appends one tuple to the pending list (thread-safe, no lock) and returns; the
entries become rows in the ``Harvest`` (``harvest.py``), which places them on the host clock
at the end (``placement.py``). Where the compiled recorder is built (``native.py``), the
common case of a launch and of a range runs in C (``_crecorder.c``, ``_range.c``).

``Recorder`` is the one class plugins and the profiler see. It *has* its parts: the harvest
(``rows``: the pending list and the tables it becomes), the open ranges (``ranges``), the
allocations (``memory``), the site catcher and the bounds; at the end it hands up a finished
``Recording``.
"""

from __future__ import annotations

import os
import threading
import time
import warnings
import weakref
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from kprof_core import _clock
from kprof_core.data.records import (
    APPROXIMATE,
    COPY,
    HOST_TIMED,
    KERNEL,
    RANGE,
    DeviceClock,
    Recording,
)
from kprof_core.data.sites import Site
from kprof_core.host.backend import Backend
from kprof_core.low_level import native
from kprof_core.low_level.layout import (
    ENTRY_ACTIVITY,
    ENTRY_ACTIVITY_COLUMNS,
    ENTRY_ANNOTATE,
    ENTRY_HOST_LAUNCH,
    ENTRY_HOST_RANGE,
    ENTRY_MARK,
    ENTRY_WORK_RANGE,
    WITH_HOST,
    host_entry,
)
from kprof_core.recording import threads
from kprof_core.recording.bounds import Bounds
from kprof_core.recording.configs import resolve as resolve_configs
from kprof_core.recording.harvest import Harvest
from kprof_core.recording.memory_log import MemoryLog
from kprof_core.recording.nesting import absorb as absorb_rows
from kprof_core.recording.range_book import RangeBook
from kprof_core.recording.sites import NoCatcher, Skipper, plugin_prefixes, resolve_tables
from kprof_core.recording.sites import catcher as site_catcher
from kprof_core.recording.threads import _running_loop, _tls, thread_key
from kprof_core.recording.threads import who as _who
from kprof_core.recording.throughput import apply_names

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["COPY", "KERNEL", "RANGE", "DeviceClock", "Recorder", "active", "now"]

# The host clock every kprof time is on.
now = time.perf_counter_ns

_ACTIVE: ContextVar[Recorder | None] = ContextVar("kprof_active_recorder", default=None)
#: The recorder of the calling context, or None outside a profile. Plugins' capture wrappers
#: call this first and call straight through when it returns None.
active = _ACTIVE.get

#: Recorders of profiles not finished yet: reset in a forked child (``_forked``).
_live: weakref.WeakSet[Recorder] = weakref.WeakSet()


class Recorder:
    """Collects what one ``kprof.profile()`` captures.

    Plugins call :meth:`launch`; everything else is kprof's. Thread-safe: any number of
    threads may launch while one of them harvests. The record side (pending entries, the
    tables they become) is its ``rows``, a ``Harvest`` used through its public methods.
    """

    #: Try a harvest when this many entries are pending.
    harvest_every = 2048
    #: Never hold more than this many pending entries (and so live device tokens): past it the
    #: launching thread waits for the oldest work to finish (the device is that far behind).
    max_pending = 16384

    def __init__(
        self,
        backends: Sequence[Backend],
        *,
        device: bool = True,
        synchronize: bool = False,
        timeout: float = 60.0,
        parent: Recorder | None = None,
        sites: bool = True,
        site_skip: Sequence[str] = (),
        stacks: int = 0,
        bounds: Bounds | None = None,
    ) -> None:
        self.backends = list(backends)
        # Launch sites (sites.py): frames of these modules are never the user's. The catcher
        # (``_site``) is bound with the launch path (recorder.py).
        self.sites_on = sites or stacks > 0
        self.stack_depth = stacks  # frames per launch stack; 0: sites alone
        self._skip = Skipper([*site_skip, *plugin_prefixes(b.plugin for b in self.backends)])
        self._site: Any = None
        #: The catcher's ``capture`` (bound with the launch path): ``launch_site()`` without
        #: its frame, for a tracer's C callback where compiled (the compiled catcher walks from
        #: the innermost frame; the pure one skips two: call ``launch_site()`` then).
        self.launch_site: Any = None
        #: The sites the tables' ``site`` columns index, once the end resolved them.
        self.sites: list[Site] = []
        #: The launch configurations' texts the ``config`` column indexes, once resolved.
        self.configs: list[str] = []
        #: The stacks the tables' ``stack`` columns index (outermost first), likewise.
        self.stacks: tuple[tuple[Site, ...], ...] = ()
        self.timeout = timeout
        self.bounds = bounds
        self._new_rows()
        self._selected = frozenset(self.backends)
        self.device = device
        self.synchronize = synchronize
        self.parent = parent
        # The launch path compares the pending count with this one number: it also sends every
        # launch to _pressure once the profile has closed (then it is 0).
        self._next_harvest = min(self.harvest_every, self.max_pending)
        # Slots of the backends whose launches take the short path: timed, not synchronized.
        self._timed = frozenset(b.slot for b in self.backends if device and not synchronize)
        self._closed = False  # the profile's block has ended: what comes in now is late
        self._closed_ns = 0
        self.entered_on = threading.get_ident()  # the thread whose context it was set in
        self.exited_elsewhere = False  # its profile was exited in another context
        self.pending_high_water = 0
        # Activity records (see activity.py): this profile's scopes, the backends delivering
        # its records, and launches that never got one.
        self.has_activity = device and any(b.has_activity for b in self.backends)
        self.scopes: list[int] = []
        self.scope_ids: dict[Any, int] = {}
        self.activity_backends: set[Backend] = set()
        self.activity_serial = 0
        self.activity_missing = 0
        #: backend name -> (records its tracer dropped while this profile ran, why).
        self.activity_dropped: dict[str, tuple[int, str]] = {}
        #: The ``kprof.range`` blocks entered and not yet exited (cut at the end). Its dicts
        #: (never rebound) are bound here too: the Python range path reaches them in one
        #: lookup, as the compiled one does.
        self.ranges = RangeBook()
        self._open_ranges, self._forked_ranges = self.ranges.open, self.ranges.forked
        #: Allocations and frees the backends report (``kprof.plugin.allocated``/``freed``).
        self.memory = MemoryLog(self.backends)
        self._native: Any = None  # the compiled launch path, where bound
        self._stamped: frozenset[Backend] = frozenset()  # set with it
        self._bind_launch_path()
        _live.add(self)

    def _new_rows(self) -> None:
        """A new record side (``Harvest``), its objects bound here too."""
        h = self.rows = Harvest(self.backends, self.timeout)
        t = h.tables
        # The harvest's own objects (never rebound there), bound here too: the launch path
        # reaches them in one lookup.
        self._incoming = h.incoming
        self._live_queues = t.live_queues
        self._release = h.tokens.release
        self._hook_failed = h.problems.hook_failed

    def harvest(self, wait: bool = False, limit: int | None = None) -> int:
        """Turn pending entries into rows (``Harvest.harvest``); returns how many."""
        return self.rows.harvest(wait, limit)

    @property
    def start_ns(self) -> int:
        """When the profile started (set by ``profile``): where activity records of a device
        without clock correlation are anchored."""
        return self.rows.tables.start_ns

    @start_ns.setter
    def start_ns(self, value: int) -> None:
        self.rows.tables.start_ns = value

    @property
    def late_dropped(self) -> int:
        """Entries that came after the profile ended, dropped."""
        return self.rows.problems.late_dropped

    @property
    def dropped_bad(self) -> int:
        """Entries kprof could not read (a plugin's bug), dropped with a warning."""
        return self.rows.problems.dropped_bad

    # -- a backend joining, a fork ---------------------------------------------------------------

    def add_backend(self, backend: Backend) -> None:
        """Record ``backend``'s work too from now on: its capture started while the profile
        ran (``kprof run`` starts a backend when the program imports its library). Launches
        already in flight through the old launch path reach the same pending list."""
        if backend in self._selected:
            return
        self.rows.add_backend(backend)  # first: an entry of its slot must find it there
        self.memory.add_backend(backend)
        self.backends.append(backend)
        self._selected = frozenset(self.backends)
        if self.device and not self.synchronize:
            self._timed = self._timed | {backend.slot}
        self.has_activity = self.has_activity or (self.device and backend.has_activity)
        self._bind_launch_path()

    def _after_fork_in_child(self, fork_ns: int) -> None:
        """In a child made by ``os.fork()`` inside the profile: start over with no inherited
        record side. The parent's pending tokens belong to devices (and device threads) the
        child does not have, and its rows are the parent's: keeping them made the child wait
        the whole timeout for them at its end and report the parent's work as its own (a
        merge of parent and child files then counted it twice). The child records only what
        it does after the fork.

        Ranges the forking thread had open go on in the child from ``fork_ns``, on the host
        only (their device timestamps are the parent's): the child's time inside them is its
        own work, and it leaves them as the code goes on. Other threads' ranges are dropped
        (those threads do not exist in the child)."""
        start_ns = self.start_ns
        self._new_rows()
        self.start_ns = start_ns
        self.ranges.after_fork(thread_key(), fork_ns)
        self.memory = MemoryLog(self.backends)  # the parent's allocations are not the child's
        self.pending_high_water = 0
        self._bind_launch_path()
        self._set_next_harvest(0 if self._closed else min(self.harvest_every, self.max_pending))

    # -- the launch path (plugins) ------------------------------------------------------------

    def launch(
        self,
        backend: Backend,
        kind: int,
        name: str,
        queue: Any,
        start_ns: int,
        end_ns: int,
        start: Any = None,
        stop: Any = None,
        nbytes: int = -1,
        config: Any = None,
    ) -> None:
        """Record one launch (a kernel or a copy) that a plugin captured.

        ``start_ns``/``end_ns`` bracket the host call (``kprof.capture.now()``); ``start`` and
        ``stop`` are tokens around the work (they may be the same object, e.g. the launch's
        own OpenCL event), or ``None`` when the backend has no timestamps: the launch is then
        synchronized here and timed on the host. ``nbytes`` is a copy's size, or -1.
        ``config``: the launch's configuration as the plugin has it (hashable, e.g. ``(grid,
        block)``; None: none), made text once per distinct value by the ``launch_config`` hook.
        Every token handed here is given back through ``release_timestamp``.

        Where the compiled recorder is in use, each Recorder's ``launch`` is its
        ``LaunchPath.launch`` (``_crecorder.c``): it handles the common case (a timed launch of
        a backend this profile times, arguments by position) and calls this method for every
        other case.
        """
        slot = backend.slot
        if start is not None and slot in self._timed:
            # The common case, kept to a few lookups: it runs once per launch. Entries carry
            # the backend's slot and the queue's id, not the objects: a tuple of untracked
            # objects (ints, str, an OpenCL event) is untracked by the collector's next pass,
            # while one holding a tracked object would survive into the old generations and
            # make every full collection walk all pending launches (~0.7 µs per launch here).
            qk = id(queue)
            live = self._live_queues
            if qk not in live:
                live[qk] = queue
            # threads.who(), inlined for its common case (no event loop): a frame less.
            try:
                who = _tls.key
            except AttributeError:
                who = _who()
            if _running_loop() is not None:
                who = _who()
            incoming = self._incoming
            incoming.append(
                (
                    slot,
                    kind,
                    name,
                    qk,
                    who,
                    start_ns,
                    end_ns,
                    start,
                    stop,
                    nbytes,
                    0,
                    self._site(),
                    config,
                    -1,  # flops: only kprof.range and kprof.annotate say them
                )
            )
            if len(incoming) >= self._next_harvest:
                self._pressure()
            return
        if not self.device or backend not in self._selected:
            if backend not in self._selected and (outer := self._outer_for(backend)):
                # A nested profile that does not use this backend: the outer one does.
                outer.launch(
                    backend, kind, name, queue, start_ns, end_ns, start, stop, nbytes, config
                )
                return
            self._untimed(backend, name, start_ns, end_ns, start, stop)
            return
        flags = 0
        if start is None:
            if stop is not None:
                self._release(backend, None, stop)
            if self._closed:  # a finished profile still active in another context: drop it
                return
            self._sync(backend, queue)
            stop = now()
            flags = HOST_TIMED
        elif self.synchronize and not self._closed:
            self._sync(backend, queue)
        qk = id(queue)
        self._live_queues.setdefault(qk, queue)
        self._append(
            (
                slot,
                kind,
                name,
                qk,
                _who(),
                start_ns,
                end_ns,
                start,
                stop,
                nbytes,
                flags,
                self._site(),
                config,
                -1,
            )
        )

    _launch_py = launch  # the compiled path's fallback, whatever self.launch is bound to

    def _bind_launch_path(self) -> None:
        """Use the compiled launch path for this recorder, where it is available."""
        mod = native.compiled()
        # The backends whose ranges put timestamps (Backend.has_timestamps, a property: read
        # once here, not per range).
        self._stamped = frozenset(b for b in self.backends if b.has_timestamps)
        if self._native is not None:
            # Ranges entered on the old path exit by the Python one (_range.c's rule: a path
            # with a plan is its recorder's current one).
            self._native.range_plan = None
        self._native = None
        # The catcher of launch sites: compiled with the compiled launch path, else Python.
        self._sites = (
            site_catcher(self._skip, mod, self.stack_depth) if self.sites_on else NoCatcher()
        )
        self._site = self.launch_site = self._sites.capture
        # An allocation's site is caught as a launch's (memory_log.py): None with sites off.
        self.memory.catch = self._site if self.sites_on else None
        # Where Recorder.launch was replaced (the conformance kit watches every launch so),
        # the replacement is called, as it would be without the compiled recorder.
        if mod is None or type(self).launch is not Recorder._launch_py:
            return
        self._native = mod.launch_path(
            self._incoming,
            self._live_queues,
            self._timed,
            self._launch_py,
            self._pressure,
            threads._tls,
            threads._running_loop,
            _who,
            self._next_harvest,
            self._sites if self.sites_on else None,
        )
        self.launch = self._native.launch  # type: ignore[method-assign]
        self._native.open_ranges = self.ranges.open
        self._native.forked_ranges = self.ranges.forked
        self._native.range_plan = self._range_plan()

    def _range_plan(self) -> tuple[tuple[Any, ...], ...] | None:
        """What ``kprof.range``'s compiled path (``_range.c``) asks of each backend: its
        ``current_queue`` and its ``record_timestamp`` (None where it puts no timestamps), its
        slot, the hook's raw stamp (``kprof_raw_stamp``: a ``KprofRawStamp`` capsule, or
        None), its ``range_push`` and ``range_pop`` where it mirrors ranges to its vendor
        tool (else None), and whether its work times its ranges (it reports that work itself:
        ``activity_backends``); None where every range takes the Python path: no device
        times, synchronized, or closed. Made again when a backend starts reporting its work."""
        if not self.device or self.synchronize or self._closed:
            return None
        by_work = self.activity_backends
        # A hook function may carry its C twin (``kprof_compiled``: kprof_opencl's do).
        # Made from a list, not a generator: CPython builds a tuple from a generator at 10
        # items and shrinks it, and the shrunk tuple, freed at the profile's end, joins the
        # free list of its size for good: one more cached tuple per window of a long run.
        return tuple(
            [
                (
                    b,
                    getattr(b.current_queue, "kprof_compiled", b.current_queue),
                    getattr(b.record_timestamp, "kprof_compiled", b.record_timestamp)
                    if b.has_timestamps and b not in by_work
                    else None,
                    b.slot,
                    getattr(b.record_timestamp, "kprof_raw_stamp", None)
                    if b.has_timestamps and b not in by_work
                    else None,
                    b.range_push if b.mirrors_ranges else None,
                    b.range_pop if b.mirrors_ranges else None,
                    b in by_work,
                )
                for b in self.backends
            ]
        )

    def reports_work(self, backend: Backend) -> None:
        """``backend`` delivers the records of this profile's work from now on (its activity
        scope opened): its ranges are timed by that work, not by timestamps."""
        if backend in self.activity_backends:
            return
        self.activity_backends.add(backend)
        if self._native is not None and self._native.range_plan is not None:
            self._native.range_plan = self._range_plan()

    def launch_observed(
        self,
        backend: Backend,
        kind: int,
        name: str,
        queue: Any,
        start_ns: int,
        end_ns: int,
        token: Any,
        nbytes: int = -1,
        config: Any = None,
    ) -> None:
        """Record a launch on a queue without device timestamps, timed without synchronizing.

        ``token`` stands for the host's observation of the work: ``timestamp_done(token)``
        says whether it was seen complete, and ``device_times(token, token)`` gives when it
        began and ended on the host clock (``kprof.capture.now()``), e.g. its completion as
        observed by a watcher thread and the previous completion on the same in-order queue.
        The row is marked approximate (``~``); the rest is as :meth:`launch`. Ranges get
        the same treatment when ``record_timestamp`` returns such tokens: tokens whose
        ``approximate`` attribute is ``True`` are host observations.
        """
        if not self.device or backend not in self._selected:
            if backend not in self._selected and (outer := self._outer_for(backend)):
                outer.launch_observed(
                    backend, kind, name, queue, start_ns, end_ns, token, nbytes, config
                )
                return
            self._untimed(backend, name, start_ns, end_ns, token, token)
            return
        qk = id(queue)
        self._live_queues.setdefault(qk, queue)
        head = (backend.slot, kind, name, qk, _who(), start_ns, end_ns, token, token, nbytes)
        self._append((*head, APPROXIMATE, self._site(), config, -1))

    def _outer_for(self, backend: Backend) -> Recorder | None:
        """The nearest enclosing profile still open that uses ``backend``, if any: a kernel
        launched inside a nested profile with fewer backends was lost to the outer one."""
        outer = self.parent
        while outer is not None and (outer._closed or backend not in outer._selected):
            outer = outer.parent
        return outer

    def _untimed(
        self, backend: Backend, name: str, start_ns: int, end_ns: int, start: Any, stop: Any
    ) -> None:
        """A launch this profile does not time: keep its host call (``device=False``), or
        drop it (a backend the profile was not asked to use); give its tokens back."""
        self._release(backend, start, stop)
        if backend in self._selected:
            self._append(
                host_entry(ENTRY_HOST_LAUNCH, name, _who(), start_ns, end_ns, self._site())
            )

    # -- the host side (kprof.range, kprof.mark) and a range's device side --------------------

    def host_range(self, name: str, start_ns: int, end_ns: int, thread: Any = None) -> None:
        """A host range; ``thread``: the key ``threads.who()`` gave where it ran (default: the
        calling thread)."""
        who = _who() if thread is None else thread
        self._append(host_entry(ENTRY_HOST_RANGE, name, who, start_ns, end_ns, self._site()))

    def mark(self, name: str, time_ns: int) -> None:
        self._append(host_entry(ENTRY_MARK, name, _who(), time_ns, time_ns, self._site()))

    def host_launch(self, name: str, start_ns: int, end_ns: int) -> None:
        """The host call of a launch, without device time (``kprof.kernel`` with ``device=False``)."""
        self._append(host_entry(ENTRY_HOST_LAUNCH, name, _who(), start_ns, end_ns, self._site()))

    def device_range_begin(self, name: str) -> list[tuple[Backend, Any, Any]] | None:
        """Timestamps on every backend where the calling thread has a current queue.

        Backends that mirror ranges (``range_push``) are told ``name`` first.
        """
        if not self.device or self._closed:
            # (Closed: the profile ended, but is still active in a context other than the one
            # that exited it; nothing more is put on any device for it.)
            return None
        begun = []
        for b in self.backends:
            if b.broken is not None:
                continue
            # A backend reporting its work itself times the range by that work, whichever
            # queue it ran on (work_ranges.py): no queue asked for, no timestamps put.
            by_work = b in self.activity_backends
            if by_work:
                q = None
            else:
                try:
                    q = b.current_queue(b)
                except Exception as exc:
                    self._hook_failed(b, "current_queue", exc)
                    continue
                if q is None:
                    continue
            if b.mirrors_ranges:
                try:
                    b.range_push(b, name)
                except Exception as exc:
                    self._hook_failed(b, "range_push", exc)
                    continue
            tok = None
            if b in self._stamped and not by_work:
                try:
                    tok = b.record_timestamp(b)
                except Exception as exc:
                    self._hook_failed(b, "record_timestamp", exc)
                    self._range_pop(b)  # keep the vendor tool's range stack balanced
                    continue
            if tok is None and self.synchronize and not by_work:
                self._sync(b, q)
            begun.append((b, q, tok))
        return begun

    def device_range_end(
        self,
        name: str,
        kind: int,
        begun: list[tuple[Backend, Any, Any]],
        start_ns: int,
        nbytes: int = -1,
        flops: int = -1,
        thread: Any = None,
        host: bool = False,
    ) -> int:
        """Close what ``device_range_begin`` opened; host-time the backends without tokens,
        but those whose work times the range (``_work_range``). ``nbytes``, ``flops``: what
        the user said the range's work moves and computes, -1 when not said. ``thread``: the
        key of the thread that entered the range (default: the calling thread's). With
        ``host`` the range's host side (``start_ns`` to the returned end) is recorded too: in
        the last device entry (``WITH_HOST``), else in a host entry of its own.

        ``start_ns`` must be taken before ``device_range_begin``: no work of the range can
        start on the device before it (placement relies on that). Returns the range's host end,
        taken after the last stop timestamp was put, so that the host interval encloses every
        call that put the range's timestamps (a slow ``record_timestamp`` is part of what the
        block cost the thread).
        """
        who = _who() if thread is None else thread
        site = self._site()
        stops = self._range_stops(begun)
        end_ns = now()
        last = len(stops) - 1
        incoming = self._incoming
        for i, (b, q, tok, stop) in enumerate(stops):
            flags = 0
            if tok is None and b in self.activity_backends:
                wh = WITH_HOST if host and i == last else 0
                self._work_range(b, name, who, start_ns, end_ns, nbytes, wh, site, flops)
                continue
            # Tokens that are host observations say so (see launch_observed).
            if getattr(stop, "approximate", False) is True:
                flags = APPROXIMATE
            if stop is None:
                self._release(b, tok, None)
                tok = None
                self._sync(b, q)
                stop = now()
                flags = HOST_TIMED
            elif self.synchronize:
                self._sync(b, q)
            if b.mirrors_ranges:
                self._range_pop(b)
            qk = id(q)
            self._live_queues.setdefault(qk, q)
            if kind == KERNEL and b in self.activity_backends:
                # The backend reports every kernel itself: a kprof.kernel call is then a range
                # around them, not one more kernel (nothing is counted twice).
                kind = RANGE
            if host and i == last:
                flags |= WITH_HOST  # the host range travels in the last device entry
            incoming.append(
                (
                    b.slot,
                    kind,
                    name,
                    qk,
                    who,
                    start_ns,
                    end_ns,
                    tok,
                    stop,
                    nbytes,
                    flags,
                    site,
                    None,
                    flops,
                )
            )
            if len(incoming) >= self._next_harvest:  # (self._append, inline)
                self._pressure()
        if host and not stops:
            self._append(host_entry(ENTRY_HOST_RANGE, name, who, start_ns, end_ns, site))
        return end_ns

    def _work_range(
        self,
        b: Backend,
        name: str,
        who: Any,
        start_ns: int,
        end_ns: int,
        nbytes: int,
        flags: int,
        site: int,
        flops: int,
    ) -> None:
        """A range's entry on a backend whose work times it at the profile's end
        (``work_ranges.py``): no tokens; the vendor tool's range popped first."""
        self._range_pop(b)
        self._append(
            (
                b.slot,
                ENTRY_WORK_RANGE,
                name,
                None,  # no queue: the work's own
                who,
                start_ns,
                end_ns,
                None,
                None,
                nbytes,
                flags,
                site,
                None,
                flops,
            )
        )

    def _range_stops(
        self, begun: list[tuple[Backend, Any, Any]]
    ) -> list[tuple[Backend, Any, Any, Any]]:
        """A range's stop timestamp on each backend it began on: ``(backend, queue, start,
        stop)``, ``stop`` None where it has no timestamps; a backend disabled meanwhile, or
        whose ``record_timestamp`` fails, has its start given back and no entry."""
        stops: list[tuple[Backend, Any, Any, Any]] = []
        for b, q, tok in begun:
            if b.broken is not None:  # disabled meanwhile: nothing more is asked of it
                self._release(b, tok, None)
                self._range_pop(b)
                continue
            stop: Any = None
            if tok is not None:
                try:
                    stop = b.record_timestamp(b)
                except Exception as exc:
                    self._hook_failed(b, "record_timestamp", exc)
                    self._release(b, tok, None)
                    self._range_pop(b)
                    continue
            stops.append((b, q, tok, stop))
        return stops

    def cut_range_exits(self, frame: tuple[Any, ...]) -> None:
        """A range that the profile recorded as cut at its end (``RangeBook.cut``) exits:
        its timestamps were given back then; the vendor tool's range is popped here, on its
        own thread."""
        for b, _q, _tok in frame[2] or ():
            self._range_pop(b)

    def reentered(self, name: str) -> None:
        key = f"reentered {name}"
        if key not in self.rows.problems.warned:
            self.rows.problems.warned.add(key)
            warnings.warn(
                f"kprof: the range object {name!r} was entered again before it exited; "
                f"both are recorded, but use one kprof.range(...) per with block (one "
                f"object shared by threads mixes up their times)",
                RuntimeWarning,
                stacklevel=3,
            )

    def _range_pop(self, b: Backend) -> None:
        if b.mirrors_ranges:
            try:
                b.range_pop(b)
            except Exception as exc:
                self._hook_failed(b, "range_pop", exc)

    def host_timed(self, name: str, kind: int, start_ns: int, end_ns: int) -> None:
        """A device entry with no backend at all (``kprof.kernel`` outside any queue)."""
        self._append(
            (
                None,
                kind,
                name,
                None,
                _who(),
                start_ns,
                end_ns,
                None,
                end_ns,
                -1,
                HOST_TIMED,
                self._site(),
                None,
                -1,
            )
        )

    def annotation_failed(self, exc: BaseException) -> None:
        """A ``kprof.annotate`` callable raised: its call is recorded without the values;
        said once per profile."""
        if "annotate" not in self.rows.problems.warned:
            self.rows.problems.warned.add("annotate")
            warnings.warn(
                f"kprof: a kprof.annotate callable raised {type(exc).__name__}: {exc}; its "
                f"calls are recorded without their flops and bytes",
                RuntimeWarning,
                stacklevel=3,
            )

    def annotate_launch(self, nbytes: int, flops: int, start_ns: int, end_ns: int) -> None:
        """What ``kprof.annotate``'s wrapper says of the call it timed (``start_ns`` to
        ``end_ns``): the harvest gives ``nbytes`` and ``flops`` to the last kernel this thread
        launched inside it (``harvest_take.annotate``)."""
        head = (None, ENTRY_ANNOTATE, "", None, _who(), start_ns, end_ns, None, None, nbytes)
        self._append((*head, 0, -1, None, flops))

    # -- activity records (activity.py) ---------------------------------------------------------

    def take_activity(self, backend: Backend, r: Any, who: Any) -> bool:
        """Queue one delivered ``DeviceRecord`` of this profile; False when it comes too late
        (the profile is resolving or resolved). Called from any thread."""
        if self._closed:
            return False
        if backend not in self._selected:
            return True  # a backend this profile was not asked to use: not kept
        qk = id(r.queue)
        self._live_queues.setdefault(qk, r.queue)
        # An activity entry (layout.ACTIVITY_FIELDS): the record travels whole.
        self._incoming.append((backend.slot, ENTRY_ACTIVITY, r, qk, who))
        if self._closed:  # closed meanwhile: finish() may have harvested already
            self._late()
        return True

    def take_activity_columns(self, backend: Backend, cols: Any, whos: dict[int, Any]) -> bool:
        """Queue a batch of delivered rows of this profile (``ActivityColumns``; ``whos``: its
        scopes' launching threads) as one entry; False when it comes too late."""
        if self._closed:
            return False
        if backend not in self._selected:
            return True
        for q in cols.queues:
            self._live_queues.setdefault(id(q), q)
        # An activity entry whose record is the whole batch and whose "who" maps its scopes.
        self._incoming.append((backend.slot, ENTRY_ACTIVITY_COLUMNS, cols, None, whos))
        if self._closed:
            self._late()
        return True

    def activity_pressure(self) -> None:
        """After a delivery: harvest if enough is pending, without ever waiting (this may run
        on the vendor tool's own thread, which must not block on the device)."""
        if (n := self._pending()) >= self._next_harvest and not self._closed:
            if n > self.pending_high_water:
                self.pending_high_water = n
            self.rows.harvest(wait=False)

    # -- the pending list's one way in, and back-pressure ---------------------------------------

    def _set_next_harvest(self, n: int) -> None:
        self._next_harvest = n
        if self._native is not None:
            self._native.next_harvest = n
            if n == 0:  # closed (or a forked child's): kprof.range's Python path from now on
                self._native.range_plan = None

    def open_outer(self) -> Recorder | None:
        """The nearest enclosing profile not closed yet, if any."""
        outer = self.parent
        while outer is not None and outer._closed:
            outer = outer.parent
        return outer

    def _append(self, entry: tuple[Any, ...]) -> None:
        incoming = self._incoming
        incoming.append(entry)
        if len(incoming) >= self._next_harvest:
            self._pressure()

    def _sync(self, backend: Backend, queue: Any) -> None:
        try:
            backend.synchronize(backend, queue)
        except Exception as exc:
            self._hook_failed(backend, "synchronize", exc)

    def _pending(self) -> int:
        """Launches pending: the entries, and the records of raw launches' batches beyond one
        per entry (``_batch.c``)."""
        native = self._native
        return len(self._incoming) + (native.batched if native is not None else 0)

    def _pressure(self) -> None:
        """Enough entries are pending: harvest what is done; past ``max_pending``, wait."""
        incoming = self._incoming
        n = self._pending()
        if n > self.pending_high_water:
            self.pending_high_water = n
        if self.rows.lock.held_here():
            # A signal handler (kprof.mark, a launch) interrupted this thread's own harvest:
            # waiting here would wait on ourselves. The entry is in; the harvest goes on after.
            return
        if not self._closed:
            self.rows.harvest(wait=False)
            # Still too far behind: wait for the oldest work, which bounds live device tokens.
            while self._pending() > self.max_pending and not self._closed:
                # (At least the first entry: a batch alone may hold more than max_pending.)
                limit = max(1, len(incoming) - self.max_pending // 2)
                self.rows.harvest(wait=True, limit=limit)
            if self.bounds is not None:
                self._bound()
            # When nothing was done, try again only after another harvest_every launches.
            self._set_next_harvest(min(self._pending() + self.harvest_every, self.max_pending))
        if self._closed:
            self._set_next_harvest(0)  # may have raced with finish() setting it
            self._late()
            if self.exited_elsewhere and threading.get_ident() == self.entered_on:
                # Still active on the thread that entered it: the profile was exited on
                # another thread, which could not reset this thread's context. What this
                # thread does now goes where it would have had the profile exited here.
                # (Other threads that run in a copy of its context keep dropping late work.)
                if _ACTIVE.get() is self:
                    _ACTIVE.set(self.open_outer())

    def _bound(self) -> None:
        """Cut the rows past the profile's bounds (``bounds.py``), unless another thread
        holds the tables now (it harvests: the next back-pressure cuts)."""
        rows, b = self.rows, self.bounds
        if b is not None and rows.lock.acquire(blocking=False):
            try:
                if not rows.finished:
                    b.apply(rows.tables.table, rows.tables.errors, rows.tables.details, end=False)
            finally:
                rows.lock.release()

    def _late(self) -> None:
        """Entries that arrived after the profile ended (a thread that outlived it)."""
        if self.rows.lock.held_here():  # a signal handler interrupting the end: it takes them
            return
        with self.rows.lock:
            if self.rows.finished:  # otherwise finish() is still at work and takes them
                self.rows.drop_late()

    # -- the end --------------------------------------------------------------------------------

    def finish(self, end_ns: int | None = None) -> None:
        """Resolve everything launched before now (waiting at most ``timeout`` in all), then
        place device times on the host clock. Work reported later is dropped; ranges still
        open are recorded up to ``end_ns`` (default: now)."""
        self._close(end_ns)
        with self.rows.lock:
            if self.rows.finished:
                return
            rows = self.rows
            deadline = _clock.monotonic() + self.timeout
            # Tokens are given back after resolving and placing, each release within the
            # deadline too: slow releases must not cost records their time.
            rows.tokens.deferred = []
            try:
                rows.harvest_locked(None, deadline)
                self._end(deadline)
            finally:
                rows.tokens.release_deferred(deadline)
        if all(r.rows.finished for r in list(_live)):
            threads.forget_ended()

    def recording(self) -> Recording:
        """The finished recording, handed up to the profile (after ``finish`` or ``abandon``)."""
        t = self.rows.tables
        return Recording(
            table=t.table,
            host=t.host,
            names=t.names.values,
            queues=t.queues,
            threads=t.threads,
            sites=self.sites,
            configs=self.configs,
            stacks=self.stacks,
            errors=t.errors,
            details=t.details,
            clocks=self.rows.clocks,
            dropped={**self.activity_dropped},  # not dict(): sites.Skipper
        )

    def abandon(self, end_ns: int | None = None) -> None:
        """End without resolving what is pending (resolving itself was interrupted): give
        every token back, keep and place the rows made so far."""
        self._close(end_ns)
        with self.rows.lock:
            if not self.rows.finished:
                self._end()

    def _close(self, end_ns: int | None = None) -> None:
        if not self._closed:
            self._closed_ns = now() if end_ns is None else end_ns
        self._closed = True
        self._set_next_harvest(0)

    def _end(self, deadline: float | None = None) -> None:
        """Called once, holding the lock: the tables become final."""
        self._cut_open_ranges(self._closed_ns)
        tables = self.rows.tables
        if self.bounds is not None:  # before placing: only what is kept is placed
            self.bounds.apply(tables.table, tables.errors, tables.details, end=True)
        self.rows.finished = True
        self.rows.drop_late()
        try:
            self.rows.end(deadline)
        finally:
            # Launch sites to text, once per distinct raw site: the columns then index them.
            self.sites, self.stacks = resolve_tables(tables.table, tables.host)
            # The compiled catcher keeps the frames of the last stack it walked (to stop the
            # next walk early): let them go with the profile.
            forget = getattr(getattr(self, "_sites", None), "forget", None)
            if forget is not None:
                forget()
            # Launch configurations to text, once per distinct value (configs.py).
            t = tables.table
            self.configs, t.config = resolve_configs(
                tables.configs, t.config, tables.by_slot, self._config_failed
            )
            apply_names(t, tables.names.values)  # kprof.annotate("name", ...)
            # The compiled launch path holds this recorder's bound methods, and the recorder
            # holds it: a cycle only a full collection frees, which kept each ended window's
            # recorder and harvest alive into the next windows of a long run. Launches after
            # the end take the Python path, which does with a closed profile what it did.
            self._native = None
            self.__dict__.pop("launch", None)

    def _config_failed(self, backend: Backend, exc: BaseException) -> None:
        self._hook_failed(backend, "launch_config", exc, disable=False)

    def _cut_open_ranges(self, end_ns: int) -> None:
        """Ranges still open as the profile ends (in a thread that outlived it, or a block the
        profile was exited from): recorded on the host up to ``end_ns``, with a warning; their
        device timestamps, which have no end, are given back."""
        cut = self.ranges.cut()
        for name, who, h0, begun in cut:
            for b, _q, tok in begun or ():
                self._release(b, tok, None)
            self.rows.take(host_entry(ENTRY_HOST_RANGE, name, who, h0, max(h0, end_ns)), None)
        if cut:
            shown = ", ".join(repr(n) for n in sorted({c[0] for c in cut})[:5])
            warnings.warn(
                f"kprof: {len(cut)} range{'s were' if len(cut) > 1 else ' was'} still "
                f"open when the profile ended ({shown}): recorded on the host up to "
                f"the profile's end, without device time",
                RuntimeWarning,
                stacklevel=4,
            )

    def absorb(self, child: Recording, memory: MemoryLog) -> None:
        """Take a finished nested profile's rows and allocations (``nesting.absorb``), so the
        outer profile has them too."""
        with self.rows.lock:
            if self.rows.finished:  # the outer profile ended first (the inner ran in a thread)
                return
            absorb_rows(self.rows.tables, self.rows.clocks, child)
            self.memory.absorb(memory)


def _forked() -> None:
    """In a child made by ``os.fork()``: each recorder still recording starts over there."""
    fork_ns = now()
    for rec in list(_live):
        if not rec.rows.finished:
            rec._after_fork_in_child(fork_ns)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)
