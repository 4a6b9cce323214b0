"""The ``kprof`` command: ``backends``, ``demo``, ``run``, ``merge``, ``show``, ``diff`` and
``drift``, one
module each beside this one (each with ``add_parser`` and ``command``)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from kprof_core._version import __version__
from kprof_core.cli import backends, demo, diff, drift, merge, run, show
from kprof_core.host.backend import KprofError
from kprof_core.renderers.terminal import say, silence_stdout


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kprof", description="Time GPU kernels on the device without synchronizing the host."
    )
    parser.add_argument("--version", action="version", version=f"kprof {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    for command in (backends, demo, run, merge, show, diff, drift):
        command.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args))
    except KprofError as exc:
        say(f"kprof: {exc}")
        return 2
    except KeyboardInterrupt:
        # A second Ctrl-C, while the files are written: as the first, no traceback.
        return 130
    except BrokenPipeError:
        # The reader of the output went away (`kprof backends | head -1`): it read what it
        # wanted, and every file was written before the printing started.
        silence_stdout()
        return 0
