"""``kprof show``: a saved profile printed as ``print(p)`` did, or exported."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from kprof_core.cli.common import EXIT_BAD_INPUT, CommandError, load_profile, window_files, wrote
from kprof_core.renderers.terminal import say


def command(args: argparse.Namespace) -> int:
    """Print a saved profile as ``print(p)`` did (``-t`` adds the trace), or its JSON; write
    the exports asked for. A directory of windows (``.kprof`` files): one line each."""
    if os.path.isdir(args.file) and any(f.endswith(".kprof") for f in os.listdir(args.file)):
        return _list(args.file)
    try:
        p = load_profile(args.file)
    except CommandError as exc:
        say(f"kprof show: {exc}")
        return EXIT_BAD_INPUT
    # Files first: a reader that went away (`| head`) must not cost them (as in kprof run).
    code = 0
    for path, export in ((args.trace_file, p.export_chrome_trace), (args.html, p.export_html)):
        if not path:
            continue
        try:
            export(path)
        except OSError as exc:
            say(f"kprof show: could not write {path}: {exc.strerror or exc}")
            code = EXIT_BAD_INPUT
            continue
        wrote(path)
    if args.json:
        p.to_json(sys.stdout)
        sys.stdout.write("\n")
    else:
        print(p.report(True if args.print_trace else None))
    return code


def _list(directory: str) -> int:
    """Each ``.kprof`` of ``directory`` (the windows of a run) with its headline."""
    from kprof_core.renderers.common import headline

    try:
        files = window_files([directory])
        for f in files:
            print(f"{os.path.basename(f)}  {headline(load_profile(f))}")
    except CommandError as exc:
        say(f"kprof show: {exc}")
        return EXIT_BAD_INPUT
    return 0


def add_parser(sub: Any) -> None:
    """Register ``kprof show``."""
    s = sub.add_parser(
        "show", help="print or export a saved profile, as print(p) and the exports would"
    )
    s.add_argument(
        "file", help="a saved profile (.kprof), or a directory of windows (one line each)"
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
    s.add_argument("--json", action="store_true", help="print the records as JSON instead")
    s.set_defaults(func=command)
