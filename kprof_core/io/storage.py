"""Saving and loading profiles: the ``.kprof`` file format.

A ``.kprof`` file is a small JSON header followed by the record columns as raw 64-bit
integers. Loading parses JSON and copies integers; nothing in a file is ever executed (no
pickle), and every length, checksum and index is checked before a ``Profile`` is built.

Format version 1 (all integers little-endian)::

    offset  size  field
    0       8     magic b"\\x89KPROF\\r\\n" (the \\x89 and \\r\\n catch text-mode mangling)
    8       4     format version (uint32) = 1
    12      4     header length H (uint32)
    16      4     CRC-32 of the header bytes (uint32)
    20      H     header: JSON, ASCII (non-ASCII characters are \\u-escaped)
    20+H    ...   the columns, back to back, in the order the header lists them

The header holds ``meta``, ``trace``, ``backends``, ``start_ns``, ``end_ns``, the interned
``names``, ``queues`` ([backend, device, label, device_key]), ``threads`` ([ident, name,
task]), ``errors`` ([row, message]), ``clocks`` ([key, backend, device, method, error_ns,
shift_ns]), ``counts`` ({"device": rows, "host": rows}) and ``columns``: for each column its
``table`` ("device" or "host"), ``name``, ``encoding``, stored ``size`` in bytes and ``crc32``
of the stored bytes. Encodings: ``raw`` (int64 little-endian), or ``shuffle8+zlib`` (byte
``k`` of every value grouped together for k = 0..7, then zlib-compressed: timestamps share
their high bytes, so this compresses them about eight-fold, and decodes at memory speed).

The file ends right after the last column. Readers are kept per format version, so files of
older versions stay readable when the format changes; a newer version is refused with a
message saying to upgrade kprof.
"""

from __future__ import annotations

import json
import os
import stat
import struct
import sys
import zlib
from array import array
from collections.abc import Callable
from typing import IO, Any, TypeVar, Union

from kprof_core.data.profile_data import ProfileData
from kprof_core.data.records import (
    ALL_FLAGS,
    KIND_NAMES,
    DeviceTable,
    HostTable,
    QueueRecord,
    ThreadRecord,
)
from kprof_core.host.backend import KprofError
from kprof_core.io.filecheck import TIME_LIMIT, Checker
from kprof_core.recording.placement import DeviceClock

MAGIC = b"\x89KPROF\r\n"
FORMAT_VERSION = 1
_PREFIX = struct.Struct("<8sI")  # magic, version
_V1_FRAME = struct.Struct("<II")  # header length, header crc32
_RAW, _SHUFFLED = "raw", "shuffle8+zlib"
# Every kind of host row (RANGE, MARK, ...): the upper-case int attributes of HostTable.
#: Columns of host-clock times and durations (checked to lie within ±2**61 ns).
_TIME_COLUMNS = {
    "device.launch_start",
    "device.launch_end",
    "device.start",
    "device.duration",
    "host.start",
    "host.end",
}
_HOST_KINDS = {v for k, v in vars(HostTable).items() if k.isupper() and isinstance(v, int)}

PathOrFile = Union[str, "os.PathLike[str]", IO[bytes]]


class ProfileFileError(KprofError, ValueError):
    """A file could not be read as a kprof profile (the message names the file and why)."""


class NotAProfileError(ProfileFileError):
    """The file is not a kprof profile at all."""


class UnsupportedVersionError(ProfileFileError):
    """The file is a kprof profile of a format version this kprof cannot read."""


class CorruptProfileError(ProfileFileError):
    """The file is a kprof profile, but truncated or damaged."""


# -- writing ------------------------------------------------------------------------------------


def _le_bytes(col: array[int]) -> bytes:
    if sys.byteorder == "little":
        return col.tobytes()
    swapped = array("q", col)
    swapped.byteswap()
    return swapped.tobytes()


def _shuffle(raw: bytes) -> bytes:
    return b"".join(raw[k::8] for k in range(8))


