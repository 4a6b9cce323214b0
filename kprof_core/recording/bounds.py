"""Bounded capture (``profile(max_records=N, keep=..., min_duration_ns=...)``): what a
profile keeps of its device rows, applied as the harvest goes, so that a long profile holds at
most about ``N`` rows (plus what one harvest adds) instead of every launch.

Never silent: every row dropped is counted, with its device time; kernels and copies dropped
for being short are kept per name as a count and a total, so that totals can still be told.

- ``keep="last"`` (a ring): the latest ``N`` rows stay. The oldest are cut once the table
  reaches ``2 N`` rows (one cut per ``N`` rows: amortized, each row moved at most once), and
  to exactly ``N`` at the profile's end.
- ``keep="first"``: the first ``N`` rows stay; later rows are cut after each harvest.
- ``min_duration_ns``: resolved kernels and copies shorter than it are dropped (unresolved
  rows, ranges' device time and host-timed rows are kept whatever their length).

Cut after each back-pressure harvest (``Recorder._bound``) and at the end, before
placing. Rows are cut column by column (``del`` on each ``array``), and the sparse row-keyed
maps (``errors``, ``details``) are renumbered in place: the recorder and the profile hold the
very same objects.
"""

from __future__ import annotations

from itertools import compress
from typing import TYPE_CHECKING, Any

from kprof_core.data.records import COPY, HOST_TIMED, KERNEL, UNRESOLVED, Details

if TYPE_CHECKING:
    from kprof_core.data.records import DeviceTable

KEEPS = ("last", "first")


def check(max_records: Any, keep: Any, min_duration_ns: Any) -> None:
    """``TypeError``/``ValueError`` saying which argument of ``profile()`` is wrong."""
    if max_records is not None and (
        isinstance(max_records, bool) or not isinstance(max_records, int) or max_records < 1
    ):
        raise ValueError(
            f"profile(max_records=...) must be a positive int or None, not {max_records!r}"
        )
    if keep not in KEEPS:
        raise ValueError(f"profile(keep=...) must be 'last' (a ring) or 'first', not {keep!r}")
    if min_duration_ns is not None and (
        isinstance(min_duration_ns, bool)
        or not isinstance(min_duration_ns, int)
        or min_duration_ns < 0
    ):
        raise ValueError(
            f"profile(min_duration_ns=...) must be an int >= 0 or None, not {min_duration_ns!r}"
        )


class Bounds:
    """One profile's bounds and what they dropped."""

    def __init__(self, max_records: int | None, keep: str, min_duration_ns: int | None) -> None:
        self.max_records, self.keep = max_records, keep
        self.min_duration_ns = min_duration_ns or 0
        self.checked = 0  # rows before this one were looked at for min_duration_ns
        self.dropped = 0  # rows cut by max_records
        self.dropped_ns = 0  # their device time (kernels and copies)
        #: name id -> [count, total ns] of kernels and copies dropped as shorter than the bound.
        self.short: dict[int, list[int]] = {}

    def apply(self, t: DeviceTable, errors: dict[int, str], details: Details, end: bool) -> None:
        """Cut what the bounds say; ``end``: the profile's last call (a ring cut to exactly N)."""
        if self.min_duration_ns and len(t) > self.checked:
            self._short(t, errors, details)
        n, most = len(t), self.max_records
        if most is None or n <= most:
            return
        if self.keep == "first":
            self._count(t, most, n)
            _cut(t, errors, details, most, n)
        elif end or n >= 2 * most:
            self._count(t, 0, n - most)
            _cut(t, errors, details, 0, n - most)
        self.checked = min(self.checked, len(t))

    def _count(self, t: DeviceTable, a: int, b: int) -> None:
        self.dropped += b - a
        kinds, durs = t.kind[a:b], t.duration[a:b]
        self.dropped_ns += sum(compress(durs, (k in (KERNEL, COPY) for k in kinds)))

    def _short(self, t: DeviceTable, errors: dict[int, str], details: Details) -> None:
        a, n, least = self.checked, len(t), self.min_duration_ns
        kind, dur, flags, name = t.kind, t.duration, t.flags, t.name
        drop = [
            i
            for i in range(a, n)
            if dur[i] < least
            and kind[i] in (KERNEL, COPY)
            and not flags[i] & (UNRESOLVED | HOST_TIMED)
        ]
        if drop:
            for i in drop:
                s = self.short.setdefault(name[i], [0, 0])
                s[0] += 1
                s[1] += dur[i]
            _filter(t, errors, details, a, set(drop))
        self.checked = len(t)

    def describe(self, names: list[str]) -> dict[str, Any]:
        """What ``meta["bounds"]`` holds: the bounds and what they dropped (JSON values)."""
        out: dict[str, Any] = {}
        if self.max_records is not None:
            out.update(
                max_records=self.max_records,
                keep=self.keep,
                dropped=self.dropped,
                dropped_device_ns=self.dropped_ns,
            )
        if self.min_duration_ns:
            out["min_duration_ns"] = self.min_duration_ns
            out["short"] = {names[k]: v for k, v in sorted(self.short.items())}
        return out


def _cut(t: DeviceTable, errors: dict[int, str], details: Details, a: int, b: int) -> None:
    """Rows ``a`` to ``b - 1`` taken out; the maps keyed by row follow."""
    for c in t.COLUMNS:
        del getattr(t, c)[a:b]
    k = b - a
    if errors:
        moved = {(i - k if i >= b else i): v for i, v in errors.items() if not a <= i < b}
        errors.clear()
        errors.update(moved)
    if len(details):
        details.renumber(a, b, lambda i: None, -k)


def _filter(
    t: DeviceTable, errors: dict[int, str], details: Details, a: int, drop: set[int]
) -> None:
    """Rows in ``drop`` (all from ``a`` on) taken out, column by column from ``a``."""
    n = len(t)
    keep = [i not in drop for i in range(a, n)]
    for c in t.COLUMNS:
        col = getattr(t, c)
        tail = col[a:]
        del col[a:]
        col.extend(compress(tail, keep))
    new: dict[int, int] = {}
    j = a
    for i, kept in enumerate(keep, a):
        if kept:
            new[i] = j
            j += 1
    if errors:
        moved = {(new.get(i) if i >= a else i): v for i, v in errors.items()}
        errors.clear()
        errors.update({i: v for i, v in moved.items() if i is not None})
    if len(details):
        details.renumber(a, n, new.get)
