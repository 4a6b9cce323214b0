"""The one rule for what a plugin hands back (times, durations, byte counts, names), applied
where a value becomes a row, the same on every harvest route and recorder path."""

from __future__ import annotations

from array import array
from typing import Any

#: What a plugin hands back (times, durations, byte counts, an alignment's host time) is kept
#: only within ±VALUE_LIMIT ns (18 years): a placed time is the sum of at most three of them
#: (a device time, its device's base, the shift), which stays within the file format's
#: ±2**61 (``io/filecheck.TIME_LIMIT``), so a profile in memory always saves and loads back.
VALUE_LIMIT = 2**59
#: The top byte of a little-endian int64 in [-VALUE_LIMIT, VALUE_LIMIT), and in
#: [0, VALUE_LIMIT): a column is checked on its bytes (``bytes.translate``), at memory speed.
IN_LIMIT_TOP_BYTES = bytes(range(0x00, 0x08)) + bytes(range(0xF8, 0x100))
NON_NEGATIVE_TOP_BYTES = bytes(range(0x00, 0x08))


def within_limit(raw: bytes, non_negative: bool = False) -> bool:
    """Whether every little-endian int64 of ``raw`` lies within ``±VALUE_LIMIT`` (within
    ``[0, VALUE_LIMIT)`` with ``non_negative``)."""
    return not raw[7::8].translate(
        None, NON_NEGATIVE_TOP_BYTES if non_negative else IN_LIMIT_TOP_BYTES
    )


def byte_counts(col: array[int]) -> bool:
    """Whether every value of ``col`` is -1 or within ``[0, VALUE_LIMIT)``: a byte count (as
    ``launch_problem`` checks one), on its bytes: the top bytes allowed, and as many rows
    with a top byte of 0xff as there are -1s."""
    top = col.tobytes()[7::8]
    return not top.translate(None, NON_NEGATIVE_TOP_BYTES + b"\xff") and top.count(
        0xFF
    ) == col.count(-1)


def small_values(col: array[int], allowed: bytes) -> bool:
    """Whether every value of ``col`` is one of ``allowed`` (each in 0..255), on its bytes: the
    low byte among them, the seven others zero."""
    raw = col.tobytes()
    low = raw[0::8]
    return not low.translate(None, allowed) and raw.count(0) - low.count(0) == 7 * len(low)


def is_time(v: Any) -> bool:
    """An int (not a bool) within ``±VALUE_LIMIT``: a time or duration kprof may keep."""
    return type(v) is int and -VALUE_LIMIT <= v < VALUE_LIMIT


def time_problem(hook: str, begin: Any, end: Any, rel: Any) -> str | None:
    """Why a record's device times cannot be kept, or None: both within ``±VALUE_LIMIT``,
    the end not before the begin, the duration and the place on the device within the limit
    too (``harvest_columns.checked_rel_dur`` and the compiled twin are the same check over a run's
    columns)."""
    if not (is_time(begin) and is_time(end) and is_time(rel)):
        return (
            f"{hook} gave times beyond ±2**59 ns (begin {begin}, end {end}): "
            f"not kept (a wrapped-around or uninitialized value?)"
        )
    if not 0 <= end - begin < VALUE_LIMIT:
        return f"{hook} gave an end before the begin (a duration of {end - begin} ns): not kept"
    return None


def name_of(name: Any) -> str:
    """A record's name as a str: a plugin's (or user's) non-str name is kept by its
    ``repr`` rather than refused (the record is not lost, and the repr shows what was passed:
    ``b'k'`` stays distinct from ``'k'``); a str subclass as the plain str it holds."""
    if type(name) is str:
        return name
    if isinstance(name, str):
        return str.__str__(name)
    try:
        return repr(name)
    except Exception:
        return f"<{type(name).__name__} name>"


def bad_value(what: str, value: Any) -> str:
    return (
        f"the plugin handed {what} {value!r:.60}, not int nanoseconds within "
        f"±2**59 (a plugin's bug: the record is kept without a time)"
    )


def launch_problem(h0: Any, h1: Any, nbytes: Any) -> bool:
    """Whether a launch's host times or byte count cannot be kept (ints within the limit,
    ``h1`` not before ``h0``, ``nbytes`` -1 or a count)."""
    return not (
        is_time(h0)
        and is_time(h1)
        and h0 <= h1
        and type(nbytes) is int
        and -1 <= nbytes < VALUE_LIMIT
    )
