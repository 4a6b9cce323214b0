"""``kprof drift DIR``: the windows of one run compared with the first, name by name, for soak
runs in CI (``--fail-above``)."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from kprof_core.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_SLOWER,
    CommandError,
    gate_problem,
    load_profile,
    window_files,
)
from kprof_core.renderers.terminal import print_text, say


def command(args: argparse.Namespace) -> int:
    """Compare every window with the first; ``--fail-above R``: exit 1 when a kernel or copy
    got significantly slower by more than ``R`` in some window."""
    from kprof_core.analysis.drift import window_label
    from kprof_core.result import drift

    problem = gate_problem("drift", args.fail_above, args.alpha)
    if problem is not None:
        say(problem)
        return EXIT_BAD_INPUT
    try:
        files = window_files(args.paths)
        if len(files) < 2:
            raise CommandError(f"drift needs at least two windows, got {len(files)}")
        profiles = [load_profile(f) for f in files]
    except CommandError as exc:
        say(f"kprof drift: {exc}")
        return EXIT_BAD_INPUT
    labels = [window_label(p, os.path.basename(f)) for p, f in zip(profiles, files, strict=True)]
    d = drift(profiles, labels=labels, alpha=args.alpha)
    if args.json:
        print(json.dumps({"files": files, **d.to_json()}, indent=1))
    else:
        print_text(d.report())
    if args.fail_above is None:
        return 0
    few = d.undecided()
    if few:
        say(
            f"kprof drift: the gate could not judge {len(few)} name{'s' * (len(few) != 1)} "
            f"with too few calls (at least {d.calls_needed} a window needed): "
            + ", ".join(r.label for r in few)
        )
    slow = d.slowdowns(args.fail_above)
    if slow:
        say(
            f"kprof drift: {len(slow)} significant slowdown{'s' * (len(slow) != 1)} above "
            f"{args.fail_above:g}x: "
            + ", ".join(
                f"{r.label} {w[1]:.2f}x ({labels[w[0]]})"
                for r in slow
                if (w := r.worst) is not None
            )
        )
        return EXIT_SLOWER
    return 0


def add_parser(sub: Any) -> None:
    """Register ``kprof drift``."""
    d = sub.add_parser(
        "drift",
        help="compare the windows of one run with the first (kprof.save_windows, run --steps)",
    )
    d.add_argument("paths", nargs="+", help="a directory of windows, or .kprof files in order")
    d.add_argument("--json", action="store_true", help="print the drift as JSON")
    d.add_argument(
        "--fail-above",
        type=float,
        metavar="RATIO",
        help="exit 1 when a kernel or copy is significantly slower than in the first window "
        "by more than RATIO (median per call), e.g. 1.10",
    )
    d.add_argument(
        "--alpha",
        type=float,
        default=0.01,
        help="significance level over all windows (default 0.01; Bonferroni per window)",
    )
    d.set_defaults(func=command)
