"""``kprof run``: a Python script (or module) profiled from start to end, as ``python -m
cProfile`` runs one."""

from __future__ import annotations

import argparse
import os
import runpy
import sys
import traceback
from typing import Any

from kprof_core.cli.common import add_output_options, write_outputs
from kprof_core.renderers.terminal import print_text


def _exit_code(code: object) -> int:
    """What Python's own exit would turn ``SystemExit(code)`` into."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


REEXEC = "KPROF_RUN_RESTARTED"  # set in the restarted process: never restarted twice


def _exec_environment(usable: list[Any]) -> dict[str, str]:
    """What the backends need the program started with and the environment lacks."""
    need: dict[str, str] = {}
    for b in usable:
        try:
            env = b.exec_environment(b)
        except Exception:  # a plugin's failure must not stop the run: it then runs as it is
            continue
        if isinstance(env, dict):
            need.update({k: v for k, v in env.items() if isinstance(k, str) and isinstance(v, str)})
    return {k: v for k, v in need.items() if os.environ.get(k) != v}


def _restart_with(env: dict[str, str]) -> None:
    """Start this very command again (same interpreter, flags and arguments) with ``env`` added:
    what must be in place at exec (an ``LD_PRELOAD``) cannot be set later. Once only."""
    if not env or os.environ.get(REEXEC) or not hasattr(os, "execve"):
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, list(sys.orig_argv), {**os.environ, **env, REEXEC: "1"})


def command(args: argparse.Namespace) -> int:
    from kprof_core.host.discovery import registry
    from kprof_core.profiler import profile

    script = args.script
    if args.module:
        target_desc = f"module {script}"
    else:
        if not os.path.isfile(script):
            print(f"kprof run: can't open file {script!r}: no such file", file=sys.stderr)
            return 2
        target_desc = script
    backends = [b for b in args.backends.split(",") if b] if args.backends else None
    prof = profile(device=not args.no_device, trace=args.print_trace, backends=backends)
    # Load the plugins before the script's directory goes on sys.path: a file there must not
    # be imported in place of an installed plugin.
    registry.all()
    try:
        usable = registry.usable(backends)
    except Exception:  # an unknown backend name: the profile reports it, as before
        usable = []
    _restart_with(_exec_environment(usable))
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [script, *args.args]
    # As python does: sys.path[0] is the script's directory, or the working directory for -m.
    sys.path.insert(0, os.getcwd() if args.module else os.path.dirname(os.path.abspath(script)))
    code = 0
    p = prof.__enter__()
    try:
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
        prof.__exit__(None, None, None)
        sys.argv = saved_argv
        sys.path[:] = saved_path
    # Files first: a reader that went away (`| head`) or a script that closed sys.stdout must
    # not cost them.
    write_outputs(p, args)
    print_text(p.report())
    if code:
        print(f"kprof run: {target_desc} exited with code {code}", file=sys.stderr)
    return code


def add_parser(sub: Any) -> None:
    """Register ``kprof run``."""
    r = sub.add_parser("run", help="profile a Python script, as python -m cProfile does")
    r.add_argument("-m", dest="module", action="store_true", help="run a module (like python -m)")
    r.add_argument("--backends", metavar="A,B", help="only these backends (comma-separated)")
    r.add_argument("--no-device", action="store_true", help="host records only (device=False)")
    add_output_options(r)
    r.add_argument("script", help="the script (or module, with -m)")
    r.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    r.set_defaults(func=command)
