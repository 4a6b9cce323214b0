"""``kprof.range`` on both recorder paths: the compiled entry and exit (``_range.c``) make the
same frames and pending entries as the Python twin (``range._enter_py``/``_exit_py``), and
leave every case but the common one to it.

A deterministic plugin stands in for a device (its timestamps are numbered tokens) and the
host clock is a counter on both paths, so the pending entries are compared exactly.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

import kprof
from kprof_core.data.records import APPROXIMATE, HOST_TIMED, RANGE
from kprof_core.host.discovery import ENV_DISABLE_AUTOLOAD
from kprof_core.low_level import native
from kprof_core.low_level.layout import ENTRY_HOST_RANGE, WITH_HOST
from kprof_core.recording import annotations, recorder
from kprof_core.recording.recorder import Recorder

COMPILED = native.loaded() is not None


class Tok:
    def __init__(self, n: int, approximate: bool = False) -> None:
        self.n = n
        if approximate:
            self.approximate = True


class Plugin:
    """Timestamps are numbered tokens; the queue, the failures and the approximate tokens are
    set by the test."""

    def __init__(self) -> None:
        self.queue: Any = "q0"
        self.count = itertools.count(1)
        self.fail_at: set[int] = set()
        self.none_at: set[int] = set()
        self.approximate = False
        self.released: list[int] = []

    @kprof.plugin.hookimpl
    def current_queue(self) -> Any:
        return self.queue

    @kprof.plugin.hookimpl
    def record_timestamp(self) -> Any:
        n = next(self.count)
        if n in self.fail_at:
            raise RuntimeError(f"timestamp {n} failed")
        if n in self.none_at:
            return None
        return Tok(n, self.approximate)

    @kprof.plugin.hookimpl
    def release_timestamp(self, token: Tok) -> None:
        self.released.append(token.n)

    @kprof.plugin.hookimpl
    def elapsed_time(self, start: Tok, stop: Tok) -> int:
        return stop.n - start.n

    @kprof.plugin.hookimpl
    def timestamp_done(self, token: Tok) -> bool:
        return True


@pytest.fixture
def reg(fresh_registry: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv(ENV_DISABLE_AUTOLOAD, "1")  # only the plugins registered here
    yield fresh_registry


def plain(entry: tuple[Any, ...]) -> tuple[Any, ...]:
    """An entry with its tokens as their numbers, its backend's slot and its queue key named
    (each registration gets a new slot)."""
    out = []
    for i, v in enumerate(entry):
        if isinstance(v, Tok):
            v = ("tok", v.n)
        elif i == 3 and v is not None:
            v = "queue"
        elif i == 0 and v is not None:
            v = "slot"
        out.append(v)
    return tuple(out)


def scenario(plugin: Plugin, compiled: bool, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Ranges of every kind, on one path: the pending entries, and which ran in Python."""
    clock = itertools.count(1000, 10)
    tick: Any = lambda: next(clock)  # noqa: E731
    calls = {"enter": 0, "exit": 0}
    enter_py, exit_py = annotations.range._enter_py, annotations.range._exit_py

    def counted_enter(self: Any) -> Any:
        calls["enter"] += 1
        return enter_py(self)

    def counted_exit(self: Any, *exc: object) -> None:
        calls["exit"] += 1
        exit_py(self, *exc)

    native.use_compiled(compiled)
    mod = native.loaded()
    try:
        with monkeypatch.context() as m, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # re-entry and the failing hook warn
            m.setattr(Recorder, "harvest_every", 10**9)
            m.setattr(annotations, "now", tick)
            m.setattr(recorder, "now", tick)
            m.setattr(annotations.range, "_enter_py", counted_enter)
            m.setattr(annotations.range, "_exit_py", counted_exit)
            if not COMPILED:  # there they are the class's __enter__/__exit__ themselves
                m.setattr(annotations.range, "__enter__", counted_enter)
                m.setattr(annotations.range, "__exit__", counted_exit)
            if mod is not None:
                annotations._range_bind(mod, tick)
            with kprof.profile(backends=["ranges"]):
                rec = kprof.plugin.active()
                assert rec is not None
                with kprof.range("plain"):
                    pass
                with kprof.range("outer"), kprof.range("inner"):
                    pass
                shared = kprof.range("shared")
                with shared, shared:  # entered again before it exited
                    pass
                plugin.queue = None  # no current queue: host time only
                with kprof.range("no queue"):
                    pass
                plugin.queue = "q0"
                plugin.approximate = True  # a host observation's token
                with kprof.range("approximate"):
                    pass
                plugin.approximate = False
                # (Each next() below takes a number: the range's timestamps are the two after.)
                plugin.none_at = {next(plugin.count) + 2}  # no stop timestamp: host time
                with kprof.range("none at exit"):
                    pass
                plugin.fail_at = {next(plugin.count) + 2}  # the stop timestamp raises
                with kprof.range("fails at exit"):
                    pass
                entries = [plain(e) for e in rec._incoming]
                open_after = dict(rec.ranges.open)
    finally:
        native.use_compiled(True)
        if mod is not None:
            annotations._range_bind(mod, annotations.now)
    return {
        "entries": entries,
        "open": open_after,
        "calls": calls,
        "released": sorted(plugin.released),
    }


