"""The recorder's end: a profile's pending work resolved within its timeout (or abandoned),
ranges still open cut at the end, and a nested profile's rows taken by the outer one."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

from kprof_core import _clock
from kprof_core.data.records import PLACED, DeviceTable, HostTable, Recording
from kprof_core.low_level.layout import ENTRY_HOST_RANGE, host_entry
from kprof_core.recording import threads
from kprof_core.recording.configs import TEXT
from kprof_core.recording.configs import resolve as resolve_configs
from kprof_core.recording.recorder_state import RecorderState, _live, now
from kprof_core.recording.sites import raw_of as raw_site
from kprof_core.recording.sites import raw_of_stack, resolve_tables
from kprof_core.recording.throughput import apply_names

if TYPE_CHECKING:
    from kprof_core.host.backend import Backend
    from kprof_core.recording.recorder import Recorder


class RecorderEnd(RecorderState):
    """How a profile's recording ends, and nesting."""

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
        return Recording(
            table=self.table,
            host=self.host,
            names=self.names.values,
            queues=self.queues,
            threads=self.threads,
            sites=self.sites,
            configs=self.configs,
            stacks=self.stacks,
            errors=self.errors,
            details=self.details,
            clocks=self.clocks,
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
        if self.bounds is not None:  # before placing: only what is kept is placed
            self.bounds.apply(self.table, self.errors, self.details, end=True)
        self.rows.finished = True
        self.rows.drop_late()
        try:
            self.rows.end(deadline)
        finally:
            # Launch sites to text, once per distinct raw site: the columns then index them.
            self.sites, self.stacks = resolve_tables(self.table, self.host)
            # The compiled catcher keeps the frames of the last stack it walked (to stop the
            # next walk early): let them go with the profile.
            forget = getattr(getattr(self, "_sites", None), "forget", None)
            if forget is not None:
                forget()
            # Launch configurations to text, once per distinct value (configs.py).
            t, tables = self.table, self.rows.tables
            self.configs, t.config = resolve_configs(
                tables.configs, t.config, tables.by_slot, self._config_failed
            )
            apply_names(t, self.names.values)  # kprof.annotate("name", ...)
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
        cut: list[str] = []
        while self.open_ranges:
            key, frame = self.open_ranges.popitem()
            name, h0, begun, who, _rec = frame
            cut.append(name)
            since = self.forked_ranges.pop(key, None)
            if since is not None:
                # Begun before an os.fork() (this is the child): its part from the fork; its
                # timestamps are the parent's, not given back here.
                h0, begun = since, None
            for b, _q, tok in begun or ():
                self._release(b, tok, None)
            self.rows.take(host_entry(ENTRY_HOST_RANGE, name, who, h0, max(h0, end_ns)), None)
        if cut:
            shown = ", ".join(repr(n) for n in sorted(set(cut))[:5])
            warnings.warn(
                f"kprof: {len(cut)} range{'s were' if len(cut) > 1 else ' was'} still "
                f"open when the profile ended ({shown}): recorded on the host up to "
                f"the profile's end, without device time",
                RuntimeWarning,
                stacklevel=4,
            )

    # -- nesting ----------------------------------------------------------------------------------

    def absorb(self, child: Recorder) -> None:
        """Take a finished nested profile's rows, so the outer profile has them too."""
        with self.rows.lock:
            if self.rows.finished:  # the outer profile ended first (the inner ran in a thread)
                return
            tables = self.rows.tables
            qmap = [tables.intern_queue(q) for q in child.queues]
            tmap = [tables.intern_thread(th) for th in child.threads]
            nmap = [self.names(n) for n in child.names.values]
            # The child's sites are resolved: they join this table as raw ids again.
            smap = {i: raw_site(s) for i, s in enumerate(child.sites)}
            smap[-1] = -1
            # The child's configurations are text: interned as text here.
            cmap = [tables.configs.intern(TEXT, c) for c in child.configs] + [-1]
            stmap = [raw_of_stack(st) for st in child.stacks]
            ct = child.table

            def raw(t: DeviceTable | HostTable, i: int) -> int:
                sid = t.stack[i] if t.stack else -1
                return stmap[sid] if sid >= 0 else smap[t.site[i]]

            for i in range(len(ct)):
                row = self.table.append(
                    nmap[ct.name[i]],
                    ct.kind[i],
                    qmap[ct.queue[i]],
                    tmap[ct.thread[i]],
                    ct.launch_start[i],
                    ct.launch_end[i],
                    ct.start[i],
                    ct.duration[i],
                    ct.nbytes[i],
                    ct.flags[i] | PLACED,
                    raw(ct, i),
                    cmap[ct.config[i]],
                    ct.flops[i],
                )
                if i in child.errors:
                    self.errors[row] = child.errors[i]
                if i in child.details:
                    self.details[row] = child.details[i]
            ch = child.host
            for i in range(len(ch)):
                self.host.append(
                    nmap[ch.name[i]],
                    ch.kind[i],
                    tmap[ch.thread[i]],
                    ch.start[i],
                    ch.end[i],
                    raw(ch, i),
                )
            for k, v in child.clocks.items():
                self.clocks.setdefault(k, v)
            self.memory.absorb(child.memory)
