"""The formats the recorder's Python and C share, defined once: the pending entry, the
activity entry, the fast-queue triple and the raw launch.

A plugin's C may hand launches over without a Python object: the *raw launch* (below), which
the compiled recorder keeps in C batches (``_batch.c``), one pending entry per batch.

The launch path (``recording/recorder.py`` and ``LaunchPath.launch`` in ``_crecorder.c``)
appends one *entry* per launch to the recorder's pending list; the harvest
(``recording/harvest*.py``, ``run_columns`` in C) turns entries into rows. An entry is a plain
tuple, indexed by the constants below: a namedtuple would cost ~0.23 µs per launch
(BENCHMARKS.md), so hot paths index by constant or unpack in this order.

``_layout.h`` is generated from this module (``python -m kprof_core.low_level.gen_header``;
``tests/test_layout.py`` checks that the committed header is current). The compiled recorder
exports the ``SIGNATURE`` it was built with, and ``native`` refuses it (the reason shows in
``kprof backends``) when that differs from this module's.
"""

from __future__ import annotations

from typing import Final

# -- the pending entry: one per launch, range end, marker or host-timed call ---------------------

#: The fields of an entry, in order.
ENTRY_FIELDS = (
    "slot",  # the backend's slot (None for host entries)
    "kind",  # a record kind (KERNEL, COPY, RANGE) or one of the entry kinds below
    "name",  # the name (str)
    "queue",  # id(queue): the queue itself is kept alive in Recorder._live_queues
    "who",  # the thread key (threads.who())
    "h0",  # the host call's start (ns, host clock)
    "h1",  # the host call's end
    "start",  # the start token (None: no device time), or a host time when host-timed
    "stop",  # the stop token, or the host time the work was seen done
    "nbytes",  # a copy's size, -1 otherwise
    "flags",  # record flags (HOST_TIMED, APPROXIMATE), 0 for the common case
    "site",  # the launch site's raw id (recording/sites.py), -1 when none was found
    "config",  # the launch configuration the plugin handed (hashable; None: none)
    "flops",  # floating-point operations the user said the work does (kprof.range), -1: none
)
# Final literals, so that mypy types ``entry[START]`` as precisely as ``entry[7]``.
SLOT: Final = 0
KIND: Final = 1
NAME: Final = 2
QUEUE: Final = 3
WHO: Final = 4
H0: Final = 5
H1: Final = 6
START: Final = 7
STOP: Final = 8
NBYTES: Final = 9
FLAGS: Final = 10
SITE: Final = 11
CONFIG: Final = 12
FLOPS: Final = 13
ENTRY_LEN: Final = len(ENTRY_FIELDS)

# Entry kinds beyond the record kinds (records.KERNEL, COPY, RANGE are all below them).
#: Host-only entries travel through the same list as launches, tagged with these kinds.
ENTRY_HOST_RANGE, ENTRY_MARK, ENTRY_HOST_LAUNCH = 10, 11, 12
#: Throughput the user gave for the work a call launched (``kprof.annotate``'s wrapper): an
#: entry with its thread, host interval (h0, h1), ``nbytes`` and ``flops``; the harvest gives
#: them to the last kernel that thread launched inside the interval.
ENTRY_ANNOTATE = 13
#: A range on a backend that reports its work itself (activity records): no timestamps, its
#: device side the work inside it, derived at the profile's end (``recording/work_ranges.py``).
#: The entry has the backend's ``slot``, the range's ``name``, ``queue``, ``who``, ``h0``,
#: ``h1``, ``nbytes``, ``flags`` (``WITH_HOST`` where it carries the host range), ``site`` and
#: ``flops``; no tokens.
ENTRY_WORK_RANGE = 14
#: Kinds from here on are host entries or activity entries, never a launch's.
FIRST_HOST_KIND = ENTRY_HOST_RANGE
#: An entry-only bit of ``flags`` (above every record flag; never stored in a table): this
#: device entry of a ``kprof.range`` carries the range's host side too, the host range of its
#: ``name``, ``who``, ``h0``, ``h1`` and ``site``. One entry instead of two keeps a range
#: between launches in the harvest's column-wise run (its host row is appended beside its
#: device row); a range with no device entry appends an ``ENTRY_HOST_RANGE`` entry instead.
WITH_HOST = 1 << 16
#: A delivered activity record (``recording/activity.py``): an activity entry, below.
ENTRY_ACTIVITY = 20
#: A batch of activity rows delivered column-wise (``ActivityColumns``): an activity entry
#: whose record is the batch and whose ``who`` maps each of its scopes to its thread key.
#: Python only (the compiled recorder stops at every kind from ``FIRST_HOST_KIND`` on).
ENTRY_ACTIVITY_COLUMNS = 21
#: Launches a plugin's C handed the compiled recorder as raw launches (below), kept in C: an
#: activity entry whose record is the ``LaunchBatch`` (``_batch.c``) holding them, in the
#: order they came, until the harvest makes rows of them column-wise.
ENTRY_LAUNCH_BATCH = 22


