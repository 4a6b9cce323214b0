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


#: ``kprof run``/``demo``: the program ran, but an output could not be written (the program's
#: own non-zero exit code wins).
EXIT_NOT_WRITTEN = 2


def why_not_written(path: str, exc: BaseException) -> str:
    """Why ``path`` could not be written, in words a user can act on."""
    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        return f"the directory {folder} does not exist (create it, or give another path)"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def write_outputs(p: Any, args: argparse.Namespace, rescue_as: str = "") -> list[str]:
    """Exports asked for on the command line, the ``.kprof`` file last but one; returns the
    paths that could not be written, each said in one line. Where one failed and no ``.kprof``
    was written, the profile is saved in the temporary directory instead (``rescue_as``
    names the file there) so that nothing recorded is lost: ``kprof show`` exports it again."""
    targets = [
        ("chrome_trace", getattr(args, "trace_file", None)),
        ("perfetto", getattr(args, "perfetto", None)),
        ("html", getattr(args, "html", None)),
        ("speedscope", getattr(args, "speedscope", None)),
        ("save", getattr(args, "output", None)),
    ]
    failed: list[str] = []
    saved = False
    for kind, path in targets:
        if not path:
            continue
        try:
            if kind == "save":
                path = expand_output(path, p.meta)
                p.save(path)
                saved = True
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
            say(f"kprof: could not write {path}: {why_not_written(path, exc)}")
            failed.append(path)
    if failed and not saved:
        import tempfile

        rescue = os.path.join(tempfile.gettempdir(), rescue_as or f"kprof-{os.getpid()}.kprof")
        try:
            p.save(rescue)
            say(
                f"kprof: the profile is saved in {rescue} instead; `kprof show {rescue}` "
                f"exports it again (--html, --trace, --perfetto, --speedscope)"
            )
        except Exception as exc:
            say(f"kprof: could not save the profile in {rescue} either: {exc}")
    return failed


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
