"""The recorder: what runs on the user's threads while a profile is active, and its end.

The launch path (here) appends one tuple to a list (thread-safe, no lock) and returns; the
entries become rows in ``harvest.py`` and are placed on the host clock in ``placement.py``.
Where the compiled recorder is built (``native.py``), its common case runs in C
(``_crecorder.c``). ``Recorder``'s other parts: ranges and marks (``recorder_ranges.py``), the
end and nesting (``recorder_end.py``), over the state they share (``recorder_state.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kprof_core.data.records import APPROXIMATE, COPY, HOST_TIMED, KERNEL, RANGE, DeviceClock
from kprof_core.host.backend import Backend
from kprof_core.low_level import native
from kprof_core.low_level.layout import (
    ENTRY_ACTIVITY,
    ENTRY_ACTIVITY_COLUMNS,
    ENTRY_HOST_LAUNCH,
    host_entry,
)
from kprof_core.recording import threads
from kprof_core.recording.bounds import Bounds
from kprof_core.recording.memory_log import MemoryLog
from kprof_core.recording.recorder_end import RecorderEnd
from kprof_core.recording.recorder_ranges import RecorderRanges
from kprof_core.recording.recorder_state import _live, active, now
from kprof_core.recording.sites import NoCatcher
from kprof_core.recording.sites import catcher as site_catcher
from kprof_core.recording.threads import _running_loop, _tls, thread_key
from kprof_core.recording.threads import who as _who

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["COPY", "KERNEL", "RANGE", "DeviceClock", "Recorder", "active", "now"]


class Recorder(RecorderRanges, RecorderEnd):
    """Collects what one ``kprof.profile()`` captures.

    Plugins call :meth:`launch`; everything else is kprof's. Thread-safe: any number of
    threads may launch while one of them harvests. The record side (pending entries, the
    tables they become) is its ``rows``, a ``Harvest`` used through its public methods.
    """

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
        super().__init__(
            backends,
            device=device,
            synchronize=synchronize,
            timeout=timeout,
            parent=parent,
            sites=sites,
            site_skip=site_skip,
            stacks=stacks,
            bounds=bounds,
        )
        self._bind_launch_path()
        _live.add(self)

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
        start_ns = self.rows.start_ns
        self._new_rows()
        self.rows.start_ns = start_ns
        me = thread_key()
        for key, frame in list(self.open_ranges.items()):
            who = frame[3]
            if (who[0] if isinstance(who, tuple) else who) != me:
                del self.open_ranges[key]
        # The frames stay (their ids must stay unique while they are open); their part in
        # the child starts at the fork (annotations.range.__exit__, _cut_open_ranges).
        self.forked_ranges = dict.fromkeys(self.open_ranges, fork_ns)
        self.forks += 1
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
        if getattr(self, "_native", None) is not None:
            # Ranges entered on the old path exit by the Python one (_range.c's rule: a path
            # with a plan is its recorder's current one).
            self._native.range_plan = None
        self._native: Any = None
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
        self._native.open_ranges = self.open_ranges
        self._native.forked_ranges = self.forked_ranges
        self._native.range_plan = self._range_plan()

    def _range_plan(self) -> tuple[tuple[Backend, Any, Any, int], ...] | None:
        """What ``kprof.range``'s compiled path (``_range.c``) asks of each backend: its
        ``current_queue`` and its ``record_timestamp`` (None where it has no timestamps), and
        its slot; None where every range takes the Python path: no device times, synchronized,
        closed, or a backend mirroring ranges to its vendor tool."""
        if not self.device or self.synchronize or self._closed:
            return None
        if any(b.mirrors_ranges for b in self.backends):
            return None
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
                    if b.has_timestamps
                    else None,
                    b.slot,
                )
                for b in self.backends
            ]
        )

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
        if len(self._incoming) >= self._next_harvest and not self._closed:
            n = len(self._incoming)
            if n > self.pending_high_water:
                self.pending_high_water = n
            self.rows.harvest(wait=False)