def host_entry(
    kind: int, name: str, who: object, h0: int, h1: int, site: int = -1
) -> tuple[object, ...]:
    """An entry of the host side only (``ENTRY_HOST_RANGE``, ``ENTRY_MARK``,
    ``ENTRY_HOST_LAUNCH``): no backend, queue or tokens."""
    return (None, kind, name, None, who, h0, h1, None, None, -1, 0, site, None, -1)


def with_host(entry: tuple[object, ...]) -> bool:
    """Whether ``entry`` is a range's device entry carrying its host side (``WITH_HOST``)."""
    kind, flags = entry[KIND], entry[FLAGS] if len(entry) == ENTRY_LEN else 0
    return (
        type(kind) is int
        and kind < FIRST_HOST_KIND
        and type(flags) is int
        and bool(flags & WITH_HOST)
    )


# -- the activity entry: one delivered DeviceRecord -----------------------------------------------

#: The fields of an activity entry: the record is carried whole (its times are on the device
#: clock and are placed as it is harvested), beside what the recorder adds.
ACTIVITY_FIELDS = ("slot", "kind", "record", "queue", "who")
A_SLOT: Final = 0
A_KIND: Final = 1
A_RECORD: Final = 2
A_QUEUE: Final = 3
A_WHO: Final = 4
ACTIVITY_LEN: Final = len(ACTIVITY_FIELDS)

# -- the fast-queue triple: Harvest's id(queue) -> what the column-wise path needs --------------

FAST_QUEUE_FIELDS = ("backend", "qid", "device_key")
FQ_BACKEND: Final = 0
FQ_QID: Final = 1
FQ_DEVICE_KEY: Final = 2
FAST_QUEUE_LEN: Final = len(FAST_QUEUE_FIELDS)


# -- the raw launch: one launch a plugin's C hands the compiled recorder, no Python object made --

#: The fields of ``KprofRawLaunch`` (C type, name), in order. A plugin's C (``_clhook``'s
#: hooked enqueues) fills one per launch and calls the recorder's ``append`` (the capsule
#: ``native.raw_launch_capsule()``): 1 taken (the batch now owns the tokens' references), 0
#: not the common case (the caller still owns them: it calls ``rec.launch`` instead), -1 an
#: exception. The objects are borrowed: the batch takes its own references.
RAW_LAUNCH_FIELDS = (
    ("void *", "start"),  # the start token, raw (one reference, given back through the ops)
    ("void *", "stop"),  # the stop token: may be ``start`` itself
    ("PyObject *", "name"),  # the name, a str
    ("PyObject *", "queue"),  # the queue object
    ("PyObject *", "config"),  # the launch configuration (hashable), or NULL: none
    ("int64_t ", "kind"),  # a record kind (KERNEL, COPY)
    ("int64_t ", "h0"),  # the host call's start and end (ns, host clock)
    ("int64_t ", "h1"),
    ("int64_t ", "nbytes"),  # a copy's size, -1 otherwise
)
#: What ``KprofRawOps`` says of a launch's work (``read``'s return value).
RAW_DONE, RAW_NOT_DONE, RAW_FAILED = 0, 1, 2

_RAW_API_C = """\
/* One launch a plugin's C hands the compiled recorder (layout.py: RAW_LAUNCH_FIELDS). */
typedef struct {
%(fields)s
} KprofRawLaunch;

/* How the recorder reads and gives back a plugin's raw tokens; one static instance per
 * plugin. Each is called holding the GIL and never lets it go. */
typedef struct {
    /* The device times of one launch's work: KPROF_RAW_DONE with *begin and *end set,
     * KPROF_RAW_NOT_DONE (not complete yet), KPROF_RAW_FAILED (failed, or unreadable). */
    int (*read)(void *start, void *stop, int64_t *begin, int64_t *end);
    /* Gives back one launch's tokens (start and stop may be one). */
    void (*release)(void *start, void *stop);
    /* A Python token that owns the reference to `token` (a new reference), or NULL with an
     * exception; the reference is the caller's again then. For the one-by-one route. */
    PyObject *(*token)(void *token);
} KprofRawOps;

/* The capsule's contents (KPROF_RAW_CAPSULE): the signature the recorder was built with, to
 * compare with KPROF_LAYOUT_SIGNATURE, and append(rec, backend, ops, launch). */
typedef struct {
    const char *signature;
    int (*append)(PyObject *rec, PyObject *backend, const KprofRawOps *ops,
                  const KprofRawLaunch *launch);
} KprofRawApi;

/* A record_timestamp hook's C twin, for kprof.range (the capsule KPROF_RAW_STAMP_CAPSULE, the
 * hook function's attribute `kprof_raw_stamp`): a range's timestamps recorded as raw tokens,
 * its device side then kept with the launches in one batch and read by the same `ops`. */
typedef struct {
    const char *signature; /* KPROF_LAYOUT_SIGNATURE, as the plugin was built */
    const KprofRawOps *ops;
    /* A timestamp on `queue` (the backend's current queue): a raw token (one reference), whose
     * work completes when everything enqueued before it did. NULL without an exception where
     * the Python hook answers instead (a queue it does not know, or does not time); NULL with
     * an exception where it failed. */
    void *(*stamp)(PyObject *queue);
    /* The raw token a Python token of ops->token holds, as a reference of its own (the
     * plugin may move the token's out where the caller holds the only reference to the token,
     * which is then not used again); NULL (no exception) where `token` is not one. */
    void *(*raw)(PyObject *token);
} KprofRawStamp;
"""
RAW_CAPSULE = "kprof_core.low_level._crecorder._raw_launch"
#: The name of a ``KprofRawStamp`` capsule (a plugin's, on its ``record_timestamp`` hook).
RAW_STAMP_CAPSULE = "kprof.raw_stamp"


