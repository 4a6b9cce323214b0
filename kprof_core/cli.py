"""The ``kprof`` command: ``backends``, ``demo``, ``run``, ``merge``, ``show`` and ``diff``."""

from __future__ import annotations

import argparse
import json
import os
import runpy
import sys
import threading
import traceback
import warnings
from collections.abc import Sequence
from typing import Any

from .backend import KprofError
from .renderers.terminal import escape, print_text, say, silence_stdout


def _backend_rows() -> list[dict[str, Any]]:
    from . import native
    from .plugins import registry

    recorder = "compiled" if native.compiled() is not None else "pure Python"
    rows = []
    for b in registry.all():
        info = b.info()
        rows.append(
            {
                "name": b.name,
                "plugin": b.distribution or b.plugin_label,
                "plugin_version": b.version,
                "status": info.status,
                "timestamps": "device" if info.timestamps and b.has_timestamps else "host fallback",
                "devices": list(info.devices),
                "library": info.library,
                "library_version": info.library_version,
                "error": info.status[len("error: ") :] if info.status.startswith("error") else None,
                "detail": info.detail,
                # The launch path every backend's launches take (the same for all of them).
                "recorder": recorder,
                "recorder_detail": native.describe(),
                "capture": info.capture,
                "capture_detail": info.capture_detail,
            }
        )
    return rows


def cmd_backends(args: argparse.Namespace) -> int:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rows = _backend_rows()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for w in caught:  # plugins' own text: escaped like every line written to a terminal
        print(escape(f"warning: {w.message}"), file=sys.stderr)
    if not rows:
        print("No kprof backend plugins are installed (entry-point group 'kprof.backends').")
        print("Install one, e.g.: pip install 'kprof[opencl]'")
        return 0
    table = [("Backend", "Plugin", "Library", "Devices", "Timestamps", "Status")]
    for r in rows:
        lib = (
            f"{r['library']} {r['library_version']}"
            if r["library_version"]
            else f"{r['library'] or '?'} (not installed)"
        )
        plugin = f"{r['plugin']} {r['plugin_version'] or ''}".strip()
        devices = "; ".join(r["devices"]) or "-"
        status = r["status"] + (f" ({r['detail']})" if r["detail"] else "")
        table.append((r["name"], plugin, lib, devices, r["timestamps"], status))
    widths = [max(len(row[i]) for row in table) for i in range(5)]
    for i, row in enumerate(table):
        print(escape("  ".join(c.ljust(w) for c, w in zip(row[:5], widths)) + "  " + row[5]))
        if i == 0:
            print("  ".join("─" * w for w in widths) + "  " + "─" * len("Status"))
    from . import native

    print(f"Recorder: {native.describe()}")  # which launch path runs (every backend's)
    captures = [r for r in rows if r["capture"]]
    if captures:
        print()
        for r in captures:
            why = f": {r['capture_detail']}" if r["capture_detail"] else ""
            print(escape(f"{r['name']} captures with {r['capture']}{why}"))  # plugins' text
    return 0


def _write_outputs(p: Any, args: argparse.Namespace) -> None:
    """Exports asked for on the command line; a failed export is reported, the run goes on."""
    targets = [
        ("chrome_trace", getattr(args, "trace_file", None)),
        ("html", getattr(args, "html", None)),
        ("save", getattr(args, "output", None)),
    ]
    for kind, path in targets:
        if not path:
            continue
        try:
            if kind == "save":
                path = _expand_output(path, p.meta)
                p.save(path)
            elif kind == "chrome_trace":
                p.export_chrome_trace(path)
            else:
                p.export_html(path)
            say(f"kprof: wrote {path}")
        except Exception as exc:
            say(f"kprof: could not write {path}: {exc}")


def _expand_output(path: str, meta: dict[str, Any]) -> str:
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


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    p = run_demo(backend=args.backend, steps=args.steps, size=args.size, trace=args.print_trace)
    _write_outputs(p, args)  # files first: a reader that goes away must not cost them
    print_text(p.report())
    return 0


