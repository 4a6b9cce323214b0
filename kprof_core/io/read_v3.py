"""The reader of format version 3: version 2 (or 1) with launch sites (``fileformat.py``).
The sites (the header's ``sites``, a ``site`` column in each table) are checked and taken off,
and the rest is read by ``read_v2`` or ``read_v1`` as the file it is."""

from __future__ import annotations

import json
import zlib
from typing import Any, TypeVar

from kprof_core.data.profile_data import ProfileData
from kprof_core.data.sites import Site
from kprof_core.io.filecheck import Checker
from kprof_core.io.fileformat import V1_FRAME, CorruptProfileError
from kprof_core.io.read_v1 import _decode, read_header, read_v1
from kprof_core.io.read_v2 import read_v2

P = TypeVar("P", bound=ProfileData)


def read_v3(data: bytes, pos: int, name: str, cls: type[P]) -> P:
    r = Checker(name, CorruptProfileError)
    header, at = read_header(data, pos, r)
    sites = [
        Site(f, line, fn)
        for f, line, fn in r.rows(header.pop("sites", []), "sites", (str, int, str))
    ]
    if any(s.line < 0 for s in sites):
        raise r.fail("a launch site has a negative line")
    kept: list[Any] = []
    blobs: list[bytes] = []
    site_cols: dict[str, tuple[dict[str, Any], bytes]] = {}
    for c in r.get(header, "columns", list):
        size = r.get(c, "size", int) if isinstance(c, dict) else -1
        if size < 0 or at + size > len(data):
            raise CorruptProfileError(f"{name}: truncated kprof file (it ends inside a column)")
        blob = data[at : at + size]
        at += size
        if c.get("name") == "site" and c.get("table") in ("device", "host"):
            if c["table"] in site_cols:
                raise r.fail(f"column {c['table']}.site is listed twice")
            site_cols[c["table"]] = (c, blob)
        else:
            kept.append(c)
            blobs.append(blob)
    if at != len(data):
        raise r.fail(f"{len(data) - at} unexpected bytes after the last column")
    if set(site_cols) != {"device", "host"}:
        raise r.fail("the header does not list a site column for each table")
    # What version 2 (or 1) holds, as that file: the header without the sites, their columns out.
    header["columns"] = kept
    h = json.dumps(header, allow_nan=False, separators=(",", ":")).encode("ascii")
    inner = V1_FRAME.pack(len(h), zlib.crc32(h)) + h + b"".join(blobs)
    p = (read_v2 if "memory" in header else read_v1)(inner, 0, name, cls)
    for table, (c, blob) in site_cols.items():
        what = f"{table}.site"
        if zlib.crc32(blob) != c.get("crc32"):
            raise r.fail(f"column {what} checksum mismatch")
        rows = len(p.table) if table == "device" else len(p.host)
        encoding = c.get("encoding")
        col = _decode(r, blob, encoding if isinstance(encoding, str) else "", rows, what)
        r.between(col, -1, len(sites) - 1, what)  # -1: no site known
        (p.table if table == "device" else p.host).site = col
    p.sites = sites
    return p
