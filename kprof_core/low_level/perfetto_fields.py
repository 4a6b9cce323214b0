"""The Perfetto protobuf fields kprof writes, defined once for Python and C.

A Perfetto trace (``.pftrace``) is a ``Trace`` message: its field 1, ``TracePacket``, repeated,
each framed as a length-delimited field. kprof writes the packets itself (no protobuf runtime):
the field numbers and wire types below are those of Perfetto's published ``.proto`` files
(``protos/perfetto/trace/``), checked against the ``perfetto`` package's message classes by
``tests/test_perfetto.py``. ``_perfetto_fields.h`` is generated from this module
(``python -m kprof_core.low_level.gen_header``); the compiled encoder (``_perfetto.c``)
exports the ``SIGNATURE`` it was built with and is refused when it differs.

kprof's own interning ids (the same in every sequence): categories (``CATEGORIES``: a device
row of kind ``k`` has ``CAT_KIND0 + k``, a host range ``CAT_KIND0 + RANGE``), debug annotation
names (``ANNOTATIONS``), event names (a profile's name index + 1) and source locations (its
site index + 1); callstacks, frames, function names and source paths are numbered from 1
per profile by the writer.
"""

from __future__ import annotations

from typing import Final

from kprof_core.data.records import (
    APPROXIMATE,
    COPY,
    HOST_TIMED,
    KERNEL,
    KIND_NAMES,
    RANGE,
    UNRESOLVED,
)

VARINT, FIXED64, LEN = 0, 1, 2

#: message -> field -> (number, wire type): every field kprof writes.
FIELDS: dict[str, dict[str, tuple[int, int]]] = {
    "Trace": {"packet": (1, LEN)},
    "TracePacket": {
        "timestamp": (8, VARINT),
        "trusted_packet_sequence_id": (10, VARINT),
        "track_event": (11, LEN),
        "interned_data": (12, LEN),
        "sequence_flags": (13, VARINT),
        "track_descriptor": (60, LEN),
    },
    "TrackEvent": {
        "category_iids": (3, VARINT),
        "debug_annotations": (4, LEN),
        "type": (9, VARINT),
        "name_iid": (10, VARINT),
        "track_uuid": (11, VARINT),
        "counter_value": (30, VARINT),
        "double_counter_value": (44, FIXED64),
        "source_location_iid": (34, VARINT),
        "flow_ids": (47, FIXED64),
        "callstack_iid": (56, VARINT),
        "terminating_flow_ids": (48, FIXED64),
    },
    "TrackDescriptor": {
        "uuid": (1, VARINT),
        "name": (2, LEN),
        "process": (3, LEN),
        "thread": (4, LEN),
        "parent_uuid": (5, VARINT),
        "counter": (8, LEN),
    },
    "ProcessDescriptor": {
        "pid": (1, VARINT),
        "legacy_sort_index": (3, VARINT),
        "process_name": (6, LEN),
        "process_labels": (8, LEN),
    },
    "ThreadDescriptor": {
        "pid": (1, VARINT),
        "tid": (2, VARINT),
        "legacy_sort_index": (3, VARINT),
        "thread_name": (5, LEN),
    },
    "CounterDescriptor": {"unit": (3, VARINT), "unit_name": (6, LEN)},
    "InternedData": {
        "event_categories": (1, LEN),
        "event_names": (2, LEN),
        "debug_annotation_names": (3, LEN),
        "source_locations": (4, LEN),
        "function_names": (5, LEN),
        "frames": (6, LEN),
        "callstacks": (7, LEN),
        "source_paths": (18, LEN),
    },
    # EventCategory, EventName and DebugAnnotationName share this shape.
    "EventName": {"iid": (1, VARINT), "name": (2, LEN)},
    "SourceLocation": {
        "iid": (1, VARINT),
        "file_name": (2, LEN),
        "function_name": (3, LEN),
        "line_number": (4, VARINT),
    },
    # InternedString: function names and source paths (``str`` is bytes).
    "InternedString": {"iid": (1, VARINT), "str": (2, LEN)},
    "Frame": {
        "iid": (1, VARINT),
        "function_name_id": (2, VARINT),
        "source_path_iid": (5, VARINT),
        "line_number": (6, VARINT),
    },
    # Frames outermost first (Perfetto: "bottom frame first"), as kprof's stacks.
    "Callstack": {"iid": (1, VARINT), "frame_ids": (2, VARINT)},
    "DebugAnnotation": {
        "name_iid": (1, VARINT),
        "bool_value": (2, VARINT),
        "int_value": (4, VARINT),
        "string_value": (6, LEN),
    },
}

#: Enum values of Perfetto's protos that kprof writes.
ENUMS: dict[str, int] = {
    "TYPE_SLICE_BEGIN": 1,
    "TYPE_SLICE_END": 2,
    "TYPE_INSTANT": 3,
    "TYPE_COUNTER": 4,
    "SEQ_INCREMENTAL_STATE_CLEARED": 1,
    "SEQ_NEEDS_INCREMENTAL_STATE": 2,
    "UNIT_SIZE_BYTES": 3,
}

