"""The text report: summary tables in the KernelAbstractions/nsys style, and the trace."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..processors import SummaryRow
from ..records import RANGE, UNRESOLVED, HostTable
from ..timefmt import format_rate, format_time

if TYPE_CHECKING:
    from ..session import Profile

FOOTNOTE = " * timed on the host, as the backend doesn't support timestamps"
COLUMNS = ("Time (%)", "Total time", "Calls", "Avg time", "Min time", "Max time", "Median")


def _table(title: str, rows: Sequence[SummaryRow], throughput: bool = False) -> list[str]:
    headers = list(COLUMNS) + (["Throughput"] if throughput else []) + ["Name"]
    body = []
    for r in rows:
        cells = [f"{r.percent:.1f} %", format_time(r.total_ns), str(r.calls), format_time(r.avg_ns),
                 format_time(r.min_ns), format_time(r.max_ns), format_time(r.median_ns)]
        if throughput:
            cells.append(format_rate(r.nbytes, r.total_ns) if r.nbytes else "")
        cells.append(r.label)
        body.append(cells)
    widths = [max(len(h), *(len(c[i]) for c in body)) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        parts = [c.rjust(w) for c, w in zip(cells[:-1], widths[:-1])]
        return (" " + "  ".join(parts) + "  " + cells[-1]).rstrip()

    out = [title, line(headers), line(["─" * w for w in widths[:-1]] + ["─" * len("Name")])]
    out += [line(c) for c in body]
    return out


def render_summary(p: Profile) -> list[str]:
    s = p.summary()
    nr, nk = p.counts
    out = [f"Profiled {format_time(p.span_ns)}, recording {nr} range{'s' * (nr != 1)} and "
           f"{nk} kernel{'s' * (nk != 1)}.", ""]
    if s.host:
        out += _table("Host-side activity:", s.host)
    else:
        out.append("No host-side activity was recorded.")
    out.append("")
    if s.device:
        out += _table("Device-side activity:", s.device, throughput=any(r.nbytes for r in s.device))
    else:
        out.append("No device-side activity was recorded.")
    if s.device_ranges:
        out.append("")
        out += _table("Device-side ranges (device time of the work enqueued inside each):",
                      s.device_ranges)
    if s.markers:
        out += ["", "Markers:", " Count  Marker", " ─────  ──────"]
        out += [f" {n:>5}  {name}" for name, n in s.markers]
    if any(r.host_timed for r in s.device) or any(r.host_timed for r in s.device_ranges):
        out += ["", FOOTNOTE]
    unresolved = p.unresolved
    if unresolved:
        reasons: dict[str, int] = {}
        for r in unresolved:
            reasons[r.error or "?"] = reasons.get(r.error or "?", 0) + 1
        out += ["", f"{len(unresolved)} device record{'s' * (len(unresolved) != 1)} could not be "
                "resolved and {} left out of the tables:".format("are" if len(unresolved) != 1 else "is")]
        out += [f"  {n} × {why}" for why, n in reasons.items()]
    return out


def trace_rows(p: Profile) -> list[tuple[int, int | None, str, str, int]]:
    """Chronological ``(start, duration, on, name, depth)`` rows, times relative to the start."""
    t, h, names, o = p.table, p.host, p.names, p.start_ns
    thread_no = {i: f"thread {i + 1}" for i in range(len(p.threads))}
    rows: list[tuple[int, int, str, str, int, bool]] = []  # start, end, on, name, kind, marker
    for i in range(len(h)):
        marker = h.kind[i] == HostTable.MARK
        rows.append((h.start[i] - o, h.end[i] - o, thread_no[h.thread[i]],
                     names[h.name[i]], 0, marker))
    for i in range(len(t)):
        name = names[t.name[i]]
        if t.kind[i] != RANGE:
            rows.append((t.launch_start[i] - o, t.launch_end[i] - o, thread_no[t.thread[i]], name, 0, False))
        if t.flags[i] & UNRESOLVED:
            continue
        q = p.queues[t.queue[i]]
        on = q.row_name(thread_no[t.thread[i]])
        if t.flags[i] & 1:  # host timed
            name += " *"
        rows.append((t.start[i] - o, t.start[i] - o + t.duration[i], on, name, 0, False))
    # Longer first at equal starts, so enclosing ranges come before what they contain.
    rows.sort(key=lambda r: (r[0], -(r[1] - r[0])))
    out: list[tuple[int, int | None, str, str, int]] = []
    open_until: dict[str, list[int]] = {}
    for start, end, on, name, _k, marker in rows:
        stack = open_until.setdefault(on, [])
        while stack and stack[-1] <= start and not (stack[-1] == start and end == start):
            stack.pop()
        depth = len(stack)
        if marker:
            out.append((start, None, on, "◆ " + name, depth))
            continue
        out.append((start, end - start, on, name, depth))
        stack.append(end)
    return out


def render_trace(p: Profile) -> list[str]:
    rows = trace_rows(p)
    cells = [(format_time(s), "" if d is None else format_time(d), on, "  " * depth + name)
             for s, d, on, name, depth in rows]
    headers = ("Start", "Duration", "On", "Name")
    w = [max(len(headers[i]), *(len(c[i]) for c in cells)) if cells else len(headers[i]) for i in range(3)]
    out = ["Trace:", f" {headers[0]:>{w[0]}}  {headers[1]:>{w[1]}}  {headers[2]:<{w[2]}}  Name"]
    out += [f" {a:>{w[0]}}  {b:>{w[1]}}  {c:<{w[2]}}  {n}".rstrip() for a, b, c, n in cells]
    if p.clocks:
        out += ["", "Device clocks placed on the host timeline:"]
        out += [f"  {c.backend} {c.device}: {c.describe()}" for c in p.clocks.values()]
    return out


def render(p: Profile, trace: bool = False) -> str:
    out = render_summary(p)
    if trace:
        out += [""] + render_trace(p)
    return "\n".join(out)
