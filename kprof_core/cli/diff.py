"""``kprof diff``: two saved profiles compared name by name (``--fail-above`` for CI gates)."""

from __future__ import annotations

import argparse
import copy
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kprof_core.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_SLOWER,
    CommandError,
    gate_problem,
    load_profile,
    why_not_written,
    wrote,
)
from kprof_core.renderers.common import first_time
from kprof_core.renderers.terminal import print_text, say

if TYPE_CHECKING:
    from kprof_core.result import Profile


def side_by_side(profiles: Sequence[Profile]) -> list[Profile]:
    """Shallow copies that all start at time 0 on the timeline (runs at different times, on
    different hosts, are compared by their shape, not by when they ran)."""
    views = []
    for p in profiles:
        v = copy.copy(p)
        v.meta = {**p.meta, "clock_offset_ns": -first_time(p)}
        views.append(v)
    return views


def command(args: argparse.Namespace) -> int:
    """Compare two saved profiles; with ``--fail-above R``, exit 1 when a kernel, copy or
    device range got significantly slower by more than ``R`` (median per call)."""
    problem = gate_problem("diff", args.fail_above, args.alpha)
    if problem is not None:
        say(problem)
        return EXIT_BAD_INPUT
    try:
        before, after = load_profile(args.base), load_profile(args.new)
    except CommandError as exc:
        say(f"kprof diff: {exc}")
        return EXIT_BAD_INPUT
    if args.by == "line" and not (before.sites or after.sites):
        say(
            "kprof diff: --by line: neither profile knows its launch sites (record them with "
            "KPROF_SITES=1 or profile(sites=True)); every row is (site unknown)."
        )
    if args.by == "config" and not (before.configs or after.configs):
        say(
            "kprof diff: --by config: neither profile holds launch configurations (their "
            "backends handed none); the rows are those of --by name."
        )
    d = before.diff(after, alpha=args.alpha, by=args.by)
    labels = (args.base, args.new)
    code = 0
    if args.html:
        from kprof_core.renderers.diff import diff_html
        from kprof_core.renderers.html import write_html

        try:
            write_html(
                args.html,
                side_by_side([before, after]),
                [f"before: {args.base}", f"after: {args.new}"],
                extra_html=diff_html(d, labels),
            )
            wrote(args.html)
        except OSError as exc:
            say(f"kprof diff: could not write {args.html}: {why_not_written(args.html, exc)}")
            code = EXIT_BAD_INPUT
    if args.json:
        print(json.dumps({"before": args.base, "after": args.new, **d.to_json()}, indent=1))
    else:
        print_text(d.report(labels))
    if args.fail_above is not None:
        slow = d.slowdowns(args.fail_above)
        if slow:
            say(
                f"kprof diff: {len(slow)} significant slowdown{'s' * (len(slow) != 1)} above "
                f"{args.fail_above:g}x: "
                + ", ".join(f"{r.label} {r.ratio:.2f}x (p={r.p_value:.2g})" for r in slow)
            )
            code = code or EXIT_SLOWER
        few = d.undecided()
        if few:
            say(
                f"kprof diff: the gate could not judge {len(few)} row{'s' * (len(few) != 1)} "
                f"with too few calls (at least {d.calls_needed} a side needed): "
                + ", ".join(f"{r.label} ({r.calls_before}→{r.calls_after})" for r in few)
            )
    return code


def add_parser(sub: Any) -> None:
    """Register ``kprof diff``."""
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
        "--by",
        choices=("name", "line", "config"),
        default="name",
        help="a row per name (default); line: per name and launch site, the same kernel "
        "launched from two lines is two rows (profiles recorded with sites); config: per name "
        "and launch configuration (CUDA's grid and block, OpenCL's global and local sizes)",
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
    d.set_defaults(func=command)
