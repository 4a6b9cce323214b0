"""``kprof run``: a Python script (or module) profiled from start to end, as ``python -m
cProfile`` runs one."""

from __future__ import annotations

import argparse
import os
import runpy
import sys
import threading
import traceback
from typing import Any

from kprof_core import envvars
from kprof_core.cli.common import (
    EXIT_NOT_WRITTEN,
    REPORT_BY,
    add_by_option,
    add_output_options,
    write_outputs,
)
from kprof_core.host import imports
from kprof_core.host.backend import KprofError
from kprof_core.host.settings import env_flag
from kprof_core.renderers.terminal import print_text, say


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


REEXEC = envvars.RUN_RESTARTED  # set in the restarted process: never restarted twice


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


def _start_later(prof: Any, backend: Any, notes: list[str]) -> Any:
    """What starts ``backend`` in ``prof`` once the program imports one of its modules; what
    the backend wanted from the program's start and did not get goes to ``notes``."""

    def start(module: str) -> None:
        if not prof.add_backend(backend):
            return
        env = _exec_environment([backend])
        if env:
            wanted = ", ".join(f"{k}={v}" for k, v in env.items())
            notes.append(
                f"kprof run started backend {backend.name!r} when the program imported "
                f"{module}, too late for what it needs from the program's start ({wanted}): "
                f"some of its work may be missing. `kprof run --backends {backend.name} ...` "
                f"starts it with the program."
            )

    return start


def _forked_child_paths(args: argparse.Namespace) -> None:
    """In a child the script forked (``os.fork()`` inside the profile, which then ended in
    the child: ``sys.exit`` there), the output paths get the child's pid unless they have
    ``{pid}``: parent and child wrote the same file, the last one replacing the other."""
    for attr in ("output", "html", "trace_file", "perfetto", "speedscope"):
        path = getattr(args, attr, None)
        if path and "{pid}" not in path:
            root, ext = os.path.splitext(path)
            setattr(args, attr, f"{root}.{os.getpid()}{ext}")


def command(args: argparse.Namespace) -> int:
    from kprof_core.host.discovery import registry
    from kprof_core.profiler import profile

    script = args.script
    if args.module:
        target_desc = f"module {script}"
    else:
        if not os.path.isfile(script):
            say(f"kprof run: can't open file {script!r}: no such file")
            return 2
        target_desc = script
    backends = [b for b in args.backends.split(",") if b] if args.backends else None
    try:
        sched, signalled = _windows(args)
    except (ValueError, KprofError) as exc:
        say(f"kprof run: {exc}")
        return 2
    windowed = sched is not None or signalled
    not_written: list[str] = []  # every output that could not be written, windows' included
    prof = profile(
        device=not args.no_device,
        trace=args.print_trace,
        backends=backends,
        schedule=sched,
        on_window=_window_writer(args, not_written) if windowed else None,
        window_signal=signalled,
        sites=True if args.sites else None,
        stacks=args.stacks,
    )
    # Load the plugins before the script's directory goes on sys.path: a file there must not
    # be imported in place of an installed plugin.
    later: list[tuple[Any, list[str]]] = []
    if backends is not None:  # named: each started with the program
        try:
            usable = registry.usable(backends)
        except Exception:  # an unknown backend name: the profile reports it, as before
            usable = []
    else:
        usable, later = imports.split(registry.loaded())
    _restart_with(_exec_environment(usable))
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [script, *args.args]
    # As python does: sys.path[0] is the script's directory, or the working directory for -m.
    sys.path.insert(0, os.getcwd() if args.module else os.path.dirname(os.path.abspath(script)))
    # With --steps each window is a profile of its own, entered at its first step with every
    # usable backend (by then the program has imported its libraries).
    named = backends is not None or windowed
    p = prof.__enter__() if named else prof.enter_with(usable)
    notes: list[str] = []
    starts = [_start_later(prof, b, notes) for b, _mods in later]
    for (_b, mods), start in zip(later, starts):
        imports.watch(mods, start)

    run = _Run(args, prof, p, starts, notes, not_written, target_desc, windowed)
    real_exit = os._exit
    try:
        os._exit = _exit_after(run.finish, real_exit)
        code = _run_script(script, args.module)
    finally:
        os._exit = real_exit
        sys.argv = saved_argv
        sys.path[:] = saved_path
    return run.finish(code)


