"""``kprof.profile()``: the entry point that starts capture and yields a ``Profile``."""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from kprof_core import envvars
from kprof_core.capture_users import (  # tests read the counts here
    _capture_users as _capture_users,
)
from kprof_core.capture_users import _install, _uninstall
from kprof_core.capture_users import _installed as _installed
from kprof_core.capture_users import capture_installed as capture_installed
from kprof_core.host import imports
from kprof_core.host.backend import Backend, KprofError
from kprof_core.host.discovery import registry
from kprof_core.host.settings import env_flag, resolve_timeout
from kprof_core.recording import activity, bounds
from kprof_core.recording.annotations import around
from kprof_core.recording.range_book import queueless_notes
from kprof_core.recording.recorder import _ACTIVE, Recorder, now
from kprof_core.recording.sites import DEFAULT_STACK_DEPTH, MAX_STACK_DEPTH, stack_depth
from kprof_core.result import Profile
from kprof_core.windows import NEVER, Schedule, Windows, check_schedule
from kprof_core.windows_signal import SignalWindows, check_signal

F = TypeVar("F", bound=Callable[..., Any])


def _notes(rec: Recorder) -> list[str]:
    """What the profile's backends say it may lack (``report_notes``); a failing hook says
    nothing rather than costing the profile."""
    notes: list[str] = []
    for b in rec.backends:
        try:
            said = b.report_notes(b)
        except Exception:
            continue
        if isinstance(said, (list, tuple)):
            notes += [n for n in said if isinstance(n, str) and n not in notes]
    return notes


def _env_stacks() -> int:
    """``KPROF_STACKS``: a boolean (depth 32 when on) or a depth."""
    raw = os.environ.get(envvars.STACKS, "").strip()
    if raw.isdigit() and int(raw) > 1:  # "1" is a boolean's on
        if int(raw) > MAX_STACK_DEPTH:  # the user's setting: said in one line, no traceback
            raise KprofError(
                f"{envvars.STACKS}={raw!r} is more frames than kprof keeps: use a depth from 2 "
                f"to {MAX_STACK_DEPTH}, 1 (or true, yes, on) for {DEFAULT_STACK_DEPTH}, or 0 "
                f"(or false, no, off) for none"
            )
        return stack_depth(int(raw))
    return stack_depth(env_flag(envvars.STACKS))


