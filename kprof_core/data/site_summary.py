"""Device time per launch site: ``Profile.summary(by="line")`` and the report's "Device time
by line" section."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kprof_core.data.records import MARKS, RANGE, UNRESOLVED, DeviceTable
from kprof_core.data.sites import Site
from kprof_core.data.summary import SummaryRow, rows_of

#: How reports name the launches whose site is not known.
UNKNOWN_SITE = "(site unknown)"


@dataclass(frozen=True)
class SiteRow:
    """Device time of the kernels and copies launched from one line of the user's code.

    ``site``: the ``kprof.Site`` (None: launches whose site is unknown); ``stats``: a
    ``SummaryRow`` over every kernel and copy launched there, named by the site's label
    (``"train.py:42 step"``), its ``percent`` a share of the profiled span; ``kernels``: a
    ``SummaryRow`` per name launched there, largest total first.
    """

    site: Site | None
    stats: SummaryRow
    kernels: list[SummaryRow]


def site_rows(
    table: DeviceTable, names: Sequence[str], sites: Sequence[Site], span_ns: int
) -> list[SiteRow]:
    """One ``SiteRow`` per launch site that launched device work with a device time, largest
    total first (ranges' device time is not counted: it is the work's, counted already)."""
    groups: dict[int, dict[tuple[str, int], list[int]]] = {}
    sizes: dict[int, dict[tuple[str, int], int]] = {}
    t = table
    for nid, kind, flags, dur, nbytes, site in zip(
        t.name, t.kind, t.flags, t.duration, t.nbytes, t.site
    ):
        if kind == RANGE or flags & UNRESOLVED:
            continue
        key = (names[nid], flags & MARKS)
        groups.setdefault(site, {}).setdefault(key, []).append(dur)
        if nbytes >= 0:
            moved = sizes.setdefault(site, {})
            moved[key] = moved.get(key, 0) + nbytes
    out = []
    for site, by_name in groups.items():
        label = sites[site].label if site >= 0 else UNKNOWN_SITE
        every = [d for durs in by_name.values() for d in durs]
        marks = 0
        for _name, m in by_name:
            marks |= m  # marked (*, ~) when any of its launches is
        (stats,) = rows_of({(label, marks): every}, {}, span_ns)
        out.append(
            SiteRow(
                sites[site] if site >= 0 else None,
                stats,
                rows_of(by_name, sizes.get(site, {}), span_ns),
            )
        )
    out.sort(key=lambda r: (-r.stats.total_ns, r.stats.name))
    return out
