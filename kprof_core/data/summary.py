"""Turning records into summaries: per-name statistics of host and device activity."""

from __future__ import annotations

import math
import operator
from array import array
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress, islice, repeat
from operator import eq
from typing import Any

from kprof_core.data.records import APPROXIMATE, HOST_TIMED, MARKS, RANGE, UNRESOLVED


@dataclass(frozen=True)
class SummaryRow:
    """Statistics of one name in one section of the report (times in nanoseconds).

    ``name``; ``calls``: how many records; ``total_ns``, ``avg_ns``, ``min_ns``, ``max_ns``,
    ``median_ns``, ``std_ns`` (population standard deviation) of their durations;
    ``percent``: ``total_ns`` as a share of the profiled span; ``host_timed``: the records
    were timed on the host (shown with ``*``); ``approximate``: their times are completions
    observed on the host, without synchronizing (shown with ``~``); ``nbytes``: bytes moved,
    for copies (and kernels or ranges the user said them of), else None; ``flops``: the
    floating-point operations the user said its records do (``kprof.range(flops=)``,
    ``kprof.annotate``), else None; ``config``: the launch configuration's text, in rows
    grouped by it (``summary(by=("name", "config"))``), else None; ``span_ns``: for a device
    range, its instances' spans on the device summed (first work's start to last work's end,
    where a backend timed them), beside ``total_ns``, the device time of their work; else
    None. ``gbps`` and ``gflops``: those over ``total_ns`` (GB/s, GFLOP/s), or None.
    """

    name: str
    calls: int
    total_ns: int
    avg_ns: float
    min_ns: int
    max_ns: int
    median_ns: float
    std_ns: float
    percent: float
    host_timed: bool = False
    nbytes: int | None = None
    approximate: bool = False
    config: str | None = None
    flops: int | None = None
    span_ns: int | None = None

    @property
    def gbps(self) -> float | None:
        """Bytes per ns (GB/s) over the total device time, or None without bytes."""
        return self.nbytes / self.total_ns if self.nbytes and self.total_ns > 0 else None

    @property
    def gflops(self) -> float | None:
        """Floating-point operations per ns (GFLOP/s) over the total time, or None."""
        return self.flops / self.total_ns if self.flops and self.total_ns > 0 else None

    @property
    def label(self) -> str:
        """The name as the report shows it (``*`` appended when host-timed, ``~`` when approximate)."""
        return (
            f"{self.name} *"
            if self.host_timed
            else f"{self.name} ~"
            if self.approximate
            else self.name
        )


def rows_of(
    groups: Mapping[tuple[str, int], list[int]],
    sizes: Mapping[tuple[str, int], int],
    span_ns: int,
    flops: Mapping[tuple[str, int], int] | None = None,
) -> list[SummaryRow]:
    """Summary rows of durations already grouped by ``(name, marks)``, where marks are the
    record flags ``HOST_TIMED`` and ``APPROXIMATE`` (or a bool: host-timed); largest total
    first. ``sizes`` and ``flops``: the bytes and flops said per group (absent: none)."""
    rows = []
    for (name, marks), durs in groups.items():
        n = len(durs)
        total, squares, lo, hi, median = _stats(durs, n)
        mean = total / n
        var = squares / n - mean * mean if n > 1 else 0.0
        rows.append(
            SummaryRow(
                name=name,
                calls=n,
                total_ns=total,
                avg_ns=mean,
                min_ns=lo,
                max_ns=hi,
                median_ns=median,
                std_ns=math.sqrt(var) if var > 0 else 0.0,
                percent=100.0 * total / span_ns if span_ns > 0 else 0.0,
                host_timed=bool(marks & HOST_TIMED),
                nbytes=sizes.get((name, marks)),
                approximate=bool(marks & APPROXIMATE),
                flops=None if flops is None else flops.get((name, marks)),
            )
        )
    rows.sort(key=lambda r: (-r.total_ns, r.name))
    return rows