class profile:
    """Profile the code in a ``with`` block (or a decorated function).

    ``device``: time work on the device with timestamps (default). With ``False`` only host
    records are kept. ``trace``: print a chronological trace after the summary.
    ``synchronize``: synchronize after every launch (for debugging; perturbs what it measures).
    ``backends``: names of the backends to use (default: every available one whose library
    the program has imported, each other one from the program's import of its library, so
    that a profile imports no vendor library the program does not).
    ``timeout``: how long, in seconds and in all, to wait for the device when resolving at
    the end (default 60, or ``KPROF_RESOLVE_TIMEOUT``); records whose work had not completed
    by then are marked unresolved, with the reason, and the profile ends normally.
    ``sites``: keep each record's launch site, the line of your code behind it (default off,
    as it costs about 0.2 µs per PoCL launch compiled and 0.5 µs in pure Python, at or over
    the launch-cost targets: BENCHMARKS.md; ``KPROF_SITES=1`` turns the default on): the innermost frame that is not kprof's, a
    plugin's, the standard library's or a library's that kprof skips by default (PyOpenCL,
    CuPy, reikna, loopy, NumPy, pytools, hip-python). ``site_skip``: more module prefixes whose frames are not
    yours (``("mylib", "company.gpu")``): a launch from inside them is given the line that
    called into them. ``stacks``: keep each record's whole Python stack too, up to 32 frames
    (``True``) or the depth given (1 to 256), from the launch site outwards (default off, or
    ``KPROF_STACKS``); implies ``sites``. ``p.tree()``, ``p.summary(by="stack")`` and
    ``p.export_speedscope`` read them.

    ``schedule``: record only some steps of a loop, each run of them a window of its own
    (``kprof.schedule(...)``; steps end at ``kprof.step()``). Each finished window is a
    ``Profile`` with its steps in ``meta["window"]``, handed to ``on_window`` (for example
    ``kprof.save_windows(dir)``) or, without it, kept in the yielded profile's ``windows``;
    the yielded profile itself records nothing. Between windows no recorder runs.
    ``window_signal=True`` (or a signal number; True is ``SIGUSR2``), instead of a schedule:
    each signal the process gets opens or closes a window, at once until the program first
    calls ``kprof.step()`` (in one that never does: always), at the next step after that;
    the previous handler is back when the profile ends. Main thread only, as every signal
    handler.

    ``max_records``: keep at most this many device rows, the latest (``keep="last"``, a ring)
    or the first (``keep="first"``); ``min_duration_ns``: drop kernels and copies shorter
    than this. What was dropped is counted in ``meta["bounds"]`` and said in the report.

    Only the context that entered the profile is recorded: code it calls, asyncio tasks it
    creates, and threads that run their target through ``kprof.propagate``.
    """

    def __init__(
        self,
        device: bool = True,
        trace: bool = False,
        synchronize: bool = False,
        backends: Iterable[str] | None = None,
        timeout: float | None = None,
        schedule: Schedule | None = None,
        on_window: Callable[[Profile], Any] | None = None,
        max_records: int | None = None,
        keep: str = "last",
        min_duration_ns: int | None = None,
        *,
        sites: bool | None = None,
        site_skip: Iterable[str] = (),
        window_signal: bool | int = False,
        stacks: bool | int | None = None,
    ) -> None:
        if stacks is None:
            stacks = _env_stacks()
        self.stacks = stack_depth(stacks)
        if sites is None:
            sites = env_flag(envvars.SITES) or self.stacks > 0
        if isinstance(site_skip, str):
            site_skip = [site_skip]
        self.site_skip = list(site_skip)
        if not all(isinstance(m, str) and m for m in self.site_skip):
            raise TypeError(
                f"profile(site_skip=...) takes module prefixes (non-empty str), not {site_skip!r}"
            )
        self.sites = sites
        bounds.check(max_records, keep, min_duration_ns)
        self.max_records, self.keep, self.min_duration_ns = max_records, keep, min_duration_ns
        self.window_signal = check_signal(window_signal, schedule)
        check_schedule(schedule, on_window, self.window_signal is not None)
        self.schedule, self.on_window = schedule, on_window
        self._windows: Windows | None = None
        for arg, value in (
            ("device", device),
            ("trace", trace),
            ("synchronize", synchronize),
            ("sites", sites),
        ):
            if not isinstance(value, bool):
                raise TypeError(f"profile({arg}=...) must be True or False, not {value!r}")
        if isinstance(backends, str):
            backends = [backends]
        self._backend_names = None if backends is None else list(backends)
        if self._backend_names is not None:
            for n in self._backend_names:
                if not isinstance(n, str):
                    raise TypeError(
                        f"profile(backends=...) takes backend names (str), "
                        f"not {type(n).__name__} {n!r}"
                    )
        self.device = device
        self.trace = trace
        self.synchronize = synchronize
        self.timeout = resolve_timeout(timeout)
        self._token: Any = None
        self._scope: tuple[int, list[Backend], int] | None = None
        self._recorder: Recorder | None = None
        self._counted = False  # this profile counts as a user of its backends' capture
        self._watches: list[Callable[[str], None]] = []  # backends waiting for an import
        self.result: Profile | None = None

    def __enter__(self) -> Profile:
        if self._recorder is not None or self._windows is not None:
            raise RuntimeError("this kprof.profile() is already active; create a new one to nest")
        if self.schedule is not None or self.window_signal is not None:
            return self._enter_scheduled(self.schedule)
        if self._backend_names is not None:
            return self.enter_with(registry.usable(self._backend_names))
        # Every backend: those whose library the program has imported start now, the others
        # when it imports theirs (kprof imports no vendor library the program did not).
        usable, later = imports.split(registry.loaded())
        result = self.enter_with(usable)
        for b, mods in later:
            start = self._start_on_import(b)
            self._watches.append(start)
            imports.watch(mods, start)
        return result

    def _start_on_import(self, backend: Backend) -> Callable[[str], None]:
        def start(module: str) -> None:
            self.add_backend(backend)

        return start

    def enter_with(self, backends: list[Backend]) -> Profile:
        """Enter with these backends only (usable ones, as ``registry.usable`` gives); more
        may join while it runs (:meth:`add_backend`). ``kprof run``'s way in: it starts the
        backends whose library the program imports later as it imports it."""
        if self._recorder is not None:
            raise RuntimeError("this kprof.profile() is already active; create a new one to nest")
        parent = _ACTIVE.get()
        if parent is not None and parent._closed:
            # Exited on another thread, so still set in this context: not a parent.
            parent = parent.open_outer()
        rec = Recorder(
            backends,
            device=self.device,
            synchronize=self.synchronize,
            timeout=self.timeout,
            parent=parent,
            sites=self.sites,
            site_skip=self.site_skip,
            stacks=self.stacks,
            bounds=(
                None
                if self.max_records is None and not self.min_duration_ns
                else bounds.Bounds(self.max_records, self.keep, self.min_duration_ns)
            ),
        )
        result = Profile(trace=self.trace, backends=[b.name for b in backends])
        # Raises only after undoing itself: nothing to clean up here.
        self._counted = _install(backends)
        # A backend whose install failed (disabled, said in a warning) recorded nothing.
        result.backends = [b.name for b in backends if b.broken is None]
        self._recorder, self.result = rec, result
        result.start_ns = rec.start_ns = now()
        self._token = _ACTIVE.set(rec)
        if rec.has_activity:
            scope, opened = activity.open_scope(rec)
            self._scope = (scope, opened, threading.get_ident())
        return result

    def _window(self) -> profile:
        return profile(
            self.device,
            self.trace,
            self.synchronize,
            self._backend_names,
            self.timeout,
            max_records=self.max_records,
            keep=self.keep,
            min_duration_ns=self.min_duration_ns,
            sites=self.sites,
            site_skip=self.site_skip,
            stacks=self.stacks,
        )

    def _hold(self) -> Callable[[], None]:
        """Keep this profile's backends' capture installed until the returned call."""
        backends = (
            registry.usable(self._backend_names)
            if self._backend_names is not None
            else imports.split(registry.loaded())[0]
        )
        if not _install(backends):
            return lambda: None

        def release() -> None:
            interrupted = _uninstall(backends)
            if interrupted is not None:
                raise interrupted

        return release

    def _enter_scheduled(self, sched: Schedule | None) -> Profile:
        if self._backend_names is not None:  # an unknown backend name raises here, not later
            registry.usable(self._backend_names)
        self.result = Profile(trace=self.trace, backends=[])
        if self.window_signal is not None:
            self._windows = SignalWindows(
                self.window_signal, self._window, self._hold, self.result, self.on_window
            )
        else:
            self._windows = Windows(
                sched or NEVER, self._window, self._hold, self.result, self.on_window
            )
        self._windows.enter(now)
        return self.result

    def add_backend(self, backend: Backend) -> bool:
        """Start ``backend``'s capture in this active profile, which records the backend's work
        from now on; False (nothing done) when the profile is not active or has ended, already
        uses it, or it is not usable (``info()`` describes it first, if it was not)."""
        rec, result = self._recorder, self.result
        if rec is None or result is None or rec._closed or backend in rec.backends:
            return False
        # Described bounded in time (a discovered plugin): a hung describe_backend does not
        # hang the program's import that starts the backend.
        if backend.broken is not None or registry.describe(backend).status != "available":
            return False
        if self._counted and not _install([backend]):
            return False
        if backend.broken is not None:  # its install failed: disabled, said in a warning
            if self._counted:
                _uninstall([backend])
            return False
        rec.add_backend(backend)
        result.backends.append(backend.name)
        if rec.device and backend.has_activity:
            if self._scope is None:
                if threading.get_ident() == rec.entered_on:  # a thread's scopes open there
                    scope, opened = activity.open_scope(rec)
                    self._scope = (scope, opened, rec.entered_on)
            elif self._scope[2] == threading.get_ident():
                self._scope[1].extend(activity.open_scope(rec, [backend])[1])
        return True

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        # Returns None: an exception raised in the block propagates unchanged.
        if self._windows is not None:
            w, self._windows = self._windows, None
            w.exit(now)
            return
        while self._watches:
            imports.unwatch(self._watches.pop())
        rec, result = self._recorder, self.result
        assert rec is not None and result is not None
        result.end_ns = now()
        try:
            _ACTIVE.reset(self._token)
        except ValueError:
            # Exited in another context than it entered (a generator, a callback); restore
            # what was active around it rather than failing the user's code.
            _ACTIVE.set(rec.parent)
            rec.exited_elsewhere = True
        try:
            if self._scope is not None:
                scope, opened, ident = self._scope
                self._scope = None
                if ident == threading.get_ident():  # a thread's scopes can only be left there
                    activity.close_scope(rec, scope, opened)
                activity.flush(rec)
            rec.finish(result.end_ns)
        except Exception as err:
            # A bug of kprof's must not replace the user's exception or break their program.
            rec.abandon()
            warnings.warn(
                f"kprof: resolving the profile failed ({type(err).__name__}: {err}); "
                f"what was resolved before is kept",
                RuntimeWarning,
                stacklevel=2,
            )
        except BaseException:
            rec.abandon()  # interrupted while waiting for the device: keep what was resolved
            raise
        finally:
            # Records first: a plugin raising KeyboardInterrupt from remove_capture must not
            # cost the profile (nor leave other backends patched: _uninstall handles all).
            if rec.scopes:
                activity.forget(rec)
            notes = _notes(rec)  # before remove_capture: what the capture could not see
            recording = rec.recording()
            notes += queueless_notes(recording, rec.backends, rec.device, rec.activity_backends)
            interrupted = _uninstall(rec.backends) if self._counted else None
            result._take(recording)
            if rec.bounds is not None:
                result.meta["bounds"] = rec.bounds.describe(result.names)
            result.memory = rec.memory.close(result.start_ns)
            if notes:
                result.meta["notes"] = notes
            if (
                rec.rows.problems.unreleased
            ):  # said in a warning too; the conformance kit counts them
                result.meta["tokens_left"] = rec.rows.problems.unreleased
            self._recorder = None
            if rec.parent is not None:
                rec.parent.absorb(recording, rec.memory)
        if interrupted is not None:
            raise interrupted

    def __call__(self, fn: F) -> F:
        """Profile each call of ``fn`` (a coroutine function: each await of it; a generator
        function: each iteration of it, to the end); the wrapper's ``last_profile`` is the
        latest call's ``Profile``."""

        def block() -> profile:
            return profile(
                self.device,
                self.trace,
                self.synchronize,
                self._backend_names,
                self.timeout,
                self.schedule,
                self.on_window,
                self.max_records,
                self.keep,
                self.min_duration_ns,
                sites=self.sites,
                site_skip=self.site_skip,
                window_signal=self.window_signal or False,
                stacks=self.stacks,
            )

        def keep(wrapper: Any, p: Profile) -> None:
            wrapper.last_profile = p

        return around(fn, block, "kprof.profile", keep)