def _run_script(script: str, module: bool) -> int:
    """Run the program as ``python SCRIPT`` (or ``python -m MODULE``) would; its exit code."""
    try:
        if module:
            runpy.run_module(script, run_name="__main__", alter_sys=True)
        else:
            # As python does (3.9+): __file__ is absolute, sys.argv[0] stays as typed.
            runpy.run_path(os.path.abspath(script), run_name="__main__")
    except SystemExit as exc:
        return _exit_code(exc.code)
    except KeyboardInterrupt:
        traceback.print_exc()
        return 130
    except BaseException:
        traceback.print_exc()
        return 1
    return 0


class _Run:
    """What ``kprof run`` does once the program ends (returns, exits, or calls ``os._exit``):
    the profile ended, its outputs written and printed, the exit code said."""

    def __init__(
        self,
        args: argparse.Namespace,
        prof: Any,
        p: Any,
        starts: list[Any],
        notes: list[str],
        not_written: list[str],
        target_desc: str,
        windowed: bool,
    ) -> None:
        self.args, self.prof, self.p = args, prof, p
        self.starts, self.notes, self.not_written = starts, notes, not_written
        self.target_desc, self.windowed = target_desc, windowed
        self.runner = os.getpid()

    def finish(self, code: int) -> int:
        args, p = self.args, self.p
        for start in self.starts:
            imports.unwatch(start)
        interrupted = end_profile(self.prof, p)
        if self.notes:
            p.meta["notes"] = [*p.meta.get("notes", []), *self.notes]
        if os.getpid() != self.runner:
            _forked_child_paths(args)
        # Files first: a reader that went away (`| head`) or a script that closed sys.stdout
        # must not cost them.
        if not self.windowed:
            self.not_written.extend(write_outputs(p, args))
            print_text(p.report(by=REPORT_BY[args.by]))
            if args.tree:
                print_text("\n" + p.tree().report())
        else:  # the windows were written and printed as they ended
            print_text(p.report().split("\n\n")[0])
        if code:
            say(f"kprof run: {self.target_desc} exited with code {code}")
        if interrupted:
            say(f"kprof run: {INTERRUPTED}")
            return 130
        if self.not_written and not code:
            n = len(self.not_written)
            say(f"kprof run: {n} output{'s' * (n != 1)} could not be written (said above)")
            return EXIT_NOT_WRITTEN
        return code


def _windows(args: argparse.Namespace) -> tuple[Any, bool]:
    """The schedule ``--steps``/``--every``/``--windows`` ask for (or None), and whether
    ``--signal`` does; without either option, from ``KPROF_STEPS``/``KPROF_WINDOW_SIGNAL``
    (for a command line that cannot be changed)."""
    steps, what, signalled = args.steps, "--steps ", args.signal
    if steps is None and not signalled:
        steps = os.environ.get(envvars.STEPS, "").strip() or None
        what = f"{envvars.STEPS}="
        signalled = env_flag(envvars.WINDOW_SIGNAL)
        if steps is not None and signalled:
            raise ValueError(
                f"{envvars.STEPS} and {envvars.WINDOW_SIGNAL} are both set: windows come from "
                "steps or from a signal, not both; unset one"
            )
    elif steps is not None and signalled:
        raise ValueError("--signal opens and closes windows itself: give it no --steps")
    if signalled:
        if args.every is not None or args.windows is not None:
            raise ValueError("--every and --windows need --steps FIRST:LAST, not --signal")
        return None, True
    return _schedule(args, steps, what), False