def _exit_code(code: object) -> int:
    """What Python's own exit would turn ``SystemExit(code)`` into."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # the script's own message, as Python prints it
    return 1


#: What an interrupted end says, and ``meta["interrupted"]`` of the profile it leaves.
INTERRUPTED = (
    "interrupted while waiting for the device at the profile's end: what was resolved "
    "before is kept, work still pending is left out"
)


def end_profile(prof: Any, p: Any) -> bool:
    """End ``prof``; a Ctrl-C while it waits for the device ends it with what was resolved
    (the profile keeps that, see ``profile.__exit__``), marks ``p`` interrupted and returns
    True, so that the caller still writes its files."""
    try:
        prof.__exit__(None, None, None)
    except KeyboardInterrupt:
        p.meta["interrupted"] = INTERRUPTED
        return True
    return False


def cmd_run(args: argparse.Namespace) -> int:
    from .plugins import registry
    from .profiler import profile

    script = args.script
    if args.module:
        target_desc = f"module {script}"
    else:
        if not os.path.isfile(script):
            say(f"kprof run: can't open file {script!r}: no such file")
            return 2
        target_desc = script
    backends = [b for b in args.backends.split(",") if b] if args.backends else None
    prof = profile(device=not args.no_device, trace=args.print_trace, backends=backends)
    # Load the plugins before the script's directory goes on sys.path: a file there must not
    # be imported in place of an installed plugin.
    registry.all()
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [script, *args.args]
    # As python does: sys.path[0] is the script's directory, or the working directory for -m.
    sys.path.insert(0, os.getcwd() if args.module else os.path.dirname(os.path.abspath(script)))
    code = 0
    p = prof.__enter__()

    def finish(code: int) -> int:
        interrupted = end_profile(prof, p)
        # Files first: a reader that went away (`| head`) or a script that closed sys.stdout
        # must not cost them.
        _write_outputs(p, args)
        print_text(p.report())
        if code:
            say(f"kprof run: {target_desc} exited with code {code}")
        if interrupted:
            say(f"kprof run: {INTERRUPTED}")
            return 130
        return code

    real_exit = os._exit
    try:
        os._exit = _exit_after(finish, real_exit)
        try:
            if args.module:
                runpy.run_module(script, run_name="__main__", alter_sys=True)
            else:
                # As python does (3.9+): __file__ is absolute, sys.argv[0] stays as typed.
                runpy.run_path(os.path.abspath(script), run_name="__main__")
        except SystemExit as exc:
            code = _exit_code(exc.code)
        except KeyboardInterrupt:
            traceback.print_exc()
            code = 130
        except BaseException:
            traceback.print_exc()
            code = 1
    finally:
        os._exit = real_exit
        sys.argv = saved_argv
        sys.path[:] = saved_path
    return finish(code)


def _exit_after(finish: Any, real_exit: Any) -> Any:
    """``os._exit`` for the script: in the process and thread kprof run started, the profile
    is ended, written and printed first (``os._exit`` skips every cleanup, so nothing after
    the script's last line would run); anywhere else (a forked child, which
    ``multiprocessing`` ends with ``os._exit``; another thread) it exits at once, as it did."""
    pid, main = os.getpid(), threading.main_thread()

    def _exit(status: int) -> None:
        mine = os.getpid() == pid and threading.current_thread() is main
        if mine and isinstance(status, int) and os._exit is _exit:
            os._exit = real_exit
            try:
                status = finish(status)
            except BaseException:  # kprof's own trouble must not keep the process alive
                pass
            # The script's and kprof's lines before the exit, which flushes nothing.
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except Exception:
                    pass
        real_exit(status)

    return _exit


def cmd_merge(args: argparse.Namespace) -> int:
    from .merge import merge_command

    return merge_command(args)


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(
        prog="kprof", description="Time GPU kernels on the device without synchronizing the host."
    )
    parser.add_argument("--version", action="version", version=f"kprof {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    b = sub.add_parser(
        "backends", help="list backend plugins, their devices and what they can time"
    )
    b.add_argument("--json", action="store_true", help="print a JSON list of objects")
    b.set_defaults(func=cmd_backends)

    def outputs(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "-t",
            "--print-trace",
            action="store_true",
            help="print the chronological trace after the summary",
        )
        p.add_argument(
            "--trace", dest="trace_file", metavar="FILE.json", help="write a Chrome/Perfetto trace"
        )
        p.add_argument("--html", metavar="FILE.html", help="write a self-contained HTML timeline")
        p.add_argument(
            "-o",
            "--output",
            metavar="FILE.kprof",
            help="save the profile ({rank}, {pid}, {host} are filled in)",
        )

    d = sub.add_parser("demo", help="profile a reference workload on the first available backend")
    d.add_argument("--backend", help="the backend to run on (default: first available)")
    d.add_argument("--steps", type=int, default=10, help="steps (default 10)")
    d.add_argument("--size", type=int, default=4 * 1024 * 1024, help="elements (default 4M floats)")
    outputs(d)
    d.set_defaults(func=cmd_demo)

    r = sub.add_parser("run", help="profile a Python script, as python -m cProfile does")
    r.add_argument("-m", dest="module", action="store_true", help="run a module (like python -m)")
    r.add_argument("--backends", metavar="A,B", help="only these backends (comma-separated)")
    r.add_argument("--no-device", action="store_true", help="host records only (device=False)")
    outputs(r)
    r.add_argument("script", help="the script (or module, with -m)")
    r.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    r.set_defaults(func=cmd_run)

    m = sub.add_parser("merge", help="merge saved profiles (one per rank) onto one timeline")
    m.add_argument("files", nargs="+", help="saved profiles (.kprof)")
    m.add_argument("-o", "--output", metavar="FILE.json", help="write a Chrome/Perfetto trace")
    m.add_argument("--html", metavar="FILE.html", help="write an HTML timeline")
    m.add_argument("--save", metavar="FILE.kprof", help="save the merged profile")
    m.set_defaults(func=cmd_merge)

    add_saved_profile_commands(sub)
    return parser


# -- commands on saved profiles: show and diff (kprof_core/saved.py) ------------------------------


def add_saved_profile_commands(sub: Any) -> None:
    from .saved import add_commands

    add_commands(sub)


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
