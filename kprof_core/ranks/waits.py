"""Which rank waits: each rank's device time split as ``Profile.analysis()`` splits it, side by
side, for ``kprof merge`` and ``kprof.mpi`` at the root. In a data-parallel job the ranks run
the same steps; the one whose device idles most waits for the others (or for its own host)."""

from __future__ import annotations

from collections.abc import Sequence

from kprof_core.analysis.idle import analyse
from kprof_core.analysis.idle_results import CAUSES, GroupAnalysis, pct
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
    head = ("Busy", *(h for h, _f, _w in CAUSES), "Verdict", "Process")
    cells = [
        (
            pct(g.share(g.busy_ns)),
            *(pct(g.share(getattr(g, f))) for _h, f, _w in CAUSES),
            kind,
            f"{label} ({g.title})",
        )
        for label, g, kind in rows
    ]
    n = len(head) - 1
    widths = [max(len(head[i]), *(len(c[i]) for c in cells)) for i in range(n)]

    def line(c: Sequence[str]) -> str:
        return " " + "  ".join(x.rjust(w) for x, w in zip(c[:n], widths)) + "  " + c[n]

    out = ["Which rank waits (each process's busiest device over its own active span):", line(head)]
    out += [line(c) for c in cells]
    if len(rows) > 1:
        label, g, _ = max(rows, key=lambda r: (r[1].share(r[1].idle_ns), r[0]))
        busiest = max(rows, key=lambda r: (r[1].share(r[1].busy_ns), r[0]))
        causes = {words: getattr(g, f) for _h, f, words in CAUSES}
        cause = max(causes, key=lambda k: causes[k])
        out.append(
            f" {label} waits most: its device idle {pct(g.share(g.idle_ns))} of its span "
            f"({pct(g.share(causes[cause]))} {cause}); {busiest[0]} is the busiest "
            f"({pct(busiest[1].share(busiest[1].busy_ns))} busy)"
        )
    return out
