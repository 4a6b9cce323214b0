"""The cross-rank summary: each kernel's total device time and calls, min/mean/max over the
ranks (or processes) of a combined or merged run, and its text table."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kprof_core.data.records import RANGE, UNRESOLVED
from kprof_core.data.timefmt import format_time
from kprof_core.ranks.combine import source_labels
from kprof_core.renderers.terminal import lines
from kprof_core.result import Profile


@dataclass(frozen=True)
class CrossRankRow:
    """One kernel (or copy) name across ranks: min/mean/max over ranks of its total device
    time and of its calls. A rank that never ran it counts as 0 (that is imbalance too)."""

    name: str
    ranks: int
    calls_min: int
    calls_mean: float
    calls_max: int
    total_min_ns: int
    total_mean_ns: float
    total_max_ns: int
    min_rank: str
    max_rank: str

    @property
    def imbalance(self) -> float:
        """max / mean of the total time over ranks: 1.0 when perfectly balanced."""
        return self.total_max_ns / self.total_mean_ns if self.total_mean_ns else 1.0


def _totals(p: Profile, rows: Sequence[int] | range) -> dict[str, list[int]]:
    t, names = p.table, p.names
    acc: dict[str, list[int]] = {}
    for i in rows:
        if t.kind[i] == RANGE or t.flags[i] & UNRESOLVED:
            continue
        a = acc.setdefault(names[t.name[i]], [0, 0])
        a[0] += 1
        a[1] += t.duration[i]
    return acc


def per_source_totals(profiles: Sequence[Profile]) -> list[tuple[str, dict[str, list[int]]]]:
    """(label, {name: [calls, total_ns]}) for each process; combined profiles are split back
    into their sources."""
    groups: list[tuple[str, dict[str, list[int]]]] = []
    labels = source_labels(profiles)
    for p, label in zip(profiles, labels):
        sources = p.meta.get("sources")
        qsrc = p.meta.get("queue_source")
        if isinstance(sources, list) and isinstance(qsrc, list) and len(qsrc) == len(p.queues):
            rows: list[list[int]] = [[] for _ in sources]
            for i in range(len(p.table)):
                rows[qsrc[p.table.queue[i]]].append(i)
            for s, r in zip(sources, rows):
                groups.append((str(s.get("label", "?")), _totals(p, r)))
        else:
            groups.append((label, _totals(p, range(len(p.table)))))
    return groups


def cross_rank_summary(profiles: Sequence[Profile]) -> list[CrossRankRow]:
    """Per kernel name: min, mean and max over ranks of calls and total device time.

    Sorted by the slowest rank's total (it sets the pace of a bulk-synchronous job).
    """
    groups = per_source_totals(profiles)
    names = sorted({n for _, g in groups for n in g})
    rows = []
    for name in names:
        calls = [g.get(name, [0, 0])[0] for _, g in groups]
        totals = [g.get(name, [0, 0])[1] for _, g in groups]
        lo = min(range(len(groups)), key=lambda k: totals[k])
        hi = max(range(len(groups)), key=lambda k: totals[k])
        rows.append(
            CrossRankRow(
                name=name,
                ranks=sum(1 for c in calls if c),
                calls_min=min(calls),
                calls_mean=sum(calls) / len(calls),
                calls_max=max(calls),
                total_min_ns=totals[lo],
                total_mean_ns=sum(totals) / len(totals),
                total_max_ns=totals[hi],
                min_rank=groups[lo][0],
                max_rank=groups[hi][0],
            )
        )
    rows.sort(key=lambda r: (-r.total_max_ns, r.name))
    return rows


_SINGULAR = {"ranks": "rank", "processes": "process"}


def format_cross_rank(rows: Sequence[CrossRankRow], nranks: int, unit: str = "ranks") -> str:
    """The cross-rank summary as a text table (``unit``: what the sources are called)."""
    if not rows:
        return f"No device-side activity was recorded on any of the {nranks} {unit}."
    headers = (
        "Min total",
        "Mean total",
        "Max total",
        "Max/mean",
        "Calls (min/mean/max)",
        unit.capitalize(),
        "Slowest",
        "Fastest",
        "Name",
    )
    body = [
        (
            format_time(r.total_min_ns),
            format_time(r.total_mean_ns),
            format_time(r.total_max_ns),
            f"{r.imbalance:.2f}",
            f"{r.calls_min}/{r.calls_mean:.3g}/{r.calls_max}",
            f"{r.ranks}/{nranks}",
            r.max_rank,
            r.min_rank,
            r.name,
        )
        for r in rows
    ]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return (
            " " + "  ".join(c.rjust(w) for c, w in zip(cells[:-1], widths[:-1])) + "  " + cells[-1]
        ).rstrip()

    out = [
        f"Device time per kernel across {nranks} {unit} (total per {_SINGULAR.get(unit, unit)}):",
        line(headers),
        line(["─" * w for w in widths[:-1]] + ["─" * 4]),
    ]
    out += [line(b) for b in body]
    return lines(out)


__all__ = [
    "CrossRankRow",
    "cross_rank_summary",
    "format_cross_rank",
    "per_source_totals",
]
