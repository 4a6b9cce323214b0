"""The harvest's route for activity records delivered one by one (``DeviceRecord``s, from
``recording/activity.py``'s ``deliver``): already complete, each is placed by its device's offset from the device clock to the host clock, found once per
device (``activity_align``, else the profile's start); a record whose fields are not what
``DeviceRecord`` says is kept unresolved, with the reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kprof_core.data.records import COPY, KERNEL, PLACED, UNRESOLVED, DeviceClock
from kprof_core.data.values import VALUE_LIMIT, bad_value, is_time, name_of
from kprof_core.host.backend import Alignment, Backend
from kprof_core.low_level.layout import A_QUEUE, A_RECORD, A_SLOT, A_WHO
from kprof_core.recording.configs import TEXT
from kprof_core.recording.placement import checked_alignment
from kprof_core.recording.sites import raw_site

if TYPE_CHECKING:
    from kprof_core.recording.tables import Tables


class Delivered:
    """Where each device's delivered records lie on the host clock: its offset from the
    device clock, found once per device, and how it was found."""

    def __init__(self, tables: Tables) -> None:
        self.tables = tables
        #: Device key -> the offset from its clock to the host clock.
        self.offsets: dict[str, int] = {}
        #: Device key -> how its records were placed (merged into the profile's clocks).
        self.clocks: dict[str, DeviceClock] = {}

    def take_activity(self, entry: tuple[Any, ...]) -> None:
        """A row of a delivered record (an activity entry): already complete, placed by its
        device's offset (its times are on the device clock). A record whose fields are not what
        ``DeviceRecord`` says (int times within ±2**59 ns, the end not before the begin) is kept
        unresolved, at the profile's start, with the reason."""
        t = self.tables
        r = entry[A_RECORD]
        self.take_row(
            t.by_slot[entry[A_SLOT]],
            t.live_queues.get(entry[A_QUEUE]),
            entry[A_WHO],
            name_of(getattr(r, "name", "?")),
            getattr(r, "kind", None),
            getattr(r, "begin", None),
            getattr(r, "end", None),
            getattr(r, "nbytes", -1),
            getattr(r, "launch_begin", 0),
            getattr(r, "launch_end", 0),
            r.detail if getattr(r, "detail", None) else None,
            config=getattr(r, "config", None),
            site=getattr(r, "site", -1),
        )

    def take_row(
        self,
        backend: Backend,
        queue: Any,
        who: Any,
        name: str,
        kind: Any,
        begin: Any,
        end: Any,
        nbytes: Any,
        launch_begin: Any,
        launch_end: Any,
        detail: Any,
        error: str | None = None,
        qid: int | None = None,
        config: Any = None,
        site: Any = -1,
    ) -> None:
        """One delivered row, checked: the rule for a ``DeviceRecord``, and for a row of a batch
        delivered column-wise whose values are not all sane (``harvest_activity``), so both ways
        give the same rows. ``error``: a problem the caller found already (an index past its
        list), and ``qid`` the queue it then puts the row on; ``config``: the launch
        configuration's text, or None; ``site``: the launch's raw site id (``launch_site()``), or
        -1 (an id that is not one is taken as -1, ``raw_site``)."""
        t = self.tables
        kind = kind if kind in (KERNEL, COPY) and type(kind) is int else KERNEL
        if qid is None:
            qid = t.queue_id(backend, queue)
        if error is None:
            error = value_problem(begin, end, launch_begin, launch_end, nbytes)
        if error is None:
            error, start, h0, h1 = self._placed(
                backend, queue, qid, begin, launch_begin, launch_end
            )
        if error is not None:
            s = t.start_ns
            row = t.table.append(
                t.names(name), kind, qid, t.thread_id(who), s, s, s, 0, -1, PLACED | UNRESOLVED
            )
            t.errors[row] = error
            return
        # A copy has no launch configuration.
        cfg = -1 if config is None or kind == COPY else t.configs.intern(TEXT, str(config))
        row = t.table.append(
            t.names(name), kind, qid, t.thread_id(who), h0, h1, start, end - begin, nbytes, PLACED
        )
        t.table.config[row] = cfg
        t.table.site[row] = raw_site(site)
        if detail:
            t.details[row] = str(detail)

    def _placed(
        self,
        backend: Backend,
        queue: Any,
        qid: int,
        begin: int,
        launch_begin: int,
        launch_end: int,
    ) -> tuple[str | None, int, int, int]:
        """Where a row with sane values lies on the host clock (its start and launch), or why it
        cannot be kept there."""
        t = self.tables
        dkey = t.queues[qid].device_key
        offset = self.offsets.get(dkey)
        if offset is None:
            offset = self.activity_offset(backend, queue, qid, dkey, begin, launch_begin)
        start = begin + offset
        h0 = launch_begin + offset if launch_begin else start
        h1 = launch_end + offset if launch_end else h0
        if not (is_time(start) and is_time(h0) and is_time(h1)):
            return bad_value("a device record placed at", (start, h0, h1)), 0, 0, 0
        return None, start, h0, h1

    def activity_offset(
        self, backend: Backend, queue: Any, qid: int, dkey: str, device_ns: int, launch_ns: int
    ) -> int:
        """Device ``dkey``'s offset to the host clock, found from its first record."""
        t = self.tables
        alignment: Alignment | None = None
        try:
            alignment = backend.activity_align(backend, queue, device_ns)
            checked_alignment("activity_align", alignment)
        except Exception as exc:
            self.tables.problems.hook_failed(backend, "activity_align", exc, disable=False)
            alignment = None
        q = t.queues[qid]
        if alignment is not None:
            offset = alignment.host_ns - device_ns
            clock = DeviceClock(q.backend, q.device, alignment.method, alignment.error_ns)
        else:
            # The first record's launch (or, unknown, its work) at the profile's start.
            offset = t.start_ns - (launch_ns or device_ns)
            clock = DeviceClock(
                q.backend,
                q.device,
                "no clock correlation: the first device record is placed at the profile's start",
                None,
            )
        self.offsets[dkey] = offset
        self.clocks[dkey] = clock
        return offset


def value_problem(
    begin: Any, end: Any, launch_begin: Any, launch_end: Any, nbytes: Any
) -> str | None:
    """Why a delivered row's values cannot be kept, or None."""
    if not all(map(is_time, (begin, end, launch_begin, launch_end))) or end < begin:
        return bad_value(
            "a device record's times (begin, end, launch_begin, launch_end)",
            (begin, end, launch_begin, launch_end),
        )
    if type(nbytes) is not int or not -1 <= nbytes < VALUE_LIMIT:
        return bad_value("a device record's byte count", nbytes)
    return None
