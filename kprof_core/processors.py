"""Turning records into summaries: per-name statistics of host and device activity."""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping
from dataclasses import dataclass

from .records import APPROXIMATE, HOST_TIMED


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
    approximate: bool = False

    @property
    def label(self) -> str:
        return f"{self.name} *" if self.host_timed else f"{self.name} ~" if self.approximate else self.name


def rows_of(groups: Mapping[tuple[str, int], list[int]], sizes: Mapping[tuple[str, int], int],
            span_ns: int) -> list[SummaryRow]:
    """Summary rows of durations already grouped by ``(name, marks)``, where marks are the
    record flags ``HOST_TIMED`` and ``APPROXIMATE`` (or a bool: host-timed); largest total first."""
    rows = []
    for (name, marks), durs in groups.items():
        n = len(durs)
        total = sum(durs)
        mean = total / n
        # Floats over C-level map, not statistics.pstdev: its exact arithmetic (and a Python
        # loop) take seconds on a million rows.
        var = math.fsum(map(operator.mul, durs, durs)) / n - mean * mean if n > 1 else 0.0
        ordered = sorted(durs)
        mid = n // 2
        median = float(ordered[mid]) if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2
        rows.append(SummaryRow(
            name=name,
            calls=n,
            total_ns=total,
            avg_ns=mean,
            min_ns=ordered[0],
            max_ns=ordered[-1],
            median_ns=median,
            std_ns=math.sqrt(var) if var > 0 else 0.0,
            percent=100.0 * total / span_ns if span_ns > 0 else 0.0,
            host_timed=bool(marks & HOST_TIMED),
            nbytes=sizes.get((name, marks)),
            approximate=bool(marks & APPROXIMATE),
        ))
    rows.sort(key=lambda r: (-r.total_ns, r.name))
    return rows
