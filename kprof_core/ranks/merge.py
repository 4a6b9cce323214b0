"""Several ranks' profiles as one: the report of ``kprof merge`` and of ``kprof.mpi`` at the
root (sources, clock alignment, cross-rank summary), and the views placed on one timeline."""

from __future__ import annotations

import copy
from collections.abc import Sequence

from kprof_core.data.timefmt import format_time
from kprof_core.ranks.combine import ClockPlacement, clock_placements
from kprof_core.ranks.combine import source_labels as _source_labels
from kprof_core.ranks.summary import cross_rank_summary, format_cross_rank
from kprof_core.ranks.waits import rank_wait_lines
from kprof_core.renderers.terminal import lines
from kprof_core.result import Profile


def _rank_key(p: Profile) -> tuple[int, int]:
    r = p.meta.get("rank")
    return (0, r) if isinstance(r, int) and not isinstance(r, bool) else (1, 0)


def source_lines(profiles: Sequence[Profile], placements: Sequence[ClockPlacement]) -> list[str]:
    """One line per process: label, host, pid, what it recorded and how its clock was placed."""
    labels = _source_labels(profiles)
    lines = []
    for p, label, pl in zip(profiles, labels, placements):
        sources = p.meta.get("sources")
        if isinstance(sources, list):
            lines.append(f"  {len(sources)} processes merged before:")
            for s in sources:
                m = s.get("meta", {})
                err = s.get("error_ns")
                lines.append(
                    f"    {s.get('label', '?')}: host {m.get('host', '?')} pid "
                    f"{m.get('pid', '?')}; clock: {s.get('method', '?')}, error "
                    f"{'unknown' if err is None else '≤ ' + format_time(err)}"
                )
            continue
        nr, nk = p.counts
        err = "error unknown" if pl.error_ns is None else f"error ≤ {format_time(pl.error_ns)}"
        lines.append(
            f"  {label}: host {p.meta.get('host', '?')} pid {p.meta.get('pid', '?')}, "
            f"{nk} kernel{'s' * (nk != 1)}, {nr} range{'s' * (nr != 1)}; "
            f"clock: {pl.method}, {err}"
        )
    return lines


def merge_report(profiles: Sequence[Profile]) -> str:
    """What ``kprof merge`` prints: the processes, how their clocks were aligned, and the
    cross-rank summary (per kernel: min, mean and max over ranks of its total device time)."""
    placements = clock_placements(profiles)
    rows = cross_rank_summary(profiles)
    nsources = sum(
        len(p.meta["sources"]) if isinstance(p.meta.get("sources"), list) else 1 for p in profiles
    )
    out = [f"Merged {nsources} process{'es' * (nsources != 1)} onto one timeline:"]
    out += source_lines(profiles, placements)
    ranked = all(
        isinstance(p.meta.get("rank"), int) or isinstance(p.meta.get("sources"), list)
        for p in profiles
    )
    waits = rank_wait_lines(profiles, _source_labels(profiles))
    # Each part escaped line by line: names in files must not act on the terminal.
    return (
        lines([*out, ""])
        + "\n"
        + format_cross_rank(rows, nsources, "ranks" if ranked else "processes")
        + ("\n\n" + lines(waits) if waits else "")
    )


def aligned_views(profiles: Sequence[Profile]) -> list[Profile]:
    """Shallow copies whose ``meta["clock_offset_ns"]`` is the placement ``combine`` would use,
    so exporters that honour that key draw them on the common timeline."""
    views = []
    for p, pl in zip(profiles, clock_placements(profiles)):
        v = copy.copy(p)
        v.meta = {**p.meta, "clock_offset_ns": pl.offset_ns}
        views.append(v)
    return views
