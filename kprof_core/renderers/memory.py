"""The device-memory section of the text report: peak and live-at-end per device, then the
allocations still live at the end (possible leaks), in the summary tables' format (columns
right-aligned, two spaces apart, the name last and left-aligned, a ``─`` rule under the
header)."""

from __future__ import annotations

from collections.abc import Sequence

from kprof_core.data.memory import ALLOC, Memory
from kprof_core.data.timefmt import format_bytes, format_time

#: Live allocations listed at most (the rest are counted in one line).
LEAKS_SHOWN = 10


def _table(header: Sequence[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header[:-1])]

    def line(cells: Sequence[str]) -> str:
        return " " + "  ".join([*(c.rjust(w) for c, w in zip(cells, widths)), cells[-1]])

    return [
        line(header),
        line(["─" * w for w in widths] + ["─" * len(header[-1])]),
        *(line(r) for r in rows),
    ]


def memory_lines(m: Memory) -> list[str]:
    """The section, or no line when the profile saw no allocation or free."""
    if not m:
        return []
    t, peak, at, end = m.table, m.peak, m.peak_at, m.live_bytes_at_end
    allocs = [0] * len(m.devices)
    for d, k in zip(t.device, t.kind):
        allocs[d] += k == ALLOC
    frees = [0] * len(m.devices)
    for d, k in zip(t.device, t.kind):
        frees[d] += k != ALLOC
    rows = [
        [
            format_bytes(peak[label]),
            format_time(at[label]),
            format_bytes(end[label]),
            str(allocs[i]),
            str(frees[i]),
            label,
        ]
        for i, label in enumerate(m.labels)
    ]
    out = ["Device memory (allocations the backends reported):"]
    out += _table(["Peak", "Peak at", "Live at end", "Allocs", "Frees", "Device"], rows)
    if m.unmatched_frees:
        n = m.unmatched_frees
        out.append(
            f" ({n} free{'s' * (n != 1)} of memory allocated before the profile: not counted)"
        )
    live = m.live_at_end
    if live:
        out += ["", "Still allocated at the end (possible leaks), largest first:"]
        rows = [
            [
                format_bytes(a.nbytes),
                format_time(a.time_ns),
                a.device,
                a.site if a.site is not None else "-",
            ]
            for a in live[:LEAKS_SHOWN]
        ]
        out += _table(["Size", "Allocated at", "Device", "Site"], rows)
        if len(live) > LEAKS_SHOWN:
            rest = live[LEAKS_SHOWN:]
            out.append(f" ... and {len(rest)} more ({format_bytes(sum(a.nbytes for a in rest))})")
    return out


__all__ = ["memory_lines"]
