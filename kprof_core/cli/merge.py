"""``kprof merge``: saved profiles (one per rank) onto one timeline, with a cross-rank summary.

kprof merge prof-*.kprof -o all.json --html all.html --save all.kprof
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from kprof_core.cli.common import (
    CommandError,
    add_perfetto_option,
    load_profile,
    why_not_written,
)
from kprof_core.host.backend import KprofError
from kprof_core.ranks.combine import combine
from kprof_core.ranks.combine import source_labels as _source_labels
from kprof_core.ranks.merge import _rank_key, aligned_views, merge_report
from kprof_core.renderers.terminal import print_text, say
from kprof_core.result import Profile


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


def command(args: argparse.Namespace) -> int:
    """``kprof merge FILES [-o trace.json] [--perfetto trace.pftrace] [--html page.html]
    [--save merged.kprof]``."""
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
        (getattr(args, "perfetto", None), "perfetto"),
        (getattr(args, "html", None), "html"),
        (getattr(args, "save", None), "save"),
    ):
        if not path:
            continue
        try:
            if what == "trace":
                from kprof_core.renderers.chrome import write_chrome_trace

                write_chrome_trace(path, views, labels)
            elif what == "perfetto":
                from kprof_core.renderers.perfetto import write_perfetto

                write_perfetto(path, views, labels)
            elif what == "html":
                from kprof_core.renderers.html import write_html  # type: ignore[import-not-found, unused-ignore]

                write_html(path, views, labels)
            else:
                combine(profiles).save(path)
        except OSError as exc:
            say(f"kprof merge: could not write {path}: {why_not_written(path, exc)}")
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


def add_parser(sub: Any) -> None:
    """Register ``kprof merge``."""
    m = sub.add_parser("merge", help="merge saved profiles (one per rank) onto one timeline")
    m.add_argument("files", nargs="+", help="saved profiles (.kprof)")
    m.add_argument("-o", "--output", metavar="FILE.json", help="write a Chrome/Perfetto trace")
    add_perfetto_option(m)
    m.add_argument("--html", metavar="FILE.html", help="write an HTML timeline")
    m.add_argument("--save", metavar="FILE.kprof", help="save the merged profile")
    m.set_defaults(func=command)
