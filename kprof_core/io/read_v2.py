"""The reader of format version 2: version 1 followed by the device-memory table
(``fileformat.py``). The memory part is checked and taken off, and the rest is read by
``read_v1`` as the version 1 file it is (one reader of those fields, not two)."""

from __future__ import annotations

import json
import zlib
from typing import TypeVar

from kprof_core.data.memory import MEMORY_KINDS, STRIDE, Memory, MemoryTable
from kprof_core.data.profile_data import ProfileData
from kprof_core.io.filecheck import TIME_LIMIT, Checker
from kprof_core.io.fileformat import V1_FRAME, CorruptProfileError
from kprof_core.io.read_v1 import _decode, read_header, read_v1

P = TypeVar("P", bound=ProfileData)


def read_v2(data: bytes, pos: int, name: str, cls: type[P]) -> P:
    r = Checker(name, CorruptProfileError)
    header, body = read_header(data, pos, r)
    mem = r.get(header, "memory", dict)
    counts = r.get(header, "counts", dict)
    n = r.get(counts, "memory", int)
    columns = r.get(header, "columns", list)
    k = len(MemoryTable.COLUMNS)
    ours = columns[-k:]
    if n < 0 or [c.get("table") if isinstance(c, dict) else None for c in ours] != ["memory"] * k:
        raise r.fail("the memory columns are not the last ones listed")
    if [c.get("name") for c in ours] != list(MemoryTable.COLUMNS):
        raise r.fail("the header does not list exactly the memory columns")
    sizes = [r.get(c, "size", int) for c in ours]
    if any(s < 0 for s in sizes) or sum(sizes) > len(data) - body:
        raise CorruptProfileError(f"{name}: truncated kprof file (it ends inside a column)")
    r.inflation(n * STRIDE * 8, len(data))
    devices = r.rows(mem.get("devices"), "memory.devices", (str, str))
    sites = r.get(mem, "sites", list)
    if not all(isinstance(s, str) for s in sites):
        raise r.fail("header field 'memory.sites' holds a non-string")

    # What version 1 holds, as a version 1 file: the header without the memory part, the
    # columns before the memory ones.
    tail = len(data) - sum(sizes)
    del header["memory"], counts["memory"]
    header["columns"] = columns[:-k]
    h1 = json.dumps(header, allow_nan=False, separators=(",", ":")).encode("ascii")
    p = read_v1(V1_FRAME.pack(len(h1), zlib.crc32(h1)) + h1 + data[body:tail], 0, name, cls)

    table, at = MemoryTable(), tail
    for c, size in zip(ours, sizes):
        blob = data[at : at + size]
        at += size
        what = f"memory.{c['name']}"
        if zlib.crc32(blob) != c.get("crc32"):
            raise r.fail(f"column {what} checksum mismatch")
        encoding = c.get("encoding")
        setattr(
            table,
            c["name"],
            _decode(r, blob, encoding if isinstance(encoding, str) else "", n, what),
        )
    r.between(table.time, -TIME_LIMIT, TIME_LIMIT - 1, "memory.time")
    r.index(table.device, len(devices), "memory device")
    r.between(table.kind, min(MEMORY_KINDS), max(MEMORY_KINDS), "memory.kind")
    r.between(table.nbytes, -1, 2**63 - 1, "memory.nbytes")
    r.between(table.site, -1, len(sites) - 1, "memory.site")
    p.memory = Memory(table, [(b, d) for b, d in devices], list(sites), p.start_ns)
    return p
