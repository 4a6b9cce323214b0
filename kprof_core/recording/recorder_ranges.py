"""The recorder's ranges: host ranges and marks (``kprof.range``, ``kprof.mark``) and the device
side of a range, its timestamps on every backend with a current queue (``annotations.py``
calls these on ``Recorder``)."""

from __future__ import annotations

import warnings
from itertools import compress
from typing import Any

from kprof_core.data.records import APPROXIMATE, HOST_TIMED, KERNEL, RANGE, HostTable
from kprof_core.host.backend import Backend
from kprof_core.low_level.layout import (
    ENTRY_ANNOTATE,
    ENTRY_HOST_LAUNCH,
    ENTRY_HOST_RANGE,
    ENTRY_MARK,
    WITH_HOST,
    host_entry,
)
from kprof_core.recording.recorder_state import RecorderState, now
from kprof_core.recording.threads import who as _who


class RecorderRanges(RecorderState):
    """The host side (ranges, marks, host-only launches) and device ranges."""

    # -- the host side (kprof.range, kprof.mark) ----------------------------------------------

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
            if b in self._stamped:
                try:
                    tok = b.record_timestamp(b)
                except Exception as exc:
                    self._hook_failed(b, "record_timestamp", exc)
                    self._range_pop(b)  # keep the vendor tool's range stack balanced
                    continue
            if tok is None and self.synchronize:
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
        """Close what ``device_range_begin`` opened; host-time the backends without tokens.
        ``nbytes`` and ``flops``: what the user said the range's work moves and computes
        (``kprof.range(name, bytes=, flops=)``), -1 when not said. ``thread``: the key of the
        thread that entered the range (default: the calling thread's). With ``host`` the
        range's host side (``start_ns`` to the returned end) is recorded too: in the last
        device entry (``WITH_HOST``), else in a host entry of its own.

        ``start_ns`` must be taken before ``device_range_begin``: no work of the range can
        start on the device before it (placement relies on that). Returns the range's host end,
        taken after the last stop timestamp was put, so that the host interval encloses every
        call that put the range's timestamps (a slow ``record_timestamp`` is part of what the
        block cost the thread).
        """
        who = _who() if thread is None else thread
        site = self._site()
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
        end_ns = now()
        last = len(stops) - 1
        incoming = self._incoming
        for i, (b, q, tok, stop) in enumerate(stops):
            flags = 0
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

    def cut_range_exits(self, frame: tuple[Any, ...]) -> None:
        """A range that the profile recorded as cut at its end (see ``open_ranges``) exits:
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


def queueless_notes(rec: RecorderRanges) -> list[str]:
    """Why some ranges have no device time on a backend that did device work in the profile:
    counted at the end from the tables (host ranges of a name minus that backend's device
    ranges of it), so that entering a range costs nothing more. The usual cause is a range
    entered before the thread had a current queue (OpenCL: before its first launch)."""
    if not rec.device:
        return []
    table, host = rec.table, rec.host
    entered: dict[int, int] = {}
    for kind, name in zip(host.kind, host.name):
        if kind == HostTable.RANGE:
            entered[name] = entered.get(name, 0) + 1
    if not entered:  # no range: no scan of the (maybe million-row) device table
        return []
    timed = {b.name for b in rec.backends if b.has_timestamps}
    used = {rec.queues[q].backend for q in set(table.queue) if q >= 0}
    if not used & timed:
        return []
    device: dict[tuple[str, int], int] = {}
    # Only the range rows reach Python: the kind test runs in C (map, compress).
    for q, name in compress(zip(table.queue, table.name), map(RANGE.__eq__, table.kind)):
        if q >= 0:
            key = (rec.queues[q].backend, name)
            device[key] = device.get(key, 0) + 1
    notes = []
    for backend in sorted(used & timed):
        for name, n in sorted(entered.items()):
            missing = n - device.get((backend, name), 0)
            if missing > 0:
                label = rec.names.values[name]
                notes.append(
                    f"{missing} of {n} {label!r} ranges have no span on {backend} (their "
                    "device time, their work's, is counted): entered where the thread had no "
                    "current queue (OpenCL learns it from the thread's first launch, or "
                    "kprof_opencl.use_queue(q); HIP from kprof_hip.use_stream(s))"
                )
    return notes
