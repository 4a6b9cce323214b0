"""The analysis section (``Profile.analysis()``) as text lines and as HTML: a verdict, then a
row per device (and per queue where a device has several)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kprof_core.analysis.idle import analyse
from kprof_core.analysis.idle_columns import compiled_helpers
from kprof_core.analysis.idle_results import CAUSES, Analysis, GroupAnalysis, pct
from kprof_core.data.timefmt import format_time

if TYPE_CHECKING:
    from kprof_core.data.profile_data import ProfileData

#: Reports (print(p), the HTML page) leave the section out past this many device rows when the
#: compiled helpers are not in use: the Python twin takes several seconds per million rows
#: (bench/analysis.py), the compiled one a fraction of a second. ``p.analysis()`` still works.
PURE_REPORT_LIMIT = 200_000

SKIPPED = (
    "(where the device time went: left out of the report above {n} device rows without the "
    "compiled recorder; p.analysis() computes it)"
)


def skipped_note() -> str:
    """What the reports say where they leave the section out."""
    return SKIPPED.format(n=PURE_REPORT_LIMIT)


def report_analysis(p: ProfileData) -> Analysis | None:
    """The analysis the reports show, or None where it is left out (see PURE_REPORT_LIMIT)."""
    if compiled_helpers() is None and len(p.table) > PURE_REPORT_LIMIT:
        return None
    return analyse(p)


HEADERS = (
    "Busy",
    *(h for h, _f, _w in CAUSES),
    "Short kernels",
    "Launch→start p50/p90/max",
    "Depth max/mean",
    "Device / queue",
)


def _cells(g: GroupAnalysis) -> list[str]:
    short = (
        f"{pct(g.short_rows / g.kernels)} ({pct(g.short_ns / g.busy_ns if g.busy_ns else 0)} of busy)"
        if g.kernels
        else "(no kernels)"
        if g.rows
        else ""
    )
    d = g.delays
    delays = (
        f"{format_time(d.p50)} / {format_time(d.p90)} / {format_time(d.max)}"
        if d is not None
        else "(clock not aligned)"
        if g.rows
        else ""
    )
    return [
        pct(g.share(g.busy_ns)),
        *(pct(g.share(getattr(g, f))) for _h, f, _w in CAUSES),
        short,
        delays,
        f"{g.depth_max} / {g.depth_mean:.1f}",
        g.title,
    ]


def _groups(a: Analysis) -> list[GroupAnalysis]:
    out: list[GroupAnalysis] = []
    for d in a.devices:
        out.append(d)
        mine = [q for q in a.queues if q.key.startswith(d.key + "/")]
        if len(mine) > 1:
            out += mine
    return out


def _title(a: Analysis) -> str:
    where = (
        f"{a.windows} instance{'s' * (a.windows != 1)} of range {a.range!r}, "
        f"{format_time(a.window_ns)}"
        if a.range is not None
        else f"active span {format_time(a.window_ns)}"
    )
    return f"Where the device time went ({where}):"


def _outside(a: Analysis) -> list[str]:
    """What the active span leaves out, in words (empty for a range's instances)."""
    if a.before_ns is None or not a.devices:
        return []
    return [
        f"the active span runs from the first device work to the end of the last; the "
        f"{format_time(a.before_ns)} before it (start-up) and {format_time(a.after_ns or 0)} "
        f"after it are left out"
    ]


def analysis_lines(a: Analysis) -> list[str]:
    """The section as lines (for ``print(p)``, ``kprof show``)."""
    out = [_title(a), " " + a.verdict]
    if not a.devices:
        return out + [f" ({n})" for n in a.notes]  # why nothing was analysed
    body = [_cells(g) for g in _groups(a)]
    widths = [max(len(h), *(len(c[i]) for c in body)) for i, h in enumerate(HEADERS)]

    def line(cells: Sequence[str]) -> str:
        parts = [c.rjust(w) for c, w in zip(cells[:-1], widths[:-1])]
        return (" " + "  ".join(parts) + "  " + cells[-1]).rstrip()

    out += [line(HEADERS), line(["─" * w for w in widths[:-1]] + ["─" * 14])]
    out += [line(c) for c in body]
    titles = {g.key: g.title for g in a.queues}
    for d in a.devices:
        if d.overlap_ns:
            out.append(
                f" {d.title}: two or more queues busy at once for {format_time(d.overlap_ns)} "
                f"({pct(d.share(d.overlap_ns))} of the span)"
            )
    for ka, kb, ns in a.overlaps:
        out.append(f"   {titles[ka]} and {titles[kb]} overlapped {format_time(ns)}")
    out += [f" ({n})" for n in [*_outside(a), *a.notes]]
    return out


def analysis_html(a: Analysis) -> str:
    """The section as an HTML fragment (the HTML page and notebooks)."""
    rows = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in _cells(g)) + "</tr>"
        for g in _groups(a)
    )
    head = "".join(f"<th>{html.escape(h)}</th>" for h in HEADERS)
    notes = "".join(f"<p class='kprof-note'>{html.escape(n)}</p>" for n in [*_outside(a), *a.notes])
    table = f"<table class='kprof-analysis'><tr>{head}</tr>{rows}</table>" if a.devices else ""
    return (
        f"<section class='kprof-analysis'><h3>{html.escape(_title(a))}</h3>"
        f"<p><b>{html.escape(a.verdict)}</b></p>{table}{notes}</section>"
    )
