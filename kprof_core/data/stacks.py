"""Launch stacks: the Python call stack behind a record, as views read it (``frames_of``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from kprof_core.data.records import DeviceTable, HostTable
from kprof_core.data.sites import Site

if TYPE_CHECKING:
    from kprof_core.data.profile_data import ProfileData

#: A stack as views read it: its frames, outermost first.
Stack = tuple[Site, ...]


def frames_of(data: ProfileData, table: Literal["device", "host"], row: int) -> Stack:
    """The Python frames behind row ``row`` of ``data``'s ``table`` (``"device"``: ``data.table``,
    ``"host"``: ``data.host``), outermost first, the launch site last.

    With stacks recorded (``profile(stacks=True)``), the row's whole stack; with only its
    site known (``profile(sites=True)``), ``(site,)``; with neither, ``()``.
    """
    t: DeviceTable | HostTable
    if table == "device":
        t = data.table
    elif table == "host":
        t = data.host
    else:
        raise ValueError(f'frames_of(table=...) takes "device" or "host", not {table!r}')
    if t.stack:  # empty when no row has a stack
        sid = t.stack[row]
        if sid >= 0:
            return data.stacks[sid]
    s = t.site[row]
    return (data.sites[s],) if s >= 0 else ()
