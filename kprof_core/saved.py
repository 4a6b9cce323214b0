"""``kprof show`` and ``kprof diff``: reports, exports and comparisons of saved profiles.

    kprof show run.kprof [-t] [--html page.html] [--trace trace.json] [--json]
    kprof diff base.kprof new.kprof [--json] [--html page.html] [--fail-above 1.10]

Files are read by :func:`kprof_core.storage.load`; a file that is not a readable profile
stops the command with the loader's one-line reason (exit code 2), never a traceback.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from collections.abc import Sequence

from .renderers.chrome import first_time
from .renderers.terminal import say
from .session import Profile
from .storage import ProfileFileError, load

EXIT_SLOWER = 1  # --fail-above found a significant slowdown
EXIT_BAD_INPUT = 2


class CommandError(Exception):
    """A one-line reason for a command to stop with exit code 2."""


def load_profile(path: str) -> Profile:
    """A saved profile, or ``CommandError`` saying why the file cannot be read (the one
    reading of a profile for every command: show, diff, merge)."""
    try:
        return load(path)
    except ProfileFileError as exc:
        raise CommandError(str(exc)) from None
    except IsADirectoryError:
        raise CommandError(f"{path}: is a directory, not a kprof profile") from None
    except FileNotFoundError:
        raise CommandError(f"{path}: no such file (cannot read it)") from None
    except OSError as exc:
        raise CommandError(f"{path}: cannot read it ({exc.strerror or exc})") from None


def _wrote(path: str) -> None:
    say(f"kprof: wrote {path}")


def show_command(args: argparse.Namespace) -> int:
    """Print a saved profile as ``print(p)`` did (``-t`` adds the trace), or its JSON; write
    the exports asked for."""
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
        _wrote(path)
    if args.json:
        p.to_json(sys.stdout)
        sys.stdout.write("\n")
    else:
        print(p.report(True if args.print_trace else None))
    return code


def side_by_side(profiles: Sequence[Profile]) -> list[Profile]:
    """Shallow copies that all start at time 0 on the timeline (runs at different times, on
    different hosts, are compared by their shape, not by when they ran)."""
    views = []
    for p in profiles:
        v = copy.copy(p)
        v.meta = {**p.meta, "clock_offset_ns": -first_time(p)}
        views.append(v)
    return views


def diff_command(args: argparse.Namespace) -> int:
    """Compare two saved profiles; with ``--fail-above R``, exit 1 when a kernel, copy or
    device range got significantly slower by more than ``R`` (median per call)."""
    if args.fail_above is not None and not args.fail_above > 0:
        say(f"kprof diff: --fail-above takes a ratio such as 1.10, not {args.fail_above}")
        return EXIT_BAD_INPUT
    if not 0 < args.alpha < 1:
        say(f"kprof diff: --alpha takes a probability such as 0.01, not {args.alpha}")
        return EXIT_BAD_INPUT
    try:
        before, after = load_profile(args.base), load_profile(args.new)
    except CommandError as exc:
        say(f"kprof diff: {exc}")
        return EXIT_BAD_INPUT
    d = before.diff(after, alpha=args.alpha)
    labels = (args.base, args.new)
    code = 0
    if args.html:
        from .renderers.diff import diff_html
        from .renderers.html import write_html

        try:
            write_html(
                args.html,
                side_by_side([before, after]),
                [f"before: {args.base}", f"after: {args.new}"],
                extra_html=diff_html(d, labels),
            )
            _wrote(args.html)
        except OSError as exc:
            say(f"kprof diff: could not write {args.html}: {exc.strerror or exc}")
            code = EXIT_BAD_INPUT
    if args.json:
        print(json.dumps({"before": args.base, "after": args.new, **d.to_json()}, indent=1))
    else:
        print(d.report(labels))
    if args.fail_above is not None:
        slow = d.slowdowns(args.fail_above)
        if slow:
            say(
                f"kprof diff: {len(slow)} significant slowdown{'s' * (len(slow) != 1)} above "
                f"{args.fail_above:g}x: "
                + ", ".join(f"{r.label} {r.ratio:.2f}x (p={r.p_value:.2g})" for r in slow)
            )
            code = code or EXIT_SLOWER
    return code


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``show`` and ``diff`` on the ``kprof`` command's subparsers."""
    s = sub.add_parser(
        "show", help="print or export a saved profile, as print(p) and the exports would"
    )
    s.add_argument("file", help="a saved profile (.kprof)")
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
    s.set_defaults(func=show_command)

    d = sub.add_parser(
        "diff", help="compare two saved profiles name by name (for CI gates: --fail-above)"
    )
    d.add_argument("base", help="the baseline profile (.kprof)")
    d.add_argument("new", help="the profile to compare with it (.kprof)")
    d.add_argument("--json", action="store_true", help="print the comparison as JSON")
    d.add_argument(
        "--html",
        metavar="FILE.html",
        help="write both timelines and the comparison to one HTML page",
    )
    d.add_argument(
        "--fail-above",
        type=float,
        metavar="RATIO",
        help="exit 1 when a kernel, copy or device range is significantly slower "
        "by more than RATIO (median per call), e.g. 1.10",
    )
    d.add_argument(
        "--alpha",
        type=float,
        default=0.01,
        help="significance level of the rank test (default 0.01)",
    )
    d.set_defaults(func=diff_command)