def _stats(durs: Sequence[int], n: int) -> tuple[int, float, int, int, float]:
    """(sum, sum of squares as a float, min, max, median) of ``durs``.

    Durations repeat a lot (a kernel takes a few thousand distinct nanosecond values over a
    million calls): then they are counted (C-level ``Counter``) and only the distinct values
    sorted and summed, 5x cheaper than sorting and summing a million. Else: sorted, and the
    squares summed as floats over a C-level map (``statistics.pstdev``'s exact arithmetic and
    a Python loop take seconds on a million). Both give the same numbers: the squares' sum is
    exact either way while every square is below 2**53 (durations under 94 ms), and counting
    is only used then.
    """
    if n > 4096 and len(set(islice(durs, 4096))) < 1024:
        counts = Counter(durs)
        values = sorted(counts)
        if -(2**26) < values[0] and values[-1] < 2**26:
            total = sum(map(operator.mul, values, map(counts.__getitem__, values)))
            squares = float(sum(v * v * counts[v] for v in values))
            wanted = (n // 2,) if n % 2 else (n // 2 - 1, n // 2)
            found: list[int] = []
            seen = 0
            for v in values:
                seen += counts[v]
                while len(found) < len(wanted) and wanted[len(found)] < seen:
                    found.append(v)
                if len(found) == len(wanted):
                    break
            median = float(found[0]) if n % 2 else (found[0] + found[1]) / 2
            return total, squares, values[0], values[-1], median
    ordered = sorted(durs)
    mid = n // 2
    return (
        sum(ordered),
        math.fsum(map(operator.mul, ordered, ordered)),
        ordered[0],
        ordered[-1],
        float(ordered[mid]) if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2,
    )


def _split(keys: array[int], values: array[int], most: int = 8) -> dict[int, list[int]] | None:
    """``values`` grouped by ``keys`` (in the order keys first appear), or None when there are
    more than ``most`` distinct keys (one C-level pass per key: a loop is cheaper then)."""
    distinct = set(keys)
    if len(distinct) > most:
        return None
    if len(distinct) == 1:
        return {keys[0]: list(values)}
    return {
        k: list(compress(values, map(eq, keys, repeat(k))))
        for k in sorted(distinct, key=keys.index)
    }


def said_totals(
    names: Sequence[int],
    kinds: Sequence[int],
    flags: Sequence[int],
    nbytes: Sequence[int],
    flops: Sequence[int],
) -> tuple[dict[tuple[int, int], int], dict[tuple[int, int], int], dict[tuple[int, int], int]]:
    """What the user said of device rows, per ``(name id, marks)``: flops of kernels and
    copies, bytes and flops of ranges (their bytes are not a copy's). One pass, only when a
    row has any (checked in C first: most profiles have none)."""
    dev: dict[tuple[int, int], int] = {}
    rng_b: dict[tuple[int, int], int] = {}
    rng_f: dict[tuple[int, int], int] = {}
    ranges_said = RANGE in kinds and max(compress(nbytes, map(eq, kinds, repeat(RANGE)))) >= 0
    if max(flops, default=-1) < 0 and not ranges_said:
        return dev, rng_b, rng_f
    for nid, kind, fl, nb, fp in zip(names, kinds, flags, nbytes, flops):
        if fl & UNRESOLVED:
            continue
        key = (nid, fl & MARKS)
        if kind == RANGE:
            if nb >= 0:
                rng_b[key] = rng_b.get(key, 0) + nb
            if fp >= 0:
                rng_f[key] = rng_f.get(key, 0) + fp
        elif fp >= 0:
            dev[key] = dev.get(key, 0) + fp
    return dev, rng_b, rng_f


def rekeyed(
    said: Mapping[tuple[int, int], int], groups: Mapping[tuple[int, int], Any]
) -> dict[tuple[int, int], int]:
    """Bytes or flops said of ranges (keyed by ``(name id, marks)`` of the range's rows) keyed
    as ``groups`` are (a range's work's marks): what was said of a name goes to its first group."""
    by_name: dict[int, int] = {}
    for (nid, _marks), v in said.items():
        by_name[nid] = by_name.get(nid, 0) + v
    first = {key[0]: key for key in sorted(groups, reverse=True)}
    return {key: by_name[nid] for nid, key in first.items() if nid in by_name}


@dataclass(frozen=True)
class Durations:
    """Per-call durations (ns) grouped by ``(name, marks)`` in each section of a profile, where
    marks are the record flags reports mark: ``HOST_TIMED`` (``*``), ``APPROXIMATE`` (``~``)."""

    host: dict[tuple[str, int], list[int]]
    device: dict[tuple[str, int], list[int]]
    #: Per range instance, the device time of the work launched inside it (``range_work``).
    device_ranges: dict[tuple[str, int], list[int]]
    nbytes: dict[tuple[str, int], int]
    markers: dict[str, int]
    #: Floating-point operations said per group of device rows, where any; bytes and flops
    #: said per group of device ranges (``kprof.range(name, bytes=, flops=)``).
    flops: dict[tuple[str, int], int] = field(default_factory=dict)
    range_nbytes: dict[tuple[str, int], int] = field(default_factory=dict)
    range_flops: dict[tuple[str, int], int] = field(default_factory=dict)
    #: Per range row a backend timed, its span on the device (first work's start to last
    #: work's end): the "Span" column beside a range's device time.
    range_spans: dict[tuple[str, int], list[int]] = field(default_factory=dict)


@dataclass(frozen=True)
class Summary:
    """Per-name statistics of a profile, section by section (``Profile.summary()``).

    ``span_ns``: the profiled span the percentages are shares of (``Profile.span_ns``).
    ``host``: rows of the host side (ranges, and the host calls of launches); ``device``: rows
    of device work (kernels and copies); ``device_ranges``: rows of the device time of ranges;
    each a list of :class:`kprof.SummaryRow`, largest total first. ``markers``: ``(name,
    count)`` of every marker name. ``device_row(name)`` and ``host_row(name)`` pick one row.
    """

    span_ns: int
    host: list[SummaryRow]
    device: list[SummaryRow]
    device_ranges: list[SummaryRow]
    markers: list[tuple[str, int]] = field(default_factory=list)

    def device_row(self, name: str) -> SummaryRow:
        """The device-side row of one name (kernels and copies), or KeyError."""
        for r in self.device:
            if r.name == name:
                return r
        raise KeyError(
            f"no device-side activity named {name!r}; names: {[r.name for r in self.device]}"
        )

    def host_row(self, name: str) -> SummaryRow:
        """The host-side row of one name (ranges, launches' host calls), or KeyError."""
        for r in self.host:
            if r.name == name:
                return r
        raise KeyError(
            f"no host-side activity named {name!r}; names: {[r.name for r in self.host]}"
        )
