"""Turning records into summaries: per-name statistics of host and device activity."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass


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


def summarize(items: Iterable[tuple[str, bool, int, int]], span_ns: int) -> list[SummaryRow]:
    """Group ``(name, host_timed, duration_ns, nbytes)`` by name; largest total first.

    ``percent`` is each total's share of the profiled span (``span_ns``), as in KernelAbstractions.
    """
    groups: dict[tuple[str, bool], list[int]] = {}
    sizes: dict[tuple[str, bool], int] = {}
    for name, host_timed, dur, nbytes in items:
        key = (name, host_timed)
        groups.setdefault(key, []).append(dur)
        if nbytes >= 0:
            sizes[key] = sizes.get(key, 0) + nbytes
    rows = []
    for (name, host_timed), durs in groups.items():
        total = sum(durs)
        n = len(durs)
        mean = total / n
        # Floats, not statistics.pstdev: its exact arithmetic takes seconds on a million rows.
        std = (sum((d - mean) ** 2 for d in durs) / n) ** 0.5 if n > 1 else 0.0
        rows.append(SummaryRow(
            name=name,
            calls=n,
            total_ns=total,
            avg_ns=mean,
            min_ns=min(durs),
            max_ns=max(durs),
            median_ns=float(statistics.median(durs)),
            std_ns=std,
            percent=100.0 * total / span_ns if span_ns > 0 else 0.0,
            host_timed=host_timed,
            nbytes=sizes.get((name, host_timed)),
        ))
    rows.sort(key=lambda r: (-r.total_ns, r.name))
    return rows
