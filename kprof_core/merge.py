"""``kprof merge``: saved profiles (one per rank) onto one timeline, with a cross-rank summary.

kprof merge prof-*.kprof -o all.json --html all.html --save all.kprof
"""

from __future__ import annotations

import argparse
import copy
from collections.abc import Sequence

from .backend import KprofError
from .combine import (
    ClockPlacement,
    clock_placements,
    combine,
    cross_rank_summary,
    format_cross_rank,
)
from .combine import source_labels as _source_labels
from .renderers.terminal import lines, print_text, say
from .saved import CommandError, load_profile
from .session import Profile
from .timefmt import format_time


def _rank_key(p: Profile) -> tuple[int, int]:
    r = p.meta.get("rank")
    return (0, r) if isinstance(r, int) and not isinstance(r, bool) else (1, 0)


def source_lines(profiles: Sequence[Profile], placements: Sequence[ClockPlacement]) -> list[str]:
    """One line per process: label, host, pid, what it recorded and how its clock was placed."""
    labels = _source_labels(profiles)
    lines = []
    for p, label, pl in zip(profiles, labels, placements):
        sources = p.meta.get("sources")
        if isinstance(sources, list):
            lines.append(f"  {len(sources)} processes merged before:")
            for s in sources:
                m = s.get("meta", {})
                err = s.get("error_ns")
                lines.append(
                    f"    {s.get('label', '?')}: host {m.get('host', '?')} pid "
                    f"{m.get('pid', '?')}; clock: {s.get('method', '?')}, error "
                    f"{'unknown' if err is None else '≤ ' + format_time(err)}"
                )
            continue
        nr, nk = p.counts
        err = "error unknown" if pl.error_ns is None else f"error ≤ {format_time(pl.error_ns)}"
        lines.append(
            f"  {label}: host {p.meta.get('host', '?')} pid {p.meta.get('pid', '?')}, "
            f"{nk} kernel{'s' * (nk != 1)}, {nr} range{'s' * (nr != 1)}; "
            f"clock: {pl.method}, {err}"
        )
    return lines


def merge_report(profiles: Sequence[Profile]) -> str:
    """What ``kprof merge`` prints: the processes, how their clocks were aligned, and the
    cross-rank summary (per kernel: min, mean and max over ranks of its total device time)."""
    placements = clock_placements(profiles)
    rows = cross_rank_summary(profiles)
    nsources = sum(
        len(p.meta["sources"]) if isinstance(p.meta.get("sources"), list) else 1 for p in profiles
    )
    out = [f"Merged {nsources} process{'es' * (nsources != 1)} onto one timeline:"]
    out += source_lines(profiles, placements)
    ranked = all(
        isinstance(p.meta.get("rank"), int) or isinstance(p.meta.get("sources"), list)
        for p in profiles
    )
    # Each part escaped line by line: names in files must not act on the terminal.
    return (
        lines([*out, ""])
        + "\n"
        + format_cross_rank(rows, nsources, "ranks" if ranked else "processes")
    )


def aligned_views(profiles: Sequence[Profile]) -> list[Profile]:
    """Shallow copies whose ``meta["clock_offset_ns"]`` is the placement ``combine`` would use,
    so exporters that honour that key draw them on the common timeline."""
    views = []
    for p, pl in zip(profiles, clock_placements(profiles)):
        v = copy.copy(p)
        v.meta = {**p.meta, "clock_offset_ns": pl.offset_ns}
        views.append(v)
    return views


def _load_all(files: Sequence[str]) -> list[Profile]:
    profiles: list[Profile] = []
    seen: dict[tuple[object, ...], str] = {}
    ranks: dict[int, str] = {}
    for f in files:
        p = load_profile(f)
        key = (p.meta.get("host"), p.meta.get("pid"), p.meta.get("rank"), p.start_ns, p.end_ns)
        if key in seen:
            raise CommandError(
                f"{f} holds the same profile as {seen[key]}; give each rank's file once"
            )
        seen[key] = f
        rank = p.meta.get("rank")
        if isinstance(rank, int) and not isinstance(rank, bool):
            if rank in ranks:
                # Two runs' files mixed up, or a launcher that gave every process rank 0: the
                # cross-rank summary would count one rank twice. Merged as given, said once.
                say(
                    f"kprof merge: warning: {f} and {ranks[rank]} are both rank {rank}; "
                    f"each is merged as a process of its own (give each rank's file once)"
                )
            else:
                ranks[rank] = f
        profiles.append(p)
    return profiles


def merge_command(args: argparse.Namespace) -> int:
    """``kprof merge FILES [-o trace.json] [--html page.html] [--save merged.kprof]``."""
    try:
        profiles = _load_all(args.files)
    except CommandError as exc:
        say(f"kprof merge: {exc}")
        return 2
    profiles.sort(key=_rank_key)  # stable: files without a rank keep their order, last
    report = merge_report(profiles)
    views = aligned_views(profiles)
    labels = _source_labels(profiles)
    code = 0
    for path, what in (
        (args.output, "trace"),
        (getattr(args, "html", None), "html"),
        (getattr(args, "save", None), "save"),
    ):
        if not path:
            continue
        try:
            if what == "trace":
                from .renderers.chrome import write_chrome_trace

                write_chrome_trace(path, views, labels)
            elif what == "html":
                from .renderers.html import write_html  # type: ignore[import-not-found, unused-ignore]

                write_html(path, views, labels)
            else:
                combine(profiles).save(path)
        except OSError as exc:
            say(f"kprof merge: could not write {path}: {exc.strerror or exc}")
            code = 2
            continue
        except KprofError as exc:  # clocks that cannot share one timeline
            say(f"kprof merge: could not write {path}: {exc}")
            code = 2
            continue
        say(f"kprof: wrote {path}")
    # Printed after the files are written: a reader that goes away (`| head`) costs nothing.
    print_text(report)
    return code
