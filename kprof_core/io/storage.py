"""Saving and loading profiles as ``.kprof`` files (the format: ``fileformat.py``).

Loading parses JSON and copies integers; nothing in a file is ever executed (no pickle). Readers
are kept per format version (``READERS``), so files of older versions stay readable when the
format changes; a newer version is refused with a message saying to upgrade kprof.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import zlib
from array import array
from typing import Any, Protocol, TypeVar

from kprof_core.data.profile_data import ProfileData
from kprof_core.data.values import VALUE_LIMIT
from kprof_core.host.backend import KprofError
from kprof_core.io.filecheck import Checker
from kprof_core.io.fileformat import (
    FORMAT_VERSION,
    MAGIC,
    PREFIX,
    PRERELEASE_VERSIONS,
    RAW,
    SHUFFLED,
    V1_FRAME,
    CorruptProfileError,
    NotAProfileError,
    PathOrFile,
    ProfileFileError,
    UnsupportedVersionError,
    shuffle,
)
from kprof_core.io.read_v1 import V1_COLUMNS, read_v1
from kprof_core.io.read_v5 import V5_COLUMNS, read_v5

P = TypeVar("P", bound=ProfileData)

# -- writing ------------------------------------------------------------------------------------


def _le_bytes(col: array[int]) -> bytes:
    if sys.byteorder == "little":
        return col.tobytes()
    swapped = array("q", col)
    swapped.byteswap()
    return swapped.tobytes()


def _version(profile: ProfileData) -> int:
    """1 for a profile that holds nothing version 1 lacks (kprof 0.1.0 reads it), else 5."""
    extra = (
        profile.memory
        or profile.sites
        or profile.stacks
        or profile.configs
        or max(profile.table.flops, default=-1) >= 0
    )
    return 5 if extra else 1


def _columns(profile: ProfileData, version: int) -> list[tuple[str, str, array[int]]]:
    tables = V5_COLUMNS if version == 5 else V1_COLUMNS
    owners: dict[str, Any] = {
        "device": profile.table,
        "host": profile.host,
        "memory": profile.memory.table,
    }
    out = []
    for t, cols in tables.items():
        for c in cols:
            col = getattr(owners[t], c)
            if c == "stack":
                # Stored as int64, as every column (held as 32-bit ints: STACK_TYPE); a profile
                # without stacks holds none, stored as -1 (no stack) per row.
                rows = len(owners[t])
                col = array("q", col) if len(col) or not rows else array("q", (-1,)) * rows
            out.append((t, c, col))
    return out


def dumps(profile: ProfileData, compress: bool = True) -> bytes:
    """The profile as the bytes of a ``.kprof`` file (see ``fileformat.py``).

    What the loader would refuse is refused here (``KprofError``): a saved profile loads back.
    """
    ndev, nhost = len(profile.table), len(profile.host)
    check = Checker("", KprofError, saving=True)
    check.meta(profile.meta, len(profile.queues), len(profile.threads))
    check.time(profile.start_ns, "start_ns")
    if check.time(profile.end_ns, "end_ns") < profile.start_ns:
        raise check.fail("the profile ends before it starts (is it still running?)")
    blobs: list[bytes] = []
    columns: list[dict[str, Any]] = []
    nmem = len(profile.memory)
    version = _version(profile)
    for table, name, col in _columns(profile, version):
        expected = {"device": ndev, "host": nhost}.get(table, nmem)
        if len(col) != expected:
            raise KprofError(
                f"cannot save: column {table}.{name} has {len(col)} rows, expected {expected}"
            )
        if name == "site":  # the memory table's index its own sites (strings)
            sites = profile.memory.sites if table == "memory" else profile.sites
            check.between(col, -1, len(sites) - 1, f"{table}.site")
        if name == "stack":
            check.between(col, -1, len(profile.stacks) - 1, f"{table}.stack")
        if name == "config":
            check.between(col, -1, len(profile.configs) - 1, f"{table}.config")
        if name == "flops":
            check.between(col, -1, VALUE_LIMIT - 1, f"{table}.flops")
        raw = _le_bytes(col)
        encoding = RAW
        if compress and raw:
            # Level 1: as small as level 6 on shuffled timestamps, several times faster.
            raw, encoding = zlib.compress(shuffle(raw), 1), SHUFFLED
        blobs.append(raw)
        columns.append(
            {
                "table": table,
                "name": name,
                "encoding": encoding,
                "size": len(raw),
                "crc32": zlib.crc32(raw),
            }
        )
    header = {
        "meta": profile.meta,
        "trace": bool(profile.trace),
        "backends": list(profile.backends),
        "start_ns": profile.start_ns,
        "end_ns": profile.end_ns,
        "names": list(profile.names),
        "queues": [[q.backend, q.device, q.label, q.device_key] for q in profile.queues],
        "threads": [[t.ident, t.name, t.task] for t in profile.threads],
        "errors": sorted([row, msg] for row, msg in profile.errors.items()),
        "clocks": [
            [k, c.backend, c.device, c.method, c.error_ns, c.shift_ns]
            for k, c in profile.clocks.items()
        ],
        "counts": {"device": ndev, "host": nhost},
        "columns": columns,
    }
    if profile.details:  # only then: files without details are as the first ones of their version
        header["details"] = sorted([row, text] for row, text in profile.details.items())
    if version == 5:
        header["counts"] = {"device": ndev, "host": nhost, "memory": nmem}
        header["memory"] = {
            "devices": [list(d) for d in profile.memory.devices],
            "sites": list(profile.memory.sites),
        }
        header["sites"] = [[s.file, s.line, s.function] for s in profile.sites]
        frames = {f: i for i, f in enumerate(sorted({f for s in profile.stacks for f in s}))}
        header["frames"] = [[s.file, s.line, s.function] for s in frames]
        header["stacks"] = [[frames[f] for f in s] for s in profile.stacks]
        header["configs"] = list(profile.configs)
    try:
        hbytes = json.dumps(header, allow_nan=False, separators=(",", ":")).encode("ascii")
    except (TypeError, ValueError) as exc:
        raise KprofError(
            f"cannot save: the profile's meta must hold only JSON values (str, int, float, "
            f"bool, None, lists, dicts with str keys): {exc}"
        ) from None
    return b"".join(
        [
            PREFIX.pack(MAGIC, version),
            V1_FRAME.pack(len(hbytes), zlib.crc32(hbytes)),
            hbytes,
            *blobs,
        ]
    )


def save(profile: ProfileData, target: PathOrFile, compress: bool = True) -> None:
    """Write ``profile`` to a path (atomically: a temporary file, then a rename) or a binary file."""
    data = dumps(profile, compress=compress)
    if hasattr(target, "write"):
        target.write(data)
        return
    path = os.fspath(target)
    # A short temporary name beside the target (same file system, so the rename is atomic):
    # a suffix on the target's own name would push a valid 250-byte name over NAME_MAX.
    tmp = os.path.join(os.path.dirname(path), f".kprof-{os.getpid()}-{os.urandom(4).hex()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


# -- reading ------------------------------------------------------------------------------------


def load(source: PathOrFile, cls: type[P]) -> P:
    """Read a profile saved by ``Profile.save`` (a path or a binary file) as a ``cls`` (the
    facade's ``kprof.load`` passes ``Profile``).

    Raises ``NotAProfileError``, ``UnsupportedVersionError`` or ``CorruptProfileError`` (all
    ``ProfileFileError``, a ``KprofError`` and ``ValueError``) with a message naming the file.
    """
    if hasattr(source, "read"):
        data = source.read()
        name = getattr(source, "name", "<file>")
    else:
        name = os.fspath(source)
        data = _read_regular_file(name)
    try:
        return loads(data, str(name), cls)
    except MemoryError:
        raise ProfileFileError(
            f"{name}: too large to load ({len(data)} bytes; not enough memory)"
        ) from None


_FILE_TYPES = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _not_regular(name: str, mode: int) -> ProfileFileError:
    what = next((w for test, w in _FILE_TYPES if test(mode)), "not a regular file")
    return NotAProfileError(f"{name}: is {what}, not a kprof profile (kprof reads regular files)")


def _read_regular_file(name: str) -> bytes:
    """The bytes of a regular file, read up to the size it had when opened.

    Anything else is refused before a byte is read: a symlink to ``/dev/zero`` would be read
    until memory ran out, a FIFO would block forever (it is opened non-blocking, so that even
    a FIFO swapped in after the first check cannot), and a device may act on being read. A
    file that is not a kprof profile is refused after its first 12 bytes, whatever its size.
    """
    if not stat.S_ISREG(mode := os.stat(name).st_mode):
        raise _not_regular(name, mode)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    fd = os.open(name, flags | getattr(os, "O_BINARY", 0))
    with open(fd, "rb", closefd=True) as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # replaced between the two looks
            raise _not_regular(name, st.st_mode)
        head = f.read(PREFIX.size)
        if len(head) == PREFIX.size and head[: len(MAGIC)] != MAGIC:
            return head  # loads says it is not a profile, without reading the rest
        try:
            return head + f.read(max(0, st.st_size - len(head)))
        except MemoryError:
            raise ProfileFileError(
                f"{name}: too large to load ({st.st_size} bytes; not enough memory)"
            ) from None


def loads(data: bytes, name: str, cls: type[P]) -> P:
    """A profile from the bytes of a ``.kprof`` file; ``name`` is used in error messages."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"loads() takes bytes, not {type(data).__name__}")
    data = bytes(data)
    if len(data) < PREFIX.size:
        if data and MAGIC.startswith(data[: len(MAGIC)]) and len(data) >= 4:
            raise CorruptProfileError(f"{name}: truncated kprof file ({len(data)} bytes)")
        raise NotAProfileError(f"{name}: not a kprof profile (too short to hold a kprof header)")
    magic, version = PREFIX.unpack_from(data)
    if magic != MAGIC:
        raise NotAProfileError(
            f"{name}: not a kprof profile (save one with `kprof run -o FILE.kprof` or Profile.save)"
        )
    reader = READERS.get(version)
    if reader is None:
        known = " and ".join(str(v) for v in sorted(READERS))
        if version in PRERELEASE_VERSIONS:
            raise UnsupportedVersionError(
                f"{name}: written by a development version of kprof (format version {version}, "
                f"which no release reads; this kprof reads versions {known}): open it with the "
                f"kprof that wrote it, or profile again"
            )
        if version > FORMAT_VERSION:
            raise UnsupportedVersionError(
                f"{name}: written by a newer kprof (format version {version}; this kprof reads "
                f"versions {known}): upgrade kprof to read it"
            )
        raise UnsupportedVersionError(
            f"{name}: unknown kprof format version {version} (this kprof reads versions {known})"
        )
    return reader(data, PREFIX.size, name, cls)


class _Reader(Protocol):
    """A reader of one format version: the bytes after the prefix into a ``cls``."""

    def __call__(self, data: bytes, pos: int, name: str, cls: type[P]) -> P: ...


#: One reader per format version this kprof can read; a new version adds an entry and keeps
#: the old ones, so old files stay readable.
READERS: dict[int, _Reader] = {1: read_v1, 5: read_v5}


def peek_version(data: bytes) -> int | None:
    """The format version in the first bytes of a file, or None when it is not a kprof file."""
    if len(data) < PREFIX.size:
        return None
    magic, version = PREFIX.unpack_from(data)
    return int(version) if magic == MAGIC else None


__all__ = [
    "FORMAT_VERSION",
    "MAGIC",
    "READERS",
    "CorruptProfileError",
    "NotAProfileError",
    "PathOrFile",
    "ProfileFileError",
    "UnsupportedVersionError",
    "dumps",
    "load",
    "loads",
    "save",
]
