"""What the ``kprof`` commands share: exit codes, reading a saved profile, the output options
of ``run`` and ``demo`` and writing their files."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from kprof_core.host.backend import KprofError
from kprof_core.io.storage import ProfileFileError
from kprof_core.renderers.terminal import say

if TYPE_CHECKING:
    from kprof_core.result import Profile

EXIT_SLOWER = 1  # --fail-above found a significant slowdown

EXIT_BAD_INPUT = 2


class CommandError(Exception):
    """A one-line reason for a command to stop with exit code 2."""


def gate_problem(command: str, fail_above: float | None, alpha: float) -> str | None:
    """What is wrong with a comparison's ``--fail-above`` and ``--alpha`` (``kprof diff``,
    ``kprof drift``), as the line to say; None when both are usable."""
    if fail_above is not None and not fail_above > 0:
        return f"kprof {command}: --fail-above takes a ratio such as 1.10, not {fail_above}"
    if not 0 < alpha < 1:
        return f"kprof {command}: --alpha takes a probability such as 0.01, not {alpha}"
    return None


def load_profile(path: str) -> Profile:
    """A saved profile, or ``CommandError`` saying why the file cannot be read (the one
    reading of a profile for every command: show, diff, merge)."""
    from kprof_core.result import load  # the facade imports every renderer: only when asked

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


def window_files(paths: list[str]) -> list[str]:
    """The ``.kprof`` files of ``paths`` (a directory: every ``.kprof`` in it, by name; the
    names ``kprof.save_windows`` and ``kprof run -o`` give sort in window order)."""
    out: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            found = sorted(f for f in os.listdir(p) if f.endswith(".kprof"))
            if not found:
                raise CommandError(f"{p}: no .kprof files in this directory")
            out += [os.path.join(p, f) for f in found]
        else:
            out.append(p)
    return out


def wrote(path: str) -> None:
    say(f"kprof: wrote {path}")


def add_output_options(p: argparse.ArgumentParser) -> None:
    """The output options ``run`` and ``demo`` share."""
    p.add_argument(
        "-t",
        "--print-trace",
        action="store_true",
        help="print the chronological trace after the summary",
    )
    p.add_argument(
        "--trace", dest="trace_file", metavar="FILE.json", help="write a Chrome/Perfetto trace"
    )
    add_perfetto_option(p)
    p.add_argument("--html", metavar="FILE.html", help="write a self-contained HTML timeline")
    add_tree_options(p)
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE.kprof",
        help="save the profile ({rank}, {pid}, {host} are filled in)",
    )


PERFETTO_HELP = "write Perfetto's native trace (protobuf, smaller and faster to open than JSON)"


def add_perfetto_option(p: argparse.ArgumentParser) -> None:
    """``--perfetto FILE.pftrace``: ``run``, ``demo``, ``show`` and ``merge`` share it."""
    p.add_argument("--perfetto", metavar="FILE.pftrace", help=PERFETTO_HELP)


def add_tree_options(p: argparse.ArgumentParser) -> None:
    """``--tree`` and ``--speedscope``: device time by ranges, lines of code and kernels."""
    p.add_argument(
        "--tree",
        action="store_true",
        help="print device time as a tree (ranges > lines of code > kernels) after the summary",
    )
    p.add_argument(
        "--speedscope",
        metavar="FILE.json",
        help="write the device-time tree as a speedscope file (www.speedscope.app)",
    )


#: ``--by`` of the printed report (``kprof show``, ``kprof run``): ``Profile.report``'s ``by``.
REPORT_BY: dict[str, str | tuple[str, ...]] = {"name": "name", "config": ("name", "config")}


def add_by_option(p: argparse.ArgumentParser) -> None:
    """``--by``: how the printed report's device table groups its rows."""
    p.add_argument(
        "--by",
        choices=tuple(REPORT_BY),
        default="name",
        help="the device table: a row per name (default), or per name and launch "
        "configuration (config: CUDA's grid and block, OpenCL's global and local sizes), "
        'as p.report(by=("name", "config"))',
    )


def write_outputs(p: Any, args: argparse.Namespace) -> None:
    """Exports asked for on the command line; a failed export is reported, the run goes on."""
    targets = [
        ("chrome_trace", getattr(args, "trace_file", None)),
        ("perfetto", getattr(args, "perfetto", None)),
        ("html", getattr(args, "html", None)),
        ("speedscope", getattr(args, "speedscope", None)),
        ("save", getattr(args, "output", None)),
    ]
    for kind, path in targets:
        if not path:
            continue
        try:
            if kind == "save":
                path = expand_output(path, p.meta)
                p.save(path)
            elif kind == "chrome_trace":
                p.export_chrome_trace(path)
            elif kind == "perfetto":
                p.export_perfetto(path)
            elif kind == "speedscope":
                p.export_speedscope(path)
            else:
                p.export_html(path)
            say(f"kprof: wrote {path}")
        except Exception as exc:
            say(f"kprof: could not write {path}: {exc}")


def expand_output(path: str, meta: dict[str, Any]) -> str:
    """Fill ``{rank}``, ``{pid}`` and ``{host}`` in an output path (for MPI launchers), from
    what the profile recorded of its process (a malformed launcher variable was warned about
    then, and left the rank unknown: 0 here, as without a launcher)."""
    rank = meta.get("rank")
    try:
        return path.format(
            rank=rank if isinstance(rank, int) else 0,
            pid=os.getpid(),
            host=meta.get("host", "host"),
        )
    except (KeyError, IndexError, ValueError) as exc:
        raise KprofError(
            f"bad output path {path!r}: use only {{rank}}, {{pid}} and {{host}} ({exc})"
        ) from None
