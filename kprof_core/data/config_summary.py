"""Device time per launch configuration: ``Profile.summary(by="config")`` and
``summary(by=("name", "config"))``, and the report's Config column when grouping so."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from kprof_core.data.records import MARKS, RANGE, UNRESOLVED, DeviceTable
from kprof_core.data.summary import SummaryRow, rows_of

#: How ``summary(by="config")`` names the launches that handed no configuration.
NO_CONFIG = "(no configuration)"

#: The groupings ``summary(by=...)`` takes besides "name" and "line".
CONFIG_GROUPINGS = ("config", ("name", "config"))


def grouping(by: object) -> str | tuple[str, ...]:
    """``by`` as one of the groupings (a list is taken as the tuple), or ValueError."""
    key = tuple(by) if isinstance(by, list) else by
    if key in ("name", "line", "stack", *CONFIG_GROUPINGS):
        return key
    raise ValueError(
        f'summary(by=...) takes "name", "line", "stack", "config" or ("name", "config"), not {by!r}'
    )


def config_rows(
    table: DeviceTable,
    names: Sequence[str],
    configs: Sequence[str],
    span_ns: int,
    by_name: bool,
) -> list[SummaryRow]:
    """Device rows (kernels and copies with a device time) grouped by launch configuration,
    and by name first when ``by_name``: a ``SummaryRow`` each, its ``config`` the text (None:
    none handed), largest total first. Without ``by_name`` a row's name is its configuration."""
    groups: dict[tuple[int, int, int], list[int]] = {}
    sizes: dict[tuple[int, int, int], int] = {}
    said: dict[tuple[int, int, int], int] = {}
    t = table
    for nid, kind, flags, dur, nbytes, cfg, flops in zip(
        t.name, t.kind, t.flags, t.duration, t.nbytes, t.config, t.flops
    ):
        if kind == RANGE or flags & UNRESOLVED:
            continue
        key = (nid if by_name else -1, cfg, flags & MARKS)
        group = groups.get(key)
        if group is None:
            group = groups[key] = []
        group.append(dur)
        if nbytes >= 0:
            sizes[key] = sizes.get(key, 0) + nbytes
        if flops >= 0:
            said[key] = said.get(key, 0) + flops
    out = []
    for key, durs in groups.items():
        nid, cfg, marks = key
        text = configs[cfg] if cfg >= 0 else None
        name = names[nid] if by_name else (text or NO_CONFIG)
        moved = {(name, marks): sizes[key]} if key in sizes else {}
        done = {(name, marks): said[key]} if key in said else {}
        (row,) = rows_of({(name, marks): durs}, moved, span_ns, done)
        out.append(replace(row, config=text))
    out.sort(key=lambda r: (-r.total_ns, r.name, r.config or ""))
    return out
