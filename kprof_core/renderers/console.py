"""The text report: summary tables in the KernelAbstractions/nsys style, and the trace."""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from kprof_core.data.records import APPROXIMATE, HOST_TIMED, QueueRecord
from kprof_core.data.site_summary import SiteRow, StackRow
from kprof_core.data.summary import Summary, SummaryRow
from kprof_core.data.timefmt import format_time
from kprof_core.renderers.analysis import analysis_lines, report_analysis, skipped_note
from kprof_core.renderers.common import (
    RANGES_TITLE,
    bounds_notes,
    footnotes,
    headline,
    summary_cells,
)
from kprof_core.renderers.memory import memory_lines
from kprof_core.renderers.terminal import lines
from kprof_core.renderers.timeline import DEVICE, HOST_RANGE, MARK, Timeline, Track, device_title

if TYPE_CHECKING:
    from kprof_core.data.profile_data import ProfileData


def _table(
    title: str, rows: Sequence[SummaryRow], throughput: bool = False, config: bool = False
) -> list[str]:
    """A summary table (``summary_cells``: ``throughput`` adds rates where rows have them),
    the launch configuration before the name with ``config``."""
    headers, body = summary_cells(rows, throughput)
    headers += ["Config", "Name"] if config else ["Name"]
    for r, cells in zip(rows, body):
        if config:
            cells.append(r.config or "-")
        cells.append(r.label)
    widths = [max(len(h), *(len(c[i]) for c in body)) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        parts = [c.rjust(w) for c, w in zip(cells[:-1], widths[:-1])]
        if config:  # text: left-aligned
            parts[-1] = cells[-2].ljust(widths[-2])
        return (" " + "  ".join(parts) + "  " + cells[-1]).rstrip()

    out = [title, line(headers), line(["─" * w for w in widths[:-1]] + ["─" * len("Name")])]
    out += [line(c) for c in body]
    return out


def rows_lines(title: str, rows: Sequence[SiteRow | StackRow], top: int | None = None) -> list[str]:
    """A table of device time per launch site or stack (``summary(by="line")`` or
    ``by="stack"``), each row with the kernels launched there; the first ``top`` rows."""
    if not rows:
        return [f"{title}: nothing with a known launch site (profile(sites=True) records them)"]
    shown = rows if top is None else rows[:top]
    if len(shown) < len(rows):
        title += f" (top {len(shown)} of {len(rows)})"
    named = []
    for r in shown:
        kernels = ", ".join(k.name for k in r.kernels[:3]) + (", …" if len(r.kernels) > 3 else "")
        named.append(replace(r.stats, name=f"{r.stats.name}  ({kernels})"))
    return _table(f"{title}:", named)


def _by_line(p: ProfileData, top: int = 10) -> list[str]:
    """The "Device time by line" section (the ``top`` sites), when launch sites are known."""
    rows = p.summary(by="line") if p.sites else []
    return ["", *rows_lines("Device time by line", rows, top)] if rows else []


def summary_lines(s: Summary, by: str | tuple[str, ...] = "name") -> list[str]:
    """The summary's three tables (host, device, device ranges), as the report prints them."""
    out: list[str] = []
    if s.host:
        out += _table("Host-side activity:", s.host)
    else:
        out.append("No host-side activity was recorded.")
    out.append("")
    if s.device:
        title = (
            "Device-side activity:"
            if by in ("name", "line")
            else f"Device-side activity by {_by(by)}:"
        )
        out += _table(title, s.device, True, config=by == ("name", "config"))
    else:
        out.append("No device-side activity was recorded.")
    if s.device_ranges:
        out.append("")
        out += _table(
            RANGES_TITLE + ":",
            s.device_ranges,
            True,
        )
    return out


def render_summary(p: ProfileData, by: str | tuple[str, ...] = "name") -> list[str]:
    s = p.summary(by=by if by != "line" else "name")
    out = [headline(p), "", *summary_lines(s, by)]
    out += _by_line(p)
    if s.markers:
        out += ["", "Markers:", " Count  Marker", " ─────  ──────"]
        out += [f" {n:>5}  {name}" for name, n in s.markers]
    if p.memory:
        out += ["", *memory_lines(p.memory)]
    if s.device:
        a = report_analysis(p)
        out += ["", *(analysis_lines(a) if a else [skipped_note()])]
    for note in footnotes(s):
        out += ["", note]
    said = p.meta.get("notes")  # what backends said the profile may lack (report_notes)
    if isinstance(said, list):
        out += [x for n in said if isinstance(n, str) for x in ("", f" ! {n}")]
    out += [x for n in bounds_notes(p.meta) for x in ("", f" ! {n}")]
    unresolved = p.unresolved
    if unresolved:
        reasons: dict[str, int] = {}
        for r in unresolved:
            reasons[r.error or "?"] = reasons.get(r.error or "?", 0) + 1
        out += [
            "",
            f"{len(unresolved)} device record{'s' * (len(unresolved) != 1)} could not be "
            "resolved and {} left out of the tables:".format(
                "are" if len(unresolved) != 1 else "is"
            ),
        ]
        out += [f"  {n} × {why}" for why, n in reasons.items()]
    return out


def trace_rows(p: ProfileData) -> list[tuple[int, int | None, str, str, int]]:
    """Chronological ``(start, duration, on, name, depth)`` rows, times relative to the start.

    ``on`` is the row: ``thread N`` for host records (ranges, launches, markers), the queue and
    launching thread for device records (``OpenCL <device>, queue 1, thread 2``). ``depth`` is
    the nesting level within that row; markers have no duration and read ``◆ name``; records
    timed on the host end in ``*``; unresolved device records are left out (their launch stays).
    """
    tl = Timeline(p)
    names, t, h, o = p.names, p.table, p.host, p.start_ns

    def rows(track: Track) -> Iterator[tuple[int, int | None, str, str, int]]:
        on = tl.row_name(track)
        for item, depth in zip(track.items, track.depths):
            s, e = tl.bounds(item)
            i, tag = item >> 2, item & 3
            if tag == MARK:
                yield s - o, None, on, "◆ " + names[h.name[i]], depth
                continue
            name = names[h.name[i]] if tag == HOST_RANGE else names[t.name[i]]
            if tag == DEVICE and t.flags[i] & HOST_TIMED:
                name += " *"
            elif tag == DEVICE and t.flags[i] & APPROXIMATE:
                name += " ~"
            yield s - o, e - s, on, name, depth

    # Each track is already in order (enclosing entries first); merge them by start.
    return list(heapq.merge(*(rows(tr) for tr in tl.tracks()), key=lambda r: r[0]))


#: Indentation stops growing at this depth (10,000 nested ranges made a 201 MB trace); deeper
#: entries say their depth instead.
MAX_INDENT = 32


def _indented(name: str, depth: int) -> str:
    if depth <= MAX_INDENT:
        return "  " * depth + name
    return "  " * MAX_INDENT + f"[depth {depth}] {name}"


def render_trace(p: ProfileData) -> list[str]:
    rows = trace_rows(p)
    cells = [
        (format_time(s), "" if d is None else format_time(d), on, _indented(name, depth))
        for s, d, on, name, depth in rows
    ]
    headers = ("Start", "Duration", "On", "Name")
    w = [
        max(len(headers[i]), *(len(c[i]) for c in cells)) if cells else len(headers[i])
        for i in range(3)
    ]
    out = ["Trace:", f" {headers[0]:>{w[0]}}  {headers[1]:>{w[1]}}  {headers[2]:<{w[2]}}  Name"]
    out += [f" {a:>{w[0]}}  {b:>{w[1]}}  {c:<{w[2]}}  {n}".rstrip() for a, b, c, n in cells]
    if p.clocks:
        out += ["", "Device clocks placed on the host timeline:"]
        out += [
            f"  {device_title(QueueRecord(c.backend, c.device, '', ''))}: {c.describe()}"
            for c in p.clocks.values()
        ]
    return out


def _by(by: str | tuple[str, ...]) -> str:
    return " and ".join(by) if isinstance(by, tuple) else by


def render(p: ProfileData, trace: bool = False, by: str | tuple[str, ...] = "name") -> str:
    out = render_summary(p, by)
    if trace:
        out += ["", *render_trace(p)]
    return lines(out)
