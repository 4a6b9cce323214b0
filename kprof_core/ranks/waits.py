"""Which rank waits: each rank's device time split as ``Profile.analysis()`` splits it, side by
side, for ``kprof merge`` and ``kprof.mpi`` at the root. In a data-parallel job the ranks run
the same steps; the one whose device idles most waits for the others (or for its own host)."""

from __future__ import annotations

from collections.abc import Sequence

from kprof_core.analysis.idle import analyse
from kprof_core.analysis.idle_results import GroupAnalysis, pct
from kprof_core.data.profile_data import ProfileData


def rank_wait_lines(profiles: Sequence[ProfileData], labels: Sequence[str]) -> list[str]:
    """The section's lines: one row per process (its busiest device), then who waits most.
    Empty when no process recorded device work."""
    rows: list[tuple[str, GroupAnalysis, str]] = []
    for p, label in zip(profiles, labels):
        a = analyse(p)
        if a.devices and any(g.rows for g in a.devices):
            rows.append((label, a.device(), a.kind))
    if not rows:
        return []
    head = ("Busy", "Wait host", "Wait queue", "Unexplained", "Verdict", "Process")
    cells = [
        (
            pct(g.share(g.busy_ns)),
            pct(g.share(g.host_wait_ns)),
            pct(g.share(g.dependency_wait_ns)),
            pct(g.share(g.unexplained_ns)),
            kind,
            f"{label} ({g.title})",
        )
        for label, g, kind in rows
    ]
    widths = [max(len(head[i]), *(len(c[i]) for c in cells)) for i in range(5)]

    def line(c: Sequence[str]) -> str:
        return " " + "  ".join(x.rjust(w) for x, w in zip(c[:5], widths)) + "  " + c[5]

    out = ["Which rank waits (each process's busiest device over its own span):", line(head)]
    out += [line(c) for c in cells]
    if len(rows) > 1:
        label, g, _ = max(rows, key=lambda r: (r[1].share(r[1].idle_ns), r[0]))
        busiest = max(rows, key=lambda r: (r[1].share(r[1].busy_ns), r[0]))
        causes = {
            "waiting for its host": g.host_wait_ns,
            "waiting on another queue": g.dependency_wait_ns,
            "unexplained": g.unexplained_ns,
        }
        cause = max(causes, key=lambda k: causes[k])
        out.append(
            f" {label} waits most: its device idle {pct(g.share(g.idle_ns))} of its span "
            f"({pct(g.share(causes[cause]))} {cause}); {busiest[0]} is the busiest "
            f"({pct(busiest[1].share(busiest[1].busy_ns))} busy)"
        )
    return out
