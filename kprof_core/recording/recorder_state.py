"""The recorder's state: what its parts share (``recorder_ranges.py``, ``recorder_end.py``,
``recorder.py``'s launch path), the one way into its pending list (``_append``) and
back-pressure.

``Recorder`` (``recorder.py``) is the one class plugins and the profiler see; its parts are
split by the data's way (launches in, ranges, the end) over this base, and use only what it
defines here and the ``Harvest``'s public methods (``rows``).
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from kprof_core.data.records import DeviceClock
from kprof_core.data.sites import Site
from kprof_core.host.backend import Backend
from kprof_core.recording.bounds import Bounds
from kprof_core.recording.harvest import Harvest
from kprof_core.recording.memory_log import MemoryLog
from kprof_core.recording.sites import Skipper, plugin_prefixes

if TYPE_CHECKING:
    from collections.abc import Sequence

    from kprof_core.recording.recorder import Recorder

# The host clock every kprof time is on.
now = time.perf_counter_ns

_ACTIVE: ContextVar[Recorder | None] = ContextVar("kprof_active_recorder", default=None)
#: The recorder of the calling context, or None outside a profile. Plugins' capture wrappers
#: call this first and call straight through when it returns None.
active = _ACTIVE.get

#: Recorders of profiles not finished yet: reset in a forked child (``recorder._forked``).
_live: weakref.WeakSet[Recorder] = weakref.WeakSet()


class RecorderState:
    """What one profile's recorder holds, and the pending list's one way in.

    The record side (pending entries, the tables they become) is its ``rows``, a
    :class:`Harvest` used through its public methods.
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
        #: The ``kprof.range`` blocks entered and not yet exited: id(frame) -> frame, a tuple (name, t0,
        #: begun, thread, recorder), t0 being the host range's start, taken before the
        #: timestamps. A range's exit takes its frame out; the profile's end takes what is left
        #: and records it up to the end (``_cut_open_ranges``).
        self.open_ranges: dict[int, tuple[Any, ...]] = {}
        #: In a child made by ``os.fork()``: the open ranges begun before the fork, id(frame)
        #: -> the fork's time, where the child's part of each begins (host only).
        self.forked_ranges: dict[int, int] = {}
        #: How many times this process was forked inside the profile (counted in the child):
        #: a ``kprof.kernel`` call that began before a fork leaves no row in the child.
        self.forks = 0
        #: Allocations and frees the backends report (``kprof.plugin.allocated``/``freed``).
        self.memory = MemoryLog(self.backends)
        self._native: Any = None  # the compiled launch path, where bound (recorder.py)
        self._stamped: frozenset[Backend] = frozenset()  # set with it (recorder.py)

    def _new_rows(self) -> None:
        """A new record side (``Harvest``), its objects bound here too."""
        h = self.rows = Harvest(self.backends, self.timeout)
        t = h.tables
        # The harvest's own objects (never rebound there), bound here too: the launch path
        # reaches them in one lookup, and a profile reads its tables from the recorder.
        self._incoming = h.incoming
        self._live_queues = t.live_queues
        self._release = h.tokens.release
        self._hook_failed = h.problems.hook_failed
        self.table, self.host, self.names = t.table, t.host, t.names
        self.queues, self.threads = t.queues, t.threads
        self.errors, self.details, self.clocks = t.errors, t.details, h.clocks

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

    @property
    def activity_clocks(self) -> dict[str, DeviceClock]:
        """Per device, how its activity records were placed on the host clock."""
        return self.rows.delivered.clocks

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

    # -- back-pressure ----------------------------------------------------------------------------

    def _pressure(self) -> None:
        """Enough entries are pending: harvest what is done; past ``max_pending``, wait."""
        incoming = self._incoming
        n = len(incoming)
        if n > self.pending_high_water:
            self.pending_high_water = n
        if self.rows.lock.held_here():
            # A signal handler (kprof.mark, a launch) interrupted this thread's own harvest:
            # waiting here would wait on ourselves. The entry is in; the harvest goes on after.
            return
        if not self._closed:
            self.rows.harvest(wait=False)
            # Still too far behind: wait for the oldest work, which bounds live device tokens.
            while len(incoming) > self.max_pending and not self._closed:
                self.rows.harvest(wait=True, limit=len(incoming) - self.max_pending // 2)
            if self.bounds is not None:
                self._bound()
            # When nothing was done, try again only after another harvest_every launches.
            self._set_next_harvest(min(len(incoming) + self.harvest_every, self.max_pending))
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


def _forked() -> None:
    """In a child made by ``os.fork()``: each recorder still recording starts over there."""
    fork_ns = now()
    for rec in list(_live):
        if not rec.rows.finished:
            rec._after_fork_in_child(fork_ns)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)