def test_both_paths_make_the_same_entries(reg: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    results = {}
    for compiled in (True, False):
        plugin = Plugin()
        reg.register(plugin, "ranges")
        try:
            results[compiled] = scenario(plugin, compiled, monkeypatch)
        finally:
            reg.unregister("ranges")
    fast, pure = results[True], results[False]
    assert fast["entries"] == pure["entries"]
    assert fast["open"] == pure["open"] == {}
    # One entry per range: 9 ranges (the shared one twice), 8 with a start timestamp; the one
    # whose stop raised has no device entry (and its backend is disabled), the one whose stop
    # was None is timed on the host; both gave their start token back. The 7 device entries
    # carry their host side (WITH_HOST); the range without a queue and the one whose stop
    # raised have a host entry alone.
    kinds = [e[1] for e in pure["entries"]]
    assert len(kinds) == 9
    assert kinds.count(ENTRY_HOST_RANGE) == 2 and kinds.count(RANGE) == 7
    flags = [e[10] for e in pure["entries"] if e[1] == RANGE]
    assert all(f & WITH_HOST for f in flags)
    flags = [f & ~WITH_HOST for f in flags]
    assert flags.count(APPROXIMATE) == 1 and flags.count(HOST_TIMED) == 1
    # The host side is the frame's: the entering thread, t0 to the end, the exit's site.
    for e in pure["entries"]:
        assert e[4] == pure["entries"][0][4] and e[5] < e[6]
    # Every token handed out is given back once (14: two per range with both timestamps, the
    # start of the last two), by the harvest or at the exit.
    assert fast["released"] == pure["released"] and len(set(pure["released"])) == 14
    # The pure path runs every range in Python; the compiled one only the re-entered object's
    # second entry and the exit that finds its outer entry waiting (the failing stop
    # timestamp is handled in C too, as the Python path does).
    assert pure["calls"] == {"enter": 9, "exit": 9}
    if COMPILED:
        assert fast["calls"] == {"enter": 1, "exit": 1}
    else:
        assert fast["calls"] == pure["calls"]


def test_the_range_name_is_checked_on_both_paths() -> None:
    with pytest.raises(TypeError, match="range name must be a str, not int"):
        kprof.range(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="range name must not be empty"):
        kprof.range("")
    assert kprof.range("step").name == "step"


def test_a_range_outside_a_profile_records_nothing_and_can_be_reused() -> None:
    r = kprof.range("idle")
    with r:
        with r:
            pass
    assert r._top is None and not r._more
