"""What ``diff(by=...)`` compares when a name is split further: by launch site (``by="line"``)
or by launch configuration (``by="config"``). Each returns the durations of every section as
``ProfileData.durations`` groups them, keyed ``(name, marks, label)``: the line's label, or the
configuration's text ("" where a row has none: ranges, copies, launches that handed none)."""

from __future__ import annotations

from collections.abc import Sequence

from kprof_core.data.profile_data import ProfileData
from kprof_core.data.records import MARKS, RANGE, UNRESOLVED, HostTable
from kprof_core.data.site_summary import UNKNOWN_SITE
from kprof_core.data.tree import range_instances

SECTIONS = ("device", "device_ranges", "host")
Key = tuple[str, int] | tuple[str, int, str]  # (name, marks), and the line's or config's label


def durations_by_line(p: ProfileData) -> dict[str, dict[Key, list[int]]]:
    """Split by launch site: host rows by their own site (a range's, a launch's)."""
    labels = [s.label for s in p.sites] + [UNKNOWN_SITE]  # site -1 reads the last
    return _split(p, p.table.site, labels, p.host.site)


def durations_by_config(p: ProfileData) -> dict[str, dict[Key, list[int]]]:
    """Split by launch configuration: a launch's host call by its kernel's, host ranges by
    none (they have none)."""
    labels = [*p.configs, ""]  # config -1 reads the last
    return _split(p, p.table.config, labels, None)


def _split(
    p: ProfileData,
    device_keys: Sequence[int],
    labels: Sequence[str],
    host_keys: Sequence[int] | None,
) -> dict[str, dict[Key, list[int]]]:
    t, h, names = p.table, p.host, p.names
    out: dict[str, dict[Key, list[int]]] = {s: {} for s in SECTIONS}
    device, dranges, host = out["device"], out["device_ranges"], out["host"]
    for nid, kind, flags, dur, ls, le, k in zip(
        t.name, t.kind, t.flags, t.duration, t.launch_start, t.launch_end, device_keys
    ):
        where = labels[k]
        if kind != RANGE:  # the launch's host call
            host.setdefault((names[nid], 0, where), []).append(le - ls)
        if not flags & UNRESOLVED and kind != RANGE:
            device.setdefault((names[nid], flags & MARKS, where), []).append(dur)
    none = labels[-1]
    for i, marks, ns in range_instances(p):  # a range's device time is its work's
        where = labels[host_keys[i]] if host_keys is not None else none
        dranges.setdefault((names[h.name[i]], marks, where), []).append(ns)
    for i, (nid, kind, s, e) in enumerate(zip(h.name, h.kind, h.start, h.end)):
        if kind != HostTable.MARK:
            where = labels[host_keys[i]] if host_keys is not None else none
            host.setdefault((names[nid], 0, where), []).append(e - s)
    return out
