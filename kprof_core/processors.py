"""Turning records into summaries: per-name statistics of host and device activity."""

from __future__ import annotations

import math
import operator
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import islice


@dataclass(frozen=True)
class SummaryRow:
    """Statistics of one name in one section of the report (times in nanoseconds)."""

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

    @property
    def label(self) -> str:
        return f"{self.name} *" if self.host_timed else self.name


def rows_of(groups: Mapping[tuple[str, bool], list[int]], sizes: Mapping[tuple[str, bool], int],
            span_ns: int) -> list[SummaryRow]:
    """Summary rows of durations already grouped by ``(name, host_timed)``; largest total first."""
    rows = []
    for (name, host_timed), durs in groups.items():
        n = len(durs)
        total = sum(durs)
        mean = total / n
        # Floats over C-level map, not statistics.pstdev: its exact arithmetic (and a Python
        # loop) take seconds on a million rows.
        var = math.fsum(map(operator.mul, durs, durs)) / n - mean * mean if n > 1 else 0.0
        lo, hi, median = _order_stats(durs, n)
        rows.append(SummaryRow(
            name=name,
            calls=n,
            total_ns=total,
            avg_ns=mean,
            min_ns=lo,
            max_ns=hi,
            median_ns=median,
            std_ns=math.sqrt(var) if var > 0 else 0.0,
            percent=100.0 * total / span_ns if span_ns > 0 else 0.0,
            host_timed=host_timed,
            nbytes=sizes.get((name, host_timed)),
        ))
    rows.sort(key=lambda r: (-r.total_ns, r.name))
    return rows


def _order_stats(durs: Sequence[int], n: int) -> tuple[int, int, float]:
    """(min, max, median) of ``durs``. Durations repeat a lot (a kernel takes a few thousand
    distinct nanosecond values over a million calls): counting them (C-level ``Counter``) and
    sorting the distinct values is 5× faster than sorting them all; else, sort."""
    if n > 4096 and len(set(islice(durs, 4096))) < 1024:
        counts = Counter(durs)
        values = sorted(counts)
        wanted = (n // 2,) if n % 2 else (n // 2 - 1, n // 2)
        found: list[int] = []
        seen = 0
        for v in values:
            seen += counts[v]
            while len(found) < len(wanted) and wanted[len(found)] < seen:
                found.append(v)
            if len(found) == len(wanted):
                break
        return values[0], values[-1], float(found[0]) if n % 2 else (found[0] + found[1]) / 2
    ordered = sorted(durs)
    mid = n // 2
    return (ordered[0], ordered[-1],
            float(ordered[mid]) if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2)