def _unshuffle(data: bytes) -> bytearray:
    n = len(data) // 8
    out = bytearray(len(data))
    for k in range(8):
        out[k::8] = data[k * n : (k + 1) * n]
    return out


def _columns(profile: ProfileData) -> list[tuple[str, str, array[int]]]:
    cols = [("device", c, getattr(profile.table, c)) for c in DeviceTable.COLUMNS]
    cols += [("host", c, getattr(profile.host, c)) for c in HostTable.COLUMNS]
    return cols


def dumps(profile: ProfileData, compress: bool = True) -> bytes:
    """The profile as the bytes of a ``.kprof`` file (see the module docstring).

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
    for table, name, col in _columns(profile):
        expected = ndev if table == "device" else nhost
        if len(col) != expected:
            raise KprofError(
                f"cannot save: column {table}.{name} has {len(col)} rows, expected {expected}"
            )
        raw = _le_bytes(col)
        encoding = _RAW
        if compress and raw:
            # Level 1: as small as level 6 on shuffled timestamps, several times faster.
            raw, encoding = zlib.compress(_shuffle(raw), 1), _SHUFFLED
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
    if profile.details:  # only then: files without details stay byte-identical to version 1's
        header["details"] = sorted([row, text] for row, text in profile.details.items())
    try:
        hbytes = json.dumps(header, allow_nan=False, separators=(",", ":")).encode("ascii")
    except (TypeError, ValueError) as exc:
        raise KprofError(
            f"cannot save: the profile's meta must hold only JSON values (str, int, float, "
            f"bool, None, lists, dicts with str keys): {exc}"
        ) from None
    return b"".join(
        [
            _PREFIX.pack(MAGIC, FORMAT_VERSION),
            _V1_FRAME.pack(len(hbytes), zlib.crc32(hbytes)),
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


P = TypeVar("P", bound=ProfileData)


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
        head = f.read(_PREFIX.size)
        if len(head) == _PREFIX.size and head[: len(MAGIC)] != MAGIC:
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
    if len(data) < _PREFIX.size:
        if data and MAGIC.startswith(data[: len(MAGIC)]) and len(data) >= 4:
            raise CorruptProfileError(f"{name}: truncated kprof file ({len(data)} bytes)")
        raise NotAProfileError(f"{name}: not a kprof profile (too short to hold a kprof header)")
    magic, version = _PREFIX.unpack_from(data)
    if magic != MAGIC:
        raise NotAProfileError(
            f"{name}: not a kprof profile (save one with `kprof run -o FILE.kprof` or Profile.save)"
        )
    reader = READERS.get(version)
    if reader is None:
        known = ", ".join(str(v) for v in sorted(READERS))
        if version > FORMAT_VERSION:
            raise UnsupportedVersionError(
                f"{name}: written by a newer kprof (format version {version}; this kprof reads "
                f"version {known}): upgrade kprof to read it"
            )
        raise UnsupportedVersionError(
            f"{name}: unknown kprof format version {version} (this kprof reads version {known})"
        )
    return reader(data, _PREFIX.size, name, cls)


def _decode(r: Checker, blob: bytes, encoding: str, rows: int, what: str) -> array[int]:
    size = rows * 8
    raw: bytes | bytearray
    if encoding == _SHUFFLED:
        # Inflate at most what the declared rows need: a stream that holds more is refused
        # without inflating the rest (a decompression bomb costs nothing).
        inflater = zlib.decompressobj()
        try:
            raw = inflater.decompress(blob, max(size, 1))  # (0 would mean "no limit")
            while len(raw) <= size and not inflater.eof and inflater.unconsumed_tail:
                # Only the stream's end may follow: one more byte of output is one too many.
                raw += inflater.decompress(inflater.unconsumed_tail, 1)
        except zlib.error as exc:
            raise r.fail(f"column {what} does not decompress: {exc}") from None
        if len(raw) > size or inflater.unused_data:
            raise r.fail(f"column {what} holds more than its {rows} values")
        if not inflater.eof:
            raise r.fail(f"column {what} does not decompress: the stream is incomplete")
    elif encoding == _RAW:
        raw = blob
    else:
        raise r.fail(f"column {what} has an unknown encoding {encoding!r}")
    if len(raw) != size:
        raise r.fail(f"column {what} holds {len(raw) // 8} values, expected {rows}")
    if encoding == _SHUFFLED:
        raw = _unshuffle(raw)
    if what in _TIME_COLUMNS:
        r.times_in_range(raw, what)
    col = array("q")
    col.frombytes(raw)
    if sys.byteorder != "little":
        col.byteswap()
    return col


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _finite_float(text: str) -> float:
    # 1e400 is valid JSON that Python reads as infinity, which could not be saved again.
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"{text} is beyond the range of a float")
    return value


def _read_v1(data: bytes, pos: int, name: str, cls: type[P]) -> P:
    r = Checker(name, CorruptProfileError)
    if len(data) < pos + _V1_FRAME.size:
        raise CorruptProfileError(f"{name}: truncated kprof file (it ends inside the header)")
    hlen, hcrc = _V1_FRAME.unpack_from(data, pos)
    pos += _V1_FRAME.size
    hbytes = data[pos : pos + hlen]
    if len(hbytes) < hlen:
        raise CorruptProfileError(
            f"{name}: truncated kprof file (it ends inside the header: "
            f"{len(hbytes)} of {hlen} bytes)"
        )
    if zlib.crc32(hbytes) != hcrc:
        raise r.fail("header checksum mismatch")
    pos += hlen
    try:
        # NaN and Infinity are not JSON (kprof never writes them): refused, as they could not
        # be saved again.
        header = json.loads(
            hbytes.decode("ascii"), parse_constant=_no_constant, parse_float=_finite_float
        )
    except (UnicodeDecodeError, ValueError) as exc:
        raise r.fail(f"header is not JSON: {exc}") from None
    except RecursionError:
        raise r.fail("header is not JSON kprof reads: it nests too deeply") from None
    if not isinstance(header, dict):
        raise r.fail("header is not a JSON object")

    counts = r.get(header, "counts", dict)
    ndev, nhost = r.get(counts, "device", int), r.get(counts, "host", int)
    if ndev < 0 or nhost < 0:
        raise r.fail("negative row counts")
    columns = r.rows(
        [
            [c.get(k) for k in ("table", "name", "encoding", "size", "crc32")]
            if isinstance(c, dict)
            else c
            for c in r.get(header, "columns", list)
        ],
        "columns",
        (str, str, str, int, int),
    )
    expected = {("device", c) for c in DeviceTable.COLUMNS} | {
        ("host", c) for c in HostTable.COLUMNS
    }
    if {(c[0], c[1]) for c in columns} != expected or len(columns) != len(expected):
        raise r.fail("the header does not list exactly the record columns")
    total = sum(c[3] for c in columns)
    if any(c[3] < 0 for c in columns):
        raise r.fail("a column has a negative size")
    if len(data) - pos < total:
        raise CorruptProfileError(
            f"{name}: truncated kprof file ({len(data)} bytes; the header announces {pos + total})"
        )
    if len(data) - pos > total:
        raise r.fail(f"{len(data) - pos - total} unexpected bytes after the last column")
    r.inflation((ndev * len(DeviceTable.COLUMNS) + nhost * len(HostTable.COLUMNS)) * 8, len(data))
    for _table, cname, encoding, size, _crc in columns:
        if encoding == _RAW and size != (ndev if _table == "device" else nhost) * 8:
            raise r.fail(
                f"column {_table}.{cname} holds {size // 8} values, expected "
                f"{ndev if _table == 'device' else nhost}"
            )
    device, host = DeviceTable(), HostTable()
    for table, cname, encoding, size, crc in columns:
        blob = data[pos : pos + size]
        pos += size
        what = f"{table}.{cname}"
        if zlib.crc32(blob) != crc:
            raise r.fail(f"column {what} checksum mismatch")
        col = _decode(r, blob, encoding, ndev if table == "device" else nhost, what)
        setattr(device if table == "device" else host, cname, col)

    names = r.get(header, "names", list)
    if not all(isinstance(n, str) for n in names):
        raise r.fail("header field 'names' holds a non-string")
    queues = [QueueRecord(*q) for q in r.rows(header.get("queues"), "queues", (str, str, str, str))]
    threads = [
        ThreadRecord(*t)
        for t in r.rows(header.get("threads"), "threads", (int, str, (str, type(None))))
    ]
    errors = {row: msg for row, msg in r.rows(header.get("errors"), "errors", (int, str))}
    # Added after version 1's first files: absent there, which reads as none.
    details = {row: text for row, text in r.rows(header.get("details", []), "details", (int, str))}
    clocks = {}
    for key, backend, dev, method, err, shift in r.rows(
        header.get("clocks"), "clocks", (str, str, str, str, (int, type(None)), int)
    ):
        if err is not None and r.time(err, "a clock's error bound") < 0:
            raise r.fail("a clock's error bound is negative")
        clocks[key] = DeviceClock(backend, dev, method, err, r.time(shift, "a clock's shift"))

    r.index(device.name, len(names), "kernel name")
    r.index(device.queue, len(queues), "queue")
    r.index(device.thread, len(threads), "thread")
    r.index(host.name, len(names), "range name")
    r.index(host.thread, len(threads), "thread")
    if any(k not in KIND_NAMES for k in set(device.kind)):
        raise r.fail("unknown kind of device record")
    if any(k not in _HOST_KINDS for k in set(host.kind)):
        raise r.fail("unknown kind of host record")
    if any(not 0 <= row < ndev for row in errors):
        raise r.fail("an error refers to a row that does not exist")
    r.between(device.nbytes, -1, TIME_LIMIT, "device.nbytes")  # -1: not a copy
    if any(f & ~ALL_FLAGS for f in set(device.flags)):
        raise r.fail("column device.flags holds an unknown flag")
    if any(not 0 <= row < ndev for row in details):
        raise r.fail("a detail refers to a row that does not exist")

    meta = r.get(header, "meta", dict)
    r.meta(meta, len(queues), len(threads))
    backends = r.get(header, "backends", list)
    if not all(isinstance(b, str) for b in backends):
        raise r.fail("header field 'backends' holds a non-string")
    p = cls(trace=bool(r.get(header, "trace", bool)), backends=backends)
    p.start_ns = r.time(r.get(header, "start_ns", int), "start_ns")
    p.end_ns = r.time(r.get(header, "end_ns", int), "end_ns")
    if p.end_ns < p.start_ns:
        raise r.fail("the profile ends before it starts")
    p.table, p.host = device, host
    p.names, p.queues, p.threads, p.errors, p.clocks = names, queues, threads, errors, clocks
    p.details = details
    p.meta = meta
    p._finished = True
    return p


#: One reader per format version this kprof can read; a new version adds an entry and keeps
#: the old ones, so old files stay readable.
READERS: dict[int, Callable[[bytes, int, str, type[Any]], Any]] = {1: _read_v1}


def peek_version(data: bytes) -> int | None:
    """The format version in the first bytes of a file, or None when it is not a kprof file."""
    if len(data) < _PREFIX.size:
        return None
    magic, version = _PREFIX.unpack_from(data)
    return int(version) if magic == MAGIC else None


__all__ = [
    "FORMAT_VERSION",
    "MAGIC",
    "READERS",
    "CorruptProfileError",
    "NotAProfileError",
    "ProfileFileError",
    "UnsupportedVersionError",
    "dumps",
    "load",
    "loads",
    "save",
]
