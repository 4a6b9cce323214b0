"""``kprof show``: a saved profile printed as ``print(p)`` did, or exported."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from kprof_core.cli.common import (
    EXIT_BAD_INPUT,
    REPORT_BY,
    CommandError,
    add_by_option,
    add_perfetto_option,
    add_tree_options,
    load_profile,
    why_not_written,
    window_files,
    wrote,
)
from kprof_core.renderers.terminal import escape, print_text, say


def command(args: argparse.Namespace) -> int:
    """Print a saved profile as ``print(p)`` did (``-t`` adds the trace), or its JSON; write
    the exports asked for. A directory of windows (``.kprof`` files): one line each."""
    if os.path.isdir(args.file) and any(f.endswith(".kprof") for f in os.listdir(args.file)):
        if args.window is None:
            return _list(args.file)
    elif args.window is not None:
        say(f"kprof show: --window needs a directory of windows, and {args.file} is not one")
        return EXIT_BAD_INPUT
    try:
        if args.window is not None:
            p = _window(args.file, args.window)
        else:
            p = load_profile(args.file)
    except CommandError as exc:
        say(f"kprof show: {exc}")
        return EXIT_BAD_INPUT
    # Files first: a reader that went away (`| head`) must not cost them (as in kprof run).
    code = 0
    for path, export in (
        (args.trace_file, p.export_chrome_trace),
        (args.perfetto, p.export_perfetto),
        (args.html, p.export_html),
        (args.speedscope, p.export_speedscope),
    ):
        if not path:
            continue
        try:
            export(path)
        except OSError as exc:
            say(f"kprof show: could not write {path}: {why_not_written(path, exc)}")
            code = EXIT_BAD_INPUT
            continue
        wrote(path)
    if args.json:
        p.to_json(sys.stdout)
        sys.stdout.write("\n")
    else:
        print_text(p.report(True if args.print_trace else None, by=REPORT_BY[args.by]))
        if args.tree:
            print_text("\n" + p.tree().report())
    return code


def _list(directory: str) -> int:
    """Each ``.kprof`` of ``directory`` (the windows of a run): its window, steps, device
    records, device time and span, one line each."""
    from kprof_core.data.timefmt import format_time

    rows = [("window", "steps", "records", "device time", "span", "file")]
    try:
        for f in window_files([directory]):
            p = load_profile(f)
            w = p.meta.get("window")
            index, steps = "-", "-"
            if isinstance(w, dict):
                index = str(w.get("index", "-"))
                steps = f"{w.get('first_step')}-{w.get('last_step')}" if "first_step" in w else "-"
                steps += " (partial)" if w.get("partial") else ""
            device = sum(r.total_ns for r in p.summary().device)
            rows.append(
                (
                    index,
                    steps,
                    str(p.counts[1]),
                    format_time(device),
                    format_time(p.span_ns),
                    os.path.basename(f),
                )
            )
    except CommandError as exc:
        say(f"kprof show: {exc}")
        return EXIT_BAD_INPUT
    # A window's steps and a file's name come from the files: escaped, as every view's text.
    shown = [[escape(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in shown) for i in range(5)]
    for r in shown:
        cells = [r[i].rjust(widths[i]) if i != 1 else r[i].ljust(widths[i]) for i in range(5)]
        print_text("  ".join([*cells, r[5]]))
    return 0


def _window(directory: str, index: int) -> Any:
    """Window ``index`` of the directory's ``.kprof`` files (``meta["window"]["index"]``)."""
    found = []
    for f in window_files([directory]):
        p = load_profile(f)
        w = p.meta.get("window")
        if isinstance(w, dict) and w.get("index") == index:
            return p
        if isinstance(w, dict):
            found.append(str(w.get("index")))
    have = f"it has windows {', '.join(found)}" if found else "it has no windows"
    raise CommandError(f"{directory}: no window {index}; {have}")


def add_parser(sub: Any) -> None:
    """Register ``kprof show``."""
    s = sub.add_parser(
        "show", help="print or export a saved profile, as print(p) and the exports would"
    )
    s.add_argument(
        "file",
        help="a saved profile (.kprof), or a directory of windows (one line each, or --window N)",
    )
    s.add_argument(
        "-t",
        "--print-trace",
        action="store_true",
        help="print the chronological trace after the summary",
    )
    s.add_argument("--html", metavar="FILE.html", help="write a self-contained HTML timeline")
    s.add_argument(
        "--trace", dest="trace_file", metavar="FILE.json", help="write a Chrome/Perfetto trace"
    )
    add_perfetto_option(s)
    add_tree_options(s)
    add_by_option(s)
    s.add_argument("--json", action="store_true", help="print the records as JSON instead")
    s.add_argument(
        "--window",
        type=int,
        metavar="N",
        help="with a directory of windows: show window N (its index, from 1) as a file",
    )
    s.set_defaults(func=command)
