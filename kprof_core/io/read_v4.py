"""The reader of format version 4: version 3 with launch stacks, and version 3, 2 or 1 with
launch configurations (``fileformat.py``). The stacks (the header's ``frames`` and ``stacks``,
a ``stack`` column in each table) and the configurations (the header's ``configs``, the device
table's ``config`` column) are checked and taken off, and the rest is read by the reader of
the version it then is, as that file."""

from __future__ import annotations

import json
import zlib
from array import array
from typing import Any, TypeVar

from kprof_core.data.profile_data import ProfileData
from kprof_core.data.records import STACK_TYPE
from kprof_core.data.sites import Site
from kprof_core.data.values import VALUE_LIMIT
from kprof_core.io.filecheck import Checker
from kprof_core.io.fileformat import V1_FRAME, V4_DEVICE_COLUMNS, CorruptProfileError
from kprof_core.io.read_v1 import _decode, read_header, read_v1
from kprof_core.io.read_v2 import read_v2
from kprof_core.io.read_v3 import read_v3

P = TypeVar("P", bound=ProfileData)


def read_v4(data: bytes, pos: int, name: str, cls: type[P]) -> P:
    r = Checker(name, CorruptProfileError)
    header, at = read_header(data, pos, r)
    frames = [
        Site(f, line, fn)
        for f, line, fn in r.rows(header.pop("frames", []), "frames", (str, int, str))
    ]
    if any(s.line < 0 for s in frames):
        raise r.fail("a stack frame has a negative line")
    raw_stacks = header.pop("stacks", [])
    if not isinstance(raw_stacks, list) or not all(
        isinstance(s, list) and s and all(type(i) is int and 0 <= i < len(frames) for i in s)
        for s in raw_stacks
    ):
        raise r.fail("header field 'stacks' is not a list of lists of frame indexes")
    stacks = tuple(tuple(frames[i] for i in s) for s in raw_stacks)
    configs = header.pop("configs", [])
    if not isinstance(configs, list) or not all(isinstance(c, str) for c in configs):
        raise r.fail("header field 'configs' is not a list of strings")
    kept: list[Any] = []
    blobs: list[bytes] = []
    stack_cols: dict[str, tuple[dict[str, Any], bytes]] = {}
    ours: dict[str, tuple[dict[str, Any], bytes]] = {}
    for c in r.get(header, "columns", list):
        size = r.get(c, "size", int) if isinstance(c, dict) else -1
        if size < 0 or at + size > len(data):
            raise CorruptProfileError(f"{name}: truncated kprof file (it ends inside a column)")
        blob = data[at : at + size]
        at += size
        if c.get("name") == "stack" and c.get("table") in ("device", "host"):
            if c["table"] in stack_cols:
                raise r.fail(f"column {c['table']}.stack is listed twice")
            stack_cols[c["table"]] = (c, blob)
        elif c.get("table") == "device" and c.get("name") in V4_DEVICE_COLUMNS:
            if c["name"] in ours:
                raise r.fail(f"column device.{c['name']} is listed twice")
            ours[c["name"]] = (c, blob)
        else:
            kept.append(c)
            blobs.append(blob)
    if at != len(data):
        raise r.fail(f"{len(data) - at} unexpected bytes after the last column")
    if set(stack_cols) not in ({"device", "host"}, set()) or (stacks and not stack_cols):
        raise r.fail("the header does not list a stack column for each table")
    # (A file may list only some of V4_DEVICE_COLUMNS: the others are -1, as in older files.)
    if not stack_cols and not ours:
        raise r.fail("the header lists neither stack nor configuration columns")
    # What version 3 (or 2, 1) holds, as that file: the header without ours, our columns out.
    header["columns"] = kept
    h = json.dumps(header, allow_nan=False, separators=(",", ":")).encode("ascii")
    inner = V1_FRAME.pack(len(h), zlib.crc32(h)) + h + b"".join(blobs)
    # The launch sites' columns (the memory table has a site column of its own).
    with_sites = any(
        isinstance(c, dict) and c.get("name") == "site" and c.get("table") in ("device", "host")
        for c in kept
    )
    reader = read_v3 if with_sites else read_v2 if "memory" in header else read_v1
    p = reader(inner, 0, name, cls)
    for table, (c, blob) in stack_cols.items():
        what = f"{table}.stack"
        if zlib.crc32(blob) != c.get("crc32"):
            raise r.fail(f"column {what} checksum mismatch")
        rows = len(p.table) if table == "device" else len(p.host)
        encoding = c.get("encoding")
        col = _decode(r, blob, encoding if isinstance(encoding, str) else "", rows, what)
        r.between(col, -1, len(stacks) - 1, what)  # -1: no stack known
        (p.table if table == "device" else p.host).stack = array(STACK_TYPE, col)
    p.stacks = stacks
    for col_name, (c, blob) in ours.items():
        what = f"device.{col_name}"
        if zlib.crc32(blob) != c.get("crc32"):
            raise r.fail(f"column {what} checksum mismatch")
        encoding = c.get("encoding")
        col = _decode(r, blob, encoding if isinstance(encoding, str) else "", len(p.table), what)
        if col_name == "config":
            r.between(col, -1, len(configs) - 1, what)  # -1: no configuration
        else:
            r.between(col, -1, VALUE_LIMIT - 1, what)  # -1: not said
        setattr(p.table, col_name, col)
    p.configs = configs
    return p
