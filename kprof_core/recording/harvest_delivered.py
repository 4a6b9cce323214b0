"""The harvest's route for activity records delivered one by one (``DeviceRecord``s, from
``recording/activity.py``'s ``deliver``): already complete, each is placed by its device's offset from the device clock to the host clock, found once per
device (``activity_align``, else the profile's start); a record whose fields are not what
``DeviceRecord`` says is kept unresolved, with the reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kprof_core.data.records import COPY, KERNEL, PLACED, UNRESOLVED
from kprof_core.data.values import VALUE_LIMIT, bad_value, is_time, name_of
from kprof_core.host.backend import Alignment, Backend
from kprof_core.low_level.layout import A_QUEUE, A_RECORD, A_SLOT, A_WHO
from kprof_core.recording.placement import DeviceClock, checked_alignment

if TYPE_CHECKING:
    from kprof_core.recording.harvest import Harvest


def take_activity(h: Harvest, entry: tuple[Any, ...]) -> None:
    """A row of a delivered record (an activity entry): already complete, placed by its
    device's offset (its times are on the device clock). A record whose fields are not what
    ``DeviceRecord`` says (int times within ±2**59 ns, the end not before the begin) is kept
    unresolved, at the profile's start, with the reason."""
    backend = h.by_slot[entry[A_SLOT]]
    queue = h.live_queues.get(entry[A_QUEUE])
    r = entry[A_RECORD]
    name = name_of(getattr(r, "name", "?"))
    kind = r.kind if getattr(r, "kind", None) in (KERNEL, COPY) else KERNEL
    begin: Any = getattr(r, "begin", None)
    end: Any = getattr(r, "end", None)
    launch_begin, launch_end = getattr(r, "launch_begin", 0), getattr(r, "launch_end", 0)
    nbytes = getattr(r, "nbytes", -1)
    qid = h.queue_id(backend, queue)
    error = None
    if not all(map(is_time, (begin, end, launch_begin, launch_end))) or end < begin:
        error = bad_value(
            "a device record's times (begin, end, launch_begin, launch_end)",
            (begin, end, launch_begin, launch_end),
        )
    elif type(nbytes) is not int or not -1 <= nbytes < VALUE_LIMIT:
        error = bad_value("a device record's byte count", nbytes)
    else:
        dkey = h.queues[qid].device_key
        offset = h.offsets.get(dkey)
        if offset is None:
            offset = activity_offset(h, backend, queue, qid, dkey, begin, launch_begin)
        start = begin + offset
        h0 = launch_begin + offset if launch_begin else start
        h1 = launch_end + offset if launch_end else h0
        if not (is_time(start) and is_time(h0) and is_time(h1)):
            error = bad_value("a device record placed at", (start, h0, h1))
    if error is not None:
        s = h.start_ns
        row = h.table.append(
            h.names(name),
            kind,
            qid,
            h.thread_id(entry[A_WHO]),
            s,
            s,
            s,
            0,
            -1,
            PLACED | UNRESOLVED,
        )
        h.errors[row] = error
        return
    row = h.table.append(
        h.names(name),
        kind,
        qid,
        h.thread_id(entry[A_WHO]),
        h0,
        h1,
        start,
        end - begin,
        nbytes,
        PLACED,
    )
    if r.detail:
        h.details[row] = str(r.detail)


def activity_offset(
    h: Harvest, backend: Backend, queue: Any, qid: int, dkey: str, device_ns: int, launch_ns: int
) -> int:
    alignment: Alignment | None = None
    try:
        alignment = backend.activity_align(backend, queue, device_ns)
        checked_alignment("activity_align", alignment)
    except Exception as exc:
        h.hook_failed(backend, "activity_align", exc, disable=False)
        alignment = None
    q = h.queues[qid]
    if alignment is not None:
        offset = alignment.host_ns - device_ns
        clock = DeviceClock(q.backend, q.device, alignment.method, alignment.error_ns)
    else:
        # The first record's launch (or, unknown, its work) at the profile's start.
        offset = h.start_ns - (launch_ns or device_ns)
        clock = DeviceClock(
            q.backend,
            q.device,
            "no clock correlation: the first device record is placed at the profile's start",
            None,
        )
    h.offsets[dkey] = offset
    h.activity_clocks[dkey] = clock
    return offset
