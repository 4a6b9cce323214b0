"""The reader of format version 1 (``fileformat.py`` describes it): every length, checksum,
index and time checked (``filecheck.Checker``) before a profile is built. ``read_frame`` reads
the header and the columns of any version: version 5's reader (``read_v5.py``) names its columns
and reads what its header adds."""

from __future__ import annotations

import json
import sys
import zlib
from array import array
from typing import Any, TypeVar

from kprof_core.data.profile_data import ProfileData
from kprof_core.data.records import (
    ALL_FLAGS,
    KIND_NAMES,
    DeviceClock,
    DeviceTable,
    HostTable,
    QueueRecord,
    ThreadRecord,
)
from kprof_core.io.filecheck import TIME_LIMIT, Checker
from kprof_core.io.fileformat import (
    HOST_KINDS,
    RAW,
    SHUFFLED,
    TIME_COLUMNS,
    V1_FRAME,
    CorruptProfileError,
    unshuffle,
)

P = TypeVar("P", bound=ProfileData)


def _decode(r: Checker, blob: bytes, encoding: str, rows: int, what: str) -> array[int]:
    size = rows * 8
    raw: bytes | bytearray
    if encoding == SHUFFLED:
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
    elif encoding == RAW:
        raw = blob
    else:
        raise r.fail(f"column {what} has an unknown encoding {encoding!r}")
    if len(raw) != size:
        raise r.fail(f"column {what} holds {len(raw) // 8} values, expected {rows}")
    if encoding == SHUFFLED:
        raw = unshuffle(raw)
    if what in TIME_COLUMNS:
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


#: The columns of version 1 (version 5 has every column of each table: ``read_v5.py``).
V1_COLUMNS = {
    "device": tuple(c for c in DeviceTable.COLUMNS if c not in ("site", "config", "flops")),
    "host": tuple(c for c in HostTable.COLUMNS if c != "site"),
}


def read_v1(data: bytes, pos: int, name: str, cls: type[P]) -> P:
    p, _header, _r, _more = read_frame(data, pos, name, cls, V1_COLUMNS)
    # No launch sites in version 1: every row's is unknown.
    p.table.site = array("q", (-1,)) * len(p.table)
    p.host.site = array("q", (-1,)) * len(p.host)
    p.table.config = array("q", (-1,)) * len(p.table)  # nor configurations (version 5)
    p.table.flops = array("q", (-1,)) * len(p.table)  # nor flops (version 5)
    return p


def read_header(data: bytes, pos: int, r: Checker) -> tuple[dict[str, Any], int]:
    """The JSON header at ``pos`` (its frame's length and checksum checked) and the position
    after it: the header of every version since 1."""
    name = r.name
    if len(data) < pos + V1_FRAME.size:
        raise CorruptProfileError(f"{name}: truncated kprof file (it ends inside the header)")
    hlen, hcrc = V1_FRAME.unpack_from(data, pos)
    pos += V1_FRAME.size
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
    return header, pos


def read_frame(
    data: bytes, pos: int, name: str, cls: type[P], tables: dict[str, tuple[str, ...]]
) -> tuple[P, dict[str, Any], Checker, dict[str, dict[str, array[int]]]]:
    """A profile of the columns ``tables`` lists (every field checked), its header, its
    checker, and the columns of tables other than ``device`` and ``host`` (table -> column ->
    values; their row count is the header's ``counts``), for the caller to read what its
    version adds."""
    r = Checker(name, CorruptProfileError)
    header, pos = read_header(data, pos, r)

    counts = r.get(header, "counts", dict)
    rows = {t: r.get(counts, t, int) for t in tables}
    ndev = rows["device"]
    if any(n < 0 for n in rows.values()):
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
    expected = {(t, c) for t, cols in tables.items() for c in cols}
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
    r.inflation(sum(rows[t] * len(cols) for t, cols in tables.items()) * 8, len(data))
    for _table, cname, encoding, size, _crc in columns:
        if encoding == RAW and size != rows[_table] * 8:
            raise r.fail(
                f"column {_table}.{cname} holds {size // 8} values, expected {rows[_table]}"
            )
    device, host = DeviceTable(), HostTable()
    more: dict[str, dict[str, array[int]]] = {t: {} for t in tables if t not in ("device", "host")}
    for table, cname, encoding, size, crc in columns:
        blob = data[pos : pos + size]
        pos += size
        what = f"{table}.{cname}"
        if zlib.crc32(blob) != crc:
            raise r.fail(f"column {what} checksum mismatch")
        col = _decode(r, blob, encoding, rows[table], what)
        if table in more:
            more[table][cname] = col
        else:
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
    if any(k not in HOST_KINDS for k in set(host.kind)):
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
    return p, header, r, more
