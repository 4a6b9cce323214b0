"""Device time per launch site and per launch stack: ``Profile.summary(by="line")``, the
report's "Device time by line" section, and ``Profile.summary(by="stack")``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
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


@dataclass(frozen=True)
class StackRow:
    """Device time of the kernels and copies launched from one Python stack.

    ``stack``: its frames (``kprof.Site``), outermost first; a launch with only its site
    known has that one frame, and one with neither ``()``. ``stats``: a ``SummaryRow`` over
    every kernel and copy launched from it, named by its frames' labels joined with `` > ``;
    ``kernels``: a ``SummaryRow`` per name launched from it, largest total first.
    """

    stack: tuple[Site, ...]
    stats: SummaryRow
    kernels: list[SummaryRow]


def site_rows(
    table: DeviceTable, names: Sequence[str], sites: Sequence[Site], span_ns: int
) -> list[SiteRow]:
    """One ``SiteRow`` per launch site that launched device work with a device time, largest
    total first (ranges' device time is not counted: it is the work's, counted already)."""
    out = []
    for site, stats, kernels in _grouped(
        table, table.site, names, span_ns, lambda s: sites[s].label if s >= 0 else UNKNOWN_SITE
    ):
        out.append(SiteRow(sites[site] if site >= 0 else None, stats, kernels))
    return out


def stack_rows(
    table: DeviceTable,
    names: Sequence[str],
    sites: Sequence[Site],
    stacks: Sequence[tuple[Site, ...]],
    span_ns: int,
) -> list[StackRow]:
    """One ``StackRow`` per distinct launch stack (rows without one: their site alone), as
    ``site_rows``."""
    n = len(sites)
    # A row's key: its stack id past the sites' ids, else its site id (-1: neither).
    if table.stack:
        keys = [n + st if st >= 0 else s for st, s in zip(table.stack, table.site)]
    else:
        keys = list(table.site)

    def frames(k: int) -> tuple[Site, ...]:
        return stacks[k - n] if k >= n else (sites[k],) if k >= 0 else ()

    def label(k: int) -> str:
        return " > ".join(f.label for f in frames(k)) or UNKNOWN_SITE

    return [
        StackRow(frames(k), stats, kernels)
        for k, stats, kernels in _grouped(table, keys, names, span_ns, label)
    ]


def _grouped(
    table: DeviceTable,
    keys: Sequence[int],
    names: Sequence[str],
    span_ns: int,
    label_of: Callable[[int], str],
) -> list[tuple[int, SummaryRow, list[SummaryRow]]]:
    """Device time grouped by ``keys`` (one per row): per key, a ``SummaryRow`` named
    ``label_of(key)`` and one per kernel name, largest total first."""
    groups: dict[int, dict[tuple[str, int], list[int]]] = {}
    sizes: dict[int, dict[tuple[str, int], int]] = {}
    t = table
    for nid, kind, flags, dur, nbytes, site in zip(
        t.name, t.kind, t.flags, t.duration, t.nbytes, keys
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
        label = label_of(site)
        every = [d for durs in by_name.values() for d in durs]
        marks = 0
        for _name, m in by_name:
            marks |= m  # marked (*, ~) when any of its launches is
        (stats,) = rows_of({(label, marks): every}, {}, span_ns)
        out.append((site, stats, rows_of(by_name, sizes.get(site, {}), span_ns)))
    out.sort(key=lambda r: (-r[1].total_ns, r[1].name))
    return out