#: Event categories, interned with iids from 1 in this order.
CATEGORIES = ("launch", "marker", "kernel", "copy", "range")
CAT_LAUNCH: Final = 1
CAT_MARKER: Final = 2
CAT_KIND0: Final = 3  # + a device row's kind
#: The device kind with no flow (a range's device time) and the last category's kind.
KIND_RANGE: Final = RANGE
#: Debug annotation names, interned with iids from 1 in this order.
ANNOTATIONS = ("bytes", "host_timed", "approximate", "unresolved", "detail")
ANN_BYTES: Final = 1
ANN_HOST_TIMED: Final = 2
ANN_APPROXIMATE: Final = 3
ANN_UNRESOLVED: Final = 4
ANN_DETAIL: Final = 5

#: The timeline's item tags (``renderers/timeline.py``, which the encoder's items come from:
#: ``row << 2 | tag``); the renderer checks they agree at import.
ITEM_TAGS = {"LAUNCH": 0, "DEVICE": 1, "HOST_RANGE": 2, "MARK": 3}
#: The columns ``track_events`` is handed, in order (``array('q')`` bytes): the device table's
#: and the host table's (``data/records.py``).
TABLE_COLUMNS = (
    "launch_start",
    "launch_end",
    "start",
    "duration",
    "flags",
    "name",
    "kind",
    "site",
    "nbytes",
    "callstack",  # not a table column: the row's callstack iid - 1 (-1: none), per profile
)
HOST_COLUMNS = ("start", "end", "name", "site", "callstack")
#: The record flags the encoder reads (``data/records.py``).
FLAGS = {"HOST_TIMED": HOST_TIMED, "UNRESOLVED": UNRESOLVED, "APPROXIMATE": APPROXIMATE}


def _check() -> None:
    """The iids above follow their lists (checked once, at import)."""
    for k in (KERNEL, COPY, RANGE):
        if CATEGORIES[CAT_KIND0 + k - 1] != KIND_NAMES[k]:
            raise AssertionError(f"perfetto_fields.py: CATEGORIES does not follow {KIND_NAMES}")
    if CATEGORIES[CAT_LAUNCH - 1] != "launch" or CATEGORIES[CAT_MARKER - 1] != "marker":
        raise AssertionError("perfetto_fields.py: CAT_LAUNCH/CAT_MARKER do not follow CATEGORIES")
    g = globals()
    for i, a in enumerate(ANNOTATIONS, 1):
        if g[f"ANN_{a.upper()}"] != i:
            raise AssertionError(f"perfetto_fields.py: ANN_{a.upper()} is not {i}")


_check()


def tag(message: str, field: str) -> int:
    """The field's key as written before its value: ``number << 3 | wire type``."""
    number, wire = FIELDS[message][field]
    return number << 3 | wire


def _c_name(message: str, field: str) -> str:
    return f"KPF_{message.upper()}_{field.upper()}"


#: What the compiled encoder must have been built with: every field, enum and iid above.
SIGNATURE = (
    ";".join(f"{m}.{f}={n}/{w}" for m, fields in FIELDS.items() for f, (n, w) in fields.items())
    + ";"
    + ",".join(f"{k}={v}" for k, v in ENUMS.items())
    + f";cat:{','.join(CATEGORIES)};ann:{','.join(ANNOTATIONS)}"
    + ";items:"
    + ",".join(f"{k}={v}" for k, v in ITEM_TAGS.items())
    + ";flags:"
    + ",".join(f"{k}={v}" for k, v in FLAGS.items())
    + f";range:{RANGE}"
    + f";table:{','.join(TABLE_COLUMNS)};host:{','.join(HOST_COLUMNS)}"
)


def c_header() -> str:
    """The text of ``_perfetto_fields.h``: each field's key (``KPF_<MESSAGE>_<FIELD>``), the
    enums, kprof's iids and the signature, as C macros."""
    out = [
        "/* Generated by `python -m kprof_core.low_level.gen_header` from",
        " * kprof_core/low_level/perfetto_fields.py: edit that module, not this file. */",
        "#ifndef KPROF_PERFETTO_FIELDS_H",
        "#define KPROF_PERFETTO_FIELDS_H",
        "",
        "/* Field keys (number << 3 | wire type), written as varints before each value. */",
    ]
    for m, fields in FIELDS.items():
        out += [f"#define {_c_name(m, f)} {tag(m, f)}" for f in fields]
    out += ["", *(f"#define KPF_{k} {v}" for k, v in ENUMS.items()), ""]
    out += [
        f"#define KPF_CAT_LAUNCH {CAT_LAUNCH}",
        f"#define KPF_CAT_MARKER {CAT_MARKER}",
        f"#define KPF_CAT_KIND0 {CAT_KIND0}",
        f"#define KPF_KIND_RANGE {KIND_RANGE}",
    ]
    out += [f"#define KPF_ANN_{a.upper()} {i}" for i, a in enumerate(ANNOTATIONS, 1)]
    out += [f"#define KPF_ITEM_{k} {v}" for k, v in ITEM_TAGS.items()]
    out += [f"#define KPF_FLAG_{k} {v}" for k, v in FLAGS.items()]
    out += ["", f"#define KPF_TABLE_LEN {len(TABLE_COLUMNS)}"]
    out += [f"#define KPF_T_{c.upper()} {i}" for i, c in enumerate(TABLE_COLUMNS)]
    out += [f"#define KPF_HOST_LEN {len(HOST_COLUMNS)}"]
    out += [f"#define KPF_H_{c.upper()} {i}" for i, c in enumerate(HOST_COLUMNS)]
    out += ["", f'#define KPF_SIGNATURE "{SIGNATURE}"', "", "#endif", ""]
    return "\n".join(out)
