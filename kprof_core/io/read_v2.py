"""The reader of format version 2: version 1 (``read_v1.py``) plus launch sites, a ``site``
column in both tables and the header's ``sites`` ([file, line, function] each) they index."""

from __future__ import annotations

from typing import TypeVar

from kprof_core.data.profile_data import ProfileData
from kprof_core.data.records import DeviceTable, HostTable
from kprof_core.data.sites import Site
from kprof_core.io.read_v1 import read_frame

P = TypeVar("P", bound=ProfileData)

V2_COLUMNS = {"device": DeviceTable.COLUMNS, "host": HostTable.COLUMNS}


def read_v2(data: bytes, pos: int, name: str, cls: type[P]) -> P:
    p, header, r = read_frame(data, pos, name, cls, V2_COLUMNS)
    rows = r.rows(header.get("sites", []), "sites", (str, int, str))
    sites = [Site(f, line, fn) for f, line, fn in rows]
    if any(s.line < 0 for s in sites):
        raise r.fail("a launch site has a negative line")
    for col, what in ((p.table.site, "device.site"), (p.host.site, "host.site")):
        r.between(col, -1, len(sites) - 1, what)  # -1: no site known
    p.sites = sites
    return p