def _schedule(args: argparse.Namespace, steps: str | None, what: str) -> Any:
    """The schedule ``--steps``/``--every``/``--windows`` ask for, or None."""
    from kprof_core.windows import steps_schedule

    if steps is None:
        if args.every is not None or args.windows is not None:
            raise ValueError("--every and --windows need --steps FIRST:LAST")
        return None
    first, sep, last = steps.partition(":")
    try:
        a, b = int(first), int(last)
    except ValueError:
        raise ValueError(f"{what}{steps!r}: expected FIRST:LAST, e.g. 100:110") from None
    if not sep:
        raise ValueError(f"{what}{steps!r}: expected FIRST:LAST, e.g. 100:110")
    if args.windows is not None and args.windows < 1:
        raise ValueError(f"--windows {args.windows}: must be at least 1")
    return steps_schedule(a, b, args.every, args.windows or 0)


def window_path(path: str, index: int) -> str:
    """``out.kprof`` -> ``out-0003.kprof`` for window 3, as ``kprof.save_windows`` names them
    (``{window}`` in the path: there)."""
    if "{window}" in path:
        return path.replace("{window}", f"{index:04d}")
    root, ext = os.path.splitext(path)
    return f"{root}-{index:04d}{ext}"


def _window_writer(args: argparse.Namespace, not_written: list[str]) -> Any:
    """``on_window`` for ``kprof run --steps``: each window's files (named by
    ``window_path``) written and its report printed as it ends; nothing kept. Paths that
    could not be written go to ``not_written`` (the run then exits non-zero)."""

    def write(w: Any) -> None:
        index = w.meta["window"]["index"]
        per = argparse.Namespace(
            **{
                k: (
                    window_path(v, index)
                    if k in ("output", "html", "trace_file", "perfetto", "speedscope") and v
                    else v
                )
                for k, v in vars(args).items()
            }
        )
        not_written.extend(
            write_outputs(w, per, rescue_as=window_path(f"kprof-{os.getpid()}.kprof", index))
        )
        print_text(w.report(by=REPORT_BY[args.by]))

    return write


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


def _depth(text: str) -> int:
    """``--stacks N``: a depth from 1 to 256."""
    from kprof_core.recording.sites import MAX_STACK_DEPTH

    if not text.isdigit() or not 1 <= int(text) <= MAX_STACK_DEPTH:
        raise argparse.ArgumentTypeError(f"a depth from 1 to {MAX_STACK_DEPTH}, not {text!r}")
    return int(text)


def add_parser(sub: Any) -> None:
    """Register ``kprof run``."""
    r = sub.add_parser("run", help="profile a Python script, as python -m cProfile does")
    r.add_argument("-m", dest="module", action="store_true", help="run a module (like python -m)")
    r.add_argument("--backends", metavar="A,B", help="only these backends (comma-separated)")
    r.add_argument("--no-device", action="store_true", help="host records only (device=False)")
    r.add_argument(
        "--steps",
        metavar="FIRST:LAST",
        help="record only steps FIRST to LAST-1 (steps end at kprof.step()); one window",
    )
    r.add_argument(
        "--every", type=int, metavar="N", help="with --steps: a window again every N steps"
    )
    r.add_argument(
        "--windows", type=int, metavar="K", help="with --steps --every: at most K windows"
    )
    r.add_argument(
        "--signal",
        action="store_true",
        help="SIGUSR2 (kill -USR2 PID) opens a window, the next one closes it: at once in a "
        "script without kprof.step(), else at the next step",
    )
    r.add_argument(
        "--sites",
        action="store_true",
        help="keep each record's launch site, the line of your code behind it",
    )
    r.add_argument(
        "--stacks",
        nargs="?",
        const=True,
        type=_depth,
        metavar="DEPTH",
        help="keep each record's Python stack too (32 frames deep, or DEPTH)",
    )
    add_output_options(r)
    add_by_option(r)
    r.add_argument("script", help="the script (or module, with -m)")
    r.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    r.set_defaults(func=command)
