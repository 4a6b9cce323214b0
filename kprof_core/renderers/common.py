"""What several renderers share: the checks of a writer's arguments, where a profile's times
start, and the words of the summary (headline, columns, footnotes). A renderer imports these
from here, never another renderer's helpers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kprof_core.data.profile_data import ProfileData
from kprof_core.data.summary import Summary, SummaryRow
from kprof_core.data.timefmt import format_rate, format_time
from kprof_core.host.backend import KprofError

FOOTNOTE = (
    " * timed on the host, synchronizing after each launch: the backend (or the queue) "
    "gives no device timestamps"
)
#: The device ranges' table title: what its two times are, said once for every view.
RANGES_TITLE = (
    "Device-side ranges (device time: of the work launched inside each; span: its first "
    "work's start to its last work's end on the device)"
)

APPROXIMATE_FOOTNOTE = (
    " ~ approximate: the queue gives no device timestamps, so each command was timed on the "
    "host, without synchronizing, from when the driver reported it running and complete: late "
    "by that report's own latency, so short commands read long. The backend's note (!) says "
    "why the queue has none and how close such times came."
)


def headline(p: ProfileData) -> str:
    """``Profiled 1.2 s, recording 3 ranges, 10 kernels and 2 copies.``, after ``Window 2,
    steps 100-109:`` for a window of a scheduled profile."""
    nr, nd = p.counts
    nc = p.copies
    nk = nd - nc
    return (
        window_title(p.meta)
        + f"Profiled {format_time(p.span_ns)}, recording {nr} range{'s' * (nr != 1)}, "
        f"{nk} kernel{'s' * (nk != 1)} and {nc} cop{'ies' if nc != 1 else 'y'}."
    )


def window_title(meta: dict[str, Any]) -> str:
    """``Window 2, steps 100-109: `` for a window's meta (``Window 2, on SIGUSR2: `` for one
    a signal opened and closed, which has no steps), else nothing."""
    w = meta.get("window")
    if not isinstance(w, dict):
        return ""
    partial = " (partial: the profile ended in it)" if w.get("partial") else ""
    if "first_step" not in w and "trigger" in w:
        return f"Window {w.get('index')}, on {w['trigger']}{partial}: "
    return f"Window {w.get('index')}, steps {w.get('first_step')}-{w.get('last_step')}{partial}: "


def window_words(meta: dict[str, Any]) -> str:
    """``window 2, steps 100-109`` for a window's meta (in a title), else nothing."""
    w = window_title(meta).rstrip(": ")
    return w[:1].lower() + w[1:]


def bounds_notes(meta: dict[str, Any]) -> list[str]:
    """What ``profile(max_records=..., min_duration_ns=...)`` dropped, in words (never
    silent: the tables lack those rows)."""
    b = meta.get("bounds")
    if not isinstance(b, dict):
        return []
    out = []
    if "max_records" in b:
        which = "latest" if b.get("keep") == "last" else "first"
        out.append(
            f"max_records={b['max_records']}: kept the {which} {b['max_records']} device "
            f"records, dropped {b.get('dropped', 0)} "
            f"({format_time(b.get('dropped_device_ns', 0))} of device time): "
            "the tables lack them"
        )
    short = b.get("short")
    if isinstance(short, dict) and "min_duration_ns" in b:
        n = sum(v[0] for v in short.values())
        ns = sum(v[1] for v in short.values())
        out.append(
            f"min_duration_ns={b['min_duration_ns']}: dropped {n} kernels and copies shorter "
            f"than {format_time(b['min_duration_ns'])} ({format_time(ns)} of device time in "
            f"all; per name in meta['bounds']['short'])"
        )
    return out


def footnotes(s: Summary) -> list[str]:
    """The footnotes the summary's marks need."""
    rows = [*s.device, *s.device_ranges]
    out = []
    if any(r.host_timed for r in rows):
        out.append(FOOTNOTE)
    if any(r.approximate for r in rows):
        out.append(APPROXIMATE_FOOTNOTE)
    return out


COLUMNS = ("Time (%)", "Total time", "Calls", "Avg time", "Min time", "Max time", "Median")


def summary_cells(
    rows: Sequence[SummaryRow], throughput: bool = False
) -> tuple[list[str], list[list[str]]]:
    """A summary table's columns before the name, and each row's cells under them, as every
    view shows them: ``COLUMNS``, then ``Span`` where a row has one, and with ``throughput``,
    bytes per second where a row has bytes and GFLOP/s where one has flops (both over its total
    device time)."""
    rates = throughput and any(r.nbytes for r in rows)
    flops = throughput and any(r.flops for r in rows)
    spans = any(r.span_ns is not None for r in rows)
    headers = [*COLUMNS, *(["Span"] if spans else [])]
    headers += [*(["Throughput"] if rates else []), *(["GFLOP/s"] if flops else [])]
    body = []
    for r in rows:
        cells = [
            f"{r.percent:.1f} %",
            format_time(r.total_ns),
            str(r.calls),
            format_time(r.avg_ns),
            format_time(r.min_ns),
            format_time(r.max_ns),
            format_time(r.median_ns),
        ]
        if spans:
            cells.append("-" if r.span_ns is None else format_time(r.span_ns))
        if rates:
            cells.append(format_rate(r.nbytes, r.total_ns) if r.nbytes else "")
        if flops:
            cells.append(f"{r.gflops:.3g}" if r.gflops is not None else "")
        body.append(cells)
    return headers, body


def check_profiles(
    profiles: Sequence[ProfileData], labels: Sequence[str] | None
) -> list[str | None]:
    """Validate the arguments of a writer; return each profile's label (None: unlabelled)."""
    if isinstance(profiles, ProfileData):
        profiles = [profiles]
    if not profiles:
        raise ValueError("no profiles to write: pass a sequence with at least one Profile")
    for p in profiles:
        if not isinstance(p, ProfileData):
            raise TypeError(f"expected kprof.Profile objects, got {type(p).__name__}")
        if p.start_ns and p.end_ns < p.start_ns:
            raise KprofError("this profile is still running: export it after its `with` block ends")
    if labels is not None:
        if isinstance(labels, str) or len(labels) != len(profiles):
            raise ValueError(f"labels must be a sequence of {len(profiles)} names, one per profile")
        return [str(x) for x in labels]
    if len(profiles) == 1:
        return [None]
    return [
        f"rank {p.meta['rank']}"
        if p.meta.get("rank") is not None
        else f"host {p.meta.get('host', '?')} pid {p.meta.get('pid', '?')}"
        for p in profiles
    ]


def offset_of(p: ProfileData) -> int:
    """The profile's ``meta["clock_offset_ns"]`` (default 0), checked."""
    off = p.meta.get("clock_offset_ns", 0)
    if isinstance(off, bool) or not isinstance(off, int):
        raise TypeError(f"profile.meta['clock_offset_ns'] must be an int (ns), not {off!r}")
    return off


def first_time(p: ProfileData) -> int:
    """The earliest time a profile holds (its start, or an earlier record), on its own clock."""
    t, h = p.table, p.host
    cands = [p.start_ns] if p.start_ns else []
    for col in (t.launch_start, t.start, h.start, p.memory.table.time):
        if len(col):
            cands.append(min(col))
    return min(cands, default=0)


def host_name(p: ProfileData, label: str | None) -> str:
    return label or f"host {p.meta.get('host', '?')} pid {p.meta.get('pid', '?')}"
