"""Hostile ``.kprof`` files: valid framing and checksums around content a crafted file (or a
buggy writer) could hold. See tests/test_reliability_files.py."""

from __future__ import annotations

import functools
import json
import struct
import zlib
from collections.abc import Callable, Iterable
from typing import Any

from kprof_core.io import fileformat, storage
from kprof_core.io.read_v5 import V5_COLUMNS

#: A kernel name that, written raw, retitles the terminal (OSC 0), clears it, forges a pytest
#: result line after a CR LF, and reverses what follows (a bidirectional override).
EVIL_NAME = "k\x1b]0;pwned\x07\x1b[2J\r\n1 failed, 0 passed\u202e"


def split(blob: bytes) -> tuple[dict[str, Any], list[bytes]]:
    """A file's header and its columns' stored bytes, in header order."""
    hlen, _crc = struct.unpack_from("<II", blob, 12)
    header = json.loads(blob[20 : 20 + hlen])
    pos, stored = 20 + hlen, []
    for c in header["columns"]:
        stored.append(blob[pos : pos + c["size"]])
        pos += c["size"]
    return header, stored


_DEEP: dict[str, int] = {}


def deep(depth: int) -> str:
    """A value that ``assemble`` writes as ``depth`` nested JSON lists (too deep for json.dumps)."""
    key = f"\x00deep{depth}\x00"
    _DEEP[key] = depth
    return key


def literal(text: str) -> str:
    """A value that ``assemble`` writes as the JSON text ``text`` as it is (``1e400``, which
    json.dumps cannot write)."""
    key = f"\x00literal{len(_LITERAL)}\x00"
    _LITERAL[key] = text
    return key


_LITERAL: dict[str, str] = {}


def assemble(header: dict[str, Any], stored: Iterable[bytes]) -> bytes:
    """A file from a header and stored column bytes; sizes and checksums made consistent."""
    stored = list(stored)
    for c, b in zip(header["columns"], stored):
        c["size"], c["crc32"] = len(b), zlib.crc32(b)
    text = json.dumps(header)
    for key, depth in _DEEP.items():
        text = text.replace(json.dumps(key), "[" * depth + "1" + "]" * depth)
    for key, raw in _LITERAL.items():
        text = text.replace(json.dumps(key), raw)
    h = text.encode("ascii")
    # Version 5 when the tables carry their later columns (sites, stacks...), else 1.
    names = {c.get("name") for c in header["columns"]}
    version = 5 if names & {"site", "stack", "config"} else 1
    return (
        storage.MAGIC + struct.pack("<III", version, len(h), zlib.crc32(h)) + h + b"".join(stored)
    )


def with_header(blob: bytes, edit: Callable[[dict[str, Any]], Any]) -> bytes:
    header, stored = split(blob)
    edit(header)
    return assemble(header, stored)


def encode(values: Iterable[int], compress: bool) -> tuple[str, bytes]:
    raw = struct.pack(f"<{len(list(values))}q", *values)
    return ("shuffle8+zlib", zlib.compress(fileformat.shuffle(raw))) if compress else ("raw", raw)


def with_column(
    blob: bytes, table: str, name: str, values: list[int], compress: bool = True
) -> bytes:
    """Replace one column's values (same row count), stored as a writer would."""
    header, stored = split(blob)
    for k, c in enumerate(header["columns"]):
        if (c["table"], c["name"]) == (table, name):
            c["encoding"], stored[k] = encode(values, compress)
    return assemble(header, stored)


def not_files(path: Any) -> dict[str, tuple[Any, str]]:
    """Paths under ``path`` named like profiles that are not regular files, as a baseline
    directory in a pull request could hold them (git stores symlinks), with what kprof must
    call each: a FIFO (reading blocks), a symlink to /dev/zero (endless), a directory."""
    import os

    fifo, zero, folder = path / "fifo.kprof", path / "zero.kprof", path / "dir.kprof"
    os.mkfifo(fifo)
    os.symlink("/dev/zero", zero)
    folder.mkdir()
    return {
        "fifo": (fifo, "is a FIFO (named pipe)"),
        "zero": (zero, "is a character device"),
        "dir": (folder, "is a directory"),
    }


@functools.cache
def zeros_stream(nbytes: int) -> bytes:
    """``nbytes`` zero bytes, deflated (about a thousandth of the size), made in 1 MB steps."""
    z = zlib.compressobj(9)
    chunk = bytes(1 << 20)
    out = [z.compress(chunk) for _ in range(nbytes >> 20)]
    return b"".join(out) + z.flush()


def bomb(inflated: int, declared_rows: int | None = None) -> bytes:
    """An empty-looking profile whose every column inflates to ``inflated`` bytes.

    ``declared_rows`` None: the header declares no rows (the stream holds far more than it
    says); else that many rows in both tables (consistent, but far more than the file's size
    could honestly hold).
    """
    rows = 0 if declared_rows is None else declared_rows
    header: dict[str, Any] = {
        "meta": {},
        "trace": False,
        "backends": [],
        "start_ns": 0,
        "end_ns": 0,
        "names": ["k"],
        "queues": [["b", "d", "q", "k"]],
        "threads": [[1, "MainThread", None]],
        "errors": [],
        "clocks": [],
        "configs": [],
        "sites": [],
        "frames": [],
        "stacks": [],
        "memory": {"devices": [], "sites": []},
        "counts": {"device": rows, "host": rows, "memory": 0},
        "columns": [
            {"table": t, "name": c, "encoding": "shuffle8+zlib"}
            for t, cols in V5_COLUMNS.items()
            for c in cols
        ],
    }
    stream = zeros_stream(inflated)
    return assemble(header, [stream] * len(header["columns"]))
