"""Turning records into summaries: per-name statistics of host and device activity."""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class SummaryRow:
    """Statistics of one name in one section of the report (times in nanoseconds).

    ``name``; ``calls``: how many records; ``total_ns``, ``avg_ns``, ``min_ns``, ``max_ns``,
    ``median_ns``, ``std_ns`` (population standard deviation) of their durations;
    ``percent``: ``total_ns`` as a share of the profiled span; ``host_timed``: the records
    were timed on the host (shown with ``*``); ``nbytes``: bytes moved, for copies, else None.
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

    @property
    def label(self) -> str:
        """The name as the report shows it (with `` *`` when host-timed)."""
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
            host_timed=host_timed,
            nbytes=sizes.get((name, host_timed)),
        ))
    rows.sort(key=lambda r: (-r.total_ns, r.name))
    return rows