def _check_indexes() -> None:
    """The index constants follow the field lists (checked once, at import)."""
    g = globals()
    for prefix, fields in (("", ENTRY_FIELDS), ("A_", ACTIVITY_FIELDS), ("FQ_", FAST_QUEUE_FIELDS)):
        for i, f in enumerate(fields):
            if g[prefix + f.upper()] != i:
                raise AssertionError(f"layout.py: {prefix}{f.upper()} is not {i}")


_check_indexes()

#: What the compiled recorder must have been built with: every field name in order and the
#: kinds it tests against. Any change to the formats above changes it.
SIGNATURE = (
    f"entry:{','.join(ENTRY_FIELDS)};"
    f"activity:{','.join(ACTIVITY_FIELDS)};"
    f"fast_queue:{','.join(FAST_QUEUE_FIELDS)};"
    f"first_host_kind:{FIRST_HOST_KIND};"
    f"with_host:{WITH_HOST};"
    f"work_range:{ENTRY_WORK_RANGE};"
    f"batch:{ENTRY_LAUNCH_BATCH};"
    f"raw:{','.join(f'{t.strip()} {n}' for t, n in RAW_LAUNCH_FIELDS)};"
    f"raw_status:{RAW_DONE},{RAW_NOT_DONE},{RAW_FAILED};"
    "raw_stamp:signature,ops,stamp,raw"
)


def c_header() -> str:
    """The text of ``_layout.h``: the constants above as C macros, and the signature."""
    out = [
        "/* Generated by `python -m kprof_core.low_level.gen_header` from",
        " * kprof_core/low_level/layout.py: edit that module, not this file. */",
        "#ifndef KPROF_LAYOUT_H",
        "#define KPROF_LAYOUT_H",
        "",
        "#include <stdint.h>  /* and Python.h before this header: the raw launch has objects */",
        "",
        f"#define KPROF_ENTRY_LEN {ENTRY_LEN}",
    ]
    out += [f"#define KPROF_E_{f.upper()} {i}" for i, f in enumerate(ENTRY_FIELDS)]
    out += ["", f"#define KPROF_ACTIVITY_LEN {ACTIVITY_LEN}"]
    out += [f"#define KPROF_A_{f.upper()} {i}" for i, f in enumerate(ACTIVITY_FIELDS)]
    out += ["", f"#define KPROF_FAST_QUEUE_LEN {FAST_QUEUE_LEN}"]
    out += [f"#define KPROF_FQ_{f.upper()} {i}" for i, f in enumerate(FAST_QUEUE_FIELDS)]
    out += [
        "",
        f"#define KPROF_FIRST_HOST_KIND {FIRST_HOST_KIND}",
        f"#define KPROF_ENTRY_ACTIVITY {ENTRY_ACTIVITY}",
        f"#define KPROF_WITH_HOST {WITH_HOST}",
        f"#define KPROF_ENTRY_WORK_RANGE {ENTRY_WORK_RANGE}",
        f"#define KPROF_ENTRY_LAUNCH_BATCH {ENTRY_LAUNCH_BATCH}",
        "",
        f"#define KPROF_RAW_DONE {RAW_DONE}",
        f"#define KPROF_RAW_NOT_DONE {RAW_NOT_DONE}",
        f"#define KPROF_RAW_FAILED {RAW_FAILED}",
        f'#define KPROF_RAW_CAPSULE "{RAW_CAPSULE}"',
        f'#define KPROF_RAW_STAMP_CAPSULE "{RAW_STAMP_CAPSULE}"',
        "",
        _RAW_API_C % {"fields": "\n".join(f"    {t}{n};" for t, n in RAW_LAUNCH_FIELDS)},
        f'#define KPROF_LAYOUT_SIGNATURE "{SIGNATURE}"',
        "",
        "#endif",
        "",
    ]
    return "\n".join(out)
