"""Protobuf's wire format for kprof's Perfetto writer, in Python: the encoding defined once for
this language, and ``track_events``, the Python twin of ``_perfetto.track_events`` (C).

Both write the same bytes (``tests/test_perfetto.py`` compares them): a track's slices as
``TracePacket``s, each ``{timestamp, trusted_packet_sequence_id, track_event,
sequence_flags: SEQ_NEEDS_INCREMENTAL_STATE}``, fields in that order. Per item of the track
(``renderers/timeline.py``: ``row << 2 | tag``, sorted, nesting strictly):

- a launch: ``SLICE_BEGIN`` (category ``launch``, its name, its source location where the row
  has a site, ``flow_ids`` = ``flow_base + row + 1`` unless unresolved, its ``callstack_iid``
  where the ``callstack`` column has one) at the launch's start, ``SLICE_END`` at its end;
- a device row: ``SLICE_BEGIN`` (category its kind, annotations ``bytes``, ``host_timed`` or
  ``approximate``, ``terminating_flow_ids`` unless it is a range's device time), ``SLICE_END``;
- a host range: ``SLICE_BEGIN`` (category ``range``, source location, callstack),
  ``SLICE_END``;
- a marker: ``INSTANT`` (category ``marker``, source location, callstack).

``extras`` maps an item to encoded ``TrackEvent`` fields appended to its begin (the
``unresolved`` reason, a row's ``detail``), consulted only when not empty. The ends are
written as slices close (a stack of open ends), so each track's packets are in time order.
Timestamps are ``time + shift`` as unsigned varints (two's complement below 0, as in C).
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Callable
from types import ModuleType
from typing import Any

from kprof_core.low_level import perfetto_fields as pf

MASK = (1 << 64) - 1
#: Bytes gathered before each ``write`` call (the C encoder writes at the same size).
CHUNK = 1 << 20
_SMALL = [bytes([i]) for i in range(128)]


def varint(n: int) -> bytes:
    """``n`` as a protobuf varint (a negative one as its 64-bit two's complement)."""
    if 0 <= n < 128:
        return _SMALL[n]
    n &= MASK
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def key(message: str, field: str) -> bytes:
    """The encoded key of ``message.field``."""
    return varint(pf.tag(message, field))


def number(k: bytes, n: int) -> bytes:
    """A varint field."""
    return k + varint(n)


def fixed64(k: bytes, n: int) -> bytes:
    """A fixed64 field."""
    return k + (n & MASK).to_bytes(8, "little")


def double(k: bytes, x: float) -> bytes:
    """A double field (fixed64 wire type, IEEE 754 little-endian)."""
    return k + struct.pack("<d", x)


def nested(k: bytes, payload: bytes) -> bytes:
    """A length-delimited field (a message or bytes)."""
    return k + varint(len(payload)) + payload


def text(k: bytes, s: str) -> bytes:
    """A string field; a lone surrogate (possible in str, not in UTF-8) is written as
    ``\\udXXX``, as the JSON exports do."""
    return nested(k, s.encode("utf-8", "backslashreplace"))


PACKET = key("Trace", "packet")


def packet(body: bytes) -> bytes:
    """One ``TracePacket`` of the ``Trace``, framed."""
    return PACKET + varint(len(body)) + body


_TE = "TrackEvent"
K_TS = key("TracePacket", "timestamp")
K_SEQ = key("TracePacket", "trusted_packet_sequence_id")
K_EVENT = key("TracePacket", "track_event")
K_SEQ_FLAGS = key("TracePacket", "sequence_flags")
K_TYPE = key(_TE, "type")
K_TRACK = key(_TE, "track_uuid")
K_CAT = key(_TE, "category_iids")
K_NAME = key(_TE, "name_iid")
K_SOURCE = key(_TE, "source_location_iid")
K_ANNOTATION = key(_TE, "debug_annotations")
K_FLOW = key(_TE, "flow_ids")
K_END_FLOW = key(_TE, "terminating_flow_ids")
K_STACK = key(_TE, "callstack_iid")
K_ANN_NAME = key("DebugAnnotation", "name_iid")
K_ANN_INT = key("DebugAnnotation", "int_value")
K_ANN_BOOL = key("DebugAnnotation", "bool_value")
K_ANN_STR = key("DebugAnnotation", "string_value")


def annotation_text(name_iid: int, value: str) -> bytes:
    """A ``debug_annotations`` field holding a string (for ``extras``)."""
    return nested(K_ANNOTATION, number(K_ANN_NAME, name_iid) + text(K_ANN_STR, value))


def _flag_annotation(name_iid: int) -> bytes:
    return nested(K_ANNOTATION, number(K_ANN_NAME, name_iid) + number(K_ANN_BOOL, 1))


_HOST_TIMED = _flag_annotation(pf.ANN_HOST_TIMED)
#: An unresolved launch's annotation when ``extras`` has no reason for it.
UNRESOLVED_DEFAULT = annotation_text(pf.ANN_UNRESOLVED, "unresolved")
_APPROXIMATE = _flag_annotation(pf.ANN_APPROXIMATE)
_LAUNCH, _DEVICE, _HOST_RANGE, _MARK = (pf.ITEM_TAGS[k] for k in pf.ITEM_TAGS)
_F_HOST_TIMED, _F_UNRESOLVED, _F_APPROXIMATE = (pf.FLAGS[k] for k in pf.FLAGS)
_BEGIN, _END, _INSTANT = (pf.ENUMS[f"TYPE_{t}"] for t in ("SLICE_BEGIN", "SLICE_END", "INSTANT"))


def _column(b: bytes) -> array[int]:
    a = array("q")
    a.frombytes(b)
    return a


def track_events(
    write: Callable[[bytes], Any],
    items: bytes,
    table: tuple[bytes, ...],
    host: tuple[bytes, ...],
    extras: dict[int, bytes],
    track_uuid: int,
    shift: int,
    flow_base: int,
    sequence: int,
) -> int:
    """Write one track's packets (see the module docstring) through ``write``, in chunks of
    about ``CHUNK`` bytes; return the number of bytes written."""
    if len(table) != len(pf.TABLE_COLUMNS) or len(host) != len(pf.HOST_COLUMNS):
        raise ValueError("track_events: the table and host columns are not TABLE/HOST_COLUMNS")
    tcols, hcols = [_column(c) for c in table], [_column(c) for c in host]
    if len({len(c) for c in tcols}) != 1 or len({len(c) for c in hcols}) != 1:
        raise ValueError("track_events: the table or host columns differ in length")
    ls, le, st, du, fl, nm, kd, si, nb, cs = tcols
    hs, he, hn, hsi, hcs = hcols
    rows = (len(ls), len(ls), len(hs), len(hs))
    seq = K_SEQ + varint(sequence)
    tail = K_SEQ_FLAGS + varint(pf.ENUMS["SEQ_NEEDS_INCREMENTAL_STATE"])
    track = K_TRACK + varint(track_uuid)
    begin = K_TYPE + varint(_BEGIN)
    end_event = K_TYPE + varint(_END) + track
    end_tail = seq + K_EVENT + varint(len(end_event)) + end_event + tail
    instant = K_TYPE + varint(_INSTANT)
    launch_cat = K_CAT + varint(pf.CAT_LAUNCH)
    marker_cat = K_CAT + varint(pf.CAT_MARKER)
    kind_cat = [K_CAT + varint(pf.CAT_KIND0 + k) for k in range(pf.KIND_RANGE + 1)]
    range_kind = pf.KIND_RANGE
    out: list[bytes] = []
    size = total = 0
    stack: list[int] = []

    def put(ts: int, event: bytes) -> None:
        nonlocal size
        body = K_TS + varint(ts) + seq + K_EVENT + varint(len(event)) + event + tail
        p = PACKET + varint(len(body)) + body
        out.append(p)
        size += len(p)

    def close(below: int, strict: bool) -> None:
        nonlocal size
        while stack and (stack[-1] < below if strict else stack[-1] <= below):
            body = K_TS + varint(stack.pop() + shift) + end_tail
            p = PACKET + varint(len(body)) + body
            out.append(p)
            size += len(p)

    # Fields in number order (canonical protobuf, as Perfetto's own writer emits them):
    # category_iids 3, debug_annotations 4, type 9, name_iid 10, track_uuid 11,
    # source_location_iid 34, flow_ids 47, terminating_flow_ids 48, callstack_iid 56.
    for code in _column(items):
        i, tg = code >> 2, code & 3
        if not 0 <= i < rows[tg]:
            raise IndexError(f"track_events: item {code} has no row")
        ev: bytes
        if tg == _LAUNCH:
            s = ls[i]
            e = s + max(0, le[i] - s)
            ev = launch_cat
            x = extras.get(code) if extras else None
            unresolved = fl[i] & _F_UNRESOLVED
            if unresolved and x is None:
                x = UNRESOLVED_DEFAULT
            if x is not None:
                ev += x
            ev += begin + K_NAME + varint(nm[i] + 1) + track
            if si[i] >= 0:
                ev += K_SOURCE + varint(si[i] + 1)
            if not unresolved:
                ev += fixed64(K_FLOW, flow_base + i + 1)
            if cs[i] >= 0:
                ev += K_STACK + varint(cs[i] + 1)
        elif tg == _DEVICE:
            s = st[i]
            e = s + max(0, du[i])
            k = kd[i]
            if not 0 <= k <= range_kind:
                raise ValueError(f"track_events: row {i} has kind {k}")
            ev = kind_cat[k]
            if nb[i] >= 0:
                ev += nested(
                    K_ANNOTATION, number(K_ANN_NAME, pf.ANN_BYTES) + number(K_ANN_INT, nb[i])
                )
            if fl[i] & _F_HOST_TIMED:
                ev += _HOST_TIMED
            elif fl[i] & _F_APPROXIMATE:
                ev += _APPROXIMATE
            if extras and (x := extras.get(code)) is not None:
                ev += x
            ev += begin + K_NAME + varint(nm[i] + 1) + track
            if k != range_kind:
                ev += fixed64(K_END_FLOW, flow_base + i + 1)
        elif tg == _HOST_RANGE:
            s = hs[i]
            e = s + max(0, he[i] - s)
            ev = kind_cat[range_kind] + begin + K_NAME + varint(hn[i] + 1) + track
            if hsi[i] >= 0:
                ev += K_SOURCE + varint(hsi[i] + 1)
            if hcs[i] >= 0:
                ev += K_STACK + varint(hcs[i] + 1)
        else:
            s = hs[i]
            close(s, True)  # an instant is drawn inside what is open at its time
            ev = marker_cat + instant + K_NAME + varint(hn[i] + 1) + track
            if hsi[i] >= 0:
                ev += K_SOURCE + varint(hsi[i] + 1)
            if hcs[i] >= 0:
                ev += K_STACK + varint(hcs[i] + 1)
            put(s + shift, ev)
            continue
        close(s, False)
        put(s + shift, ev)
        stack.append(e)
        if size >= CHUNK:
            write(b"".join(out))
            total += size
            out.clear()
            size = 0
    close(MASK, False)  # every slice still open (above any int64 time)
    if out:
        write(b"".join(out))
        total += size
    return total


def encoder() -> ModuleType:
    """What encodes tracks: the compiled ``_perfetto`` where the compiled parts run and it was
    built from this ``perfetto_fields.py``, else this module (the same bytes, slower)."""
    from kprof_core.low_level import native

    if native.compiled() is not None:
        mod = native.load_plugin_part("kprof_core.low_level", "_perfetto")
        if mod is not None and getattr(mod, "SIGNATURE", None) == pf.SIGNATURE:
            return mod
    import sys

    return sys.modules[__name__]
