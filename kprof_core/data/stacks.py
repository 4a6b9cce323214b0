"""Launch stacks: the Python call stack behind a record, as views read it (``frames_of``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

from kprof_core.data.records import DeviceTable, HostTable
from kprof_core.data.sites import Site

#: A stack as views read it: its frames, outermost first.
Stack = tuple[Site, ...]


class Records(Protocol):
    """What the readers of a profile's rows take (``ProfileData`` is one): the two tables and
    the lists their columns index. Defined here, below the profile, so that its readers do not
    import the profile they are called by."""

    @property
    def table(self) -> DeviceTable: ...

    @property
    def host(self) -> HostTable: ...

    @property
    def names(self) -> Sequence[str]: ...

    @property
    def sites(self) -> Sequence[Site]: ...

    @property
    def stacks(self) -> Sequence[Stack]: ...


def frames_of(data: Records, table: Literal["device", "host"], row: int) -> Stack:
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
