"""What the checks watch a plugin with: a ledger of the tokens handed to kprof and released,
snapshots of every module's and class's attributes (for capture), and a stall's release."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

from kprof_core.conformance.rules import ConformanceError, fail
from kprof_core.host.backend import Backend


class Once:
    """A stall's release, called at most once, from whichever thread comes first."""

    def __init__(self, fn: Callable[[], None]) -> None:
        self.fn, self.called = fn, False
        self._lock = threading.Lock()
        self._by: threading.Thread | None = None

    def __call__(self) -> None:
        with self._lock:
            if self.called:
                return
            self.called = True
            self._by = threading.current_thread()
        self.fn()

    def called_by_watchdog(self, watchdog: threading.Thread) -> bool:
        return self._by is watchdog


class Ledger:
    """Tokens handed to kprof and released, by identity (it holds them, so ids stay unique)."""

    def __init__(
        self, backend: Backend, done: Callable[..., Any], rerecord_supersedes: bool = False
    ) -> None:
        self.backend, self._done = backend, done
        self.rerecord_supersedes = rerecord_supersedes
        self._lock = threading.Lock()
        self._keep: list[Any] = []
        self.outstanding: dict[int, str] = {}  # id -> who handed it out
        self.releases: dict[int, int] = {}
        self.undone: set[int] = set()  # released before the device reached them
        self.undone_releases = 0
        self.violations: list[ConformanceError] = []
        self.launches: list[tuple[str, str]] = []
        self.count = 0

    def handed(self, tok: Any, who: str) -> None:
        with self._lock:
            self._keep.append(tok)
            k = id(tok)
            if k in self.outstanding:
                self.violations.append(
                    fail(
                        "token pool",
                        "a token is not handed out again while kprof holds it",
                        f"{who} handed out {tok!r}, which {self.outstanding[k]} had handed to kprof "
                        f"and kprof has not released",
                    )
                )
            elif (
                k in self.undone
                and not self.rerecord_supersedes
                and self._done(self.backend, tok) is False
            ):
                self.violations.append(
                    fail(
                        "token pool",
                        "a token is not handed out again before the device reached it",
                        f"{who} handed out {tok!r}, which kprof had given up on and released before "
                        f"the device reached it; the device still has not",
                    )
                )
            self.undone.discard(k)
            self.outstanding[k] = who
            self.releases.setdefault(k, 0)
            self.count += 1

    def released(self, tok: Any) -> None:
        with self._lock:
            k = id(tok)
            if k not in self.outstanding:
                if k in self.releases:
                    self.violations.append(
                        fail(
                            "release_timestamp",
                            "is called exactly once per token",
                            f"{tok!r} was released twice",
                        )
                    )
                return  # a token from before the ledger (a pool's older token): not ours
            who = self.outstanding.pop(k)
            self.releases[k] += 1
            if self._done(self.backend, tok) is False:  # None: it cannot tell
                self.undone.add(k)
                self.undone_releases += 1
            del who

    def raise_violations(self) -> None:
        if self.violations:
            raise self.violations[0]

    def check_all_released(self, left_by_kprof: int = 0) -> None:
        """Every token handed out was given back, but for ``left_by_kprof``: those kprof
        said it left to the plugin (its releases ran past the profile's deadline, which a
        loaded machine does with a short timeout)."""
        if not self.backend.pools_tokens:
            return  # kprof only drops its references: nothing to count
        left = list(self.outstanding.values())
        if len(left) > left_by_kprof:
            raise fail(
                "release_timestamp",
                "is called exactly once per token",
                f"{len(left)} tokens were never released (first handed out by {left[0]})",
            )


def plugin_module(plugin: object) -> tuple[str, ...]:
    """The module defining the plugin: its state is its own to change (a plugin binding a
    native function on first use). The vendor library's, and any other, is not."""
    mod = getattr(plugin, "__name__", None) if is_module(plugin) else type(plugin).__module__
    return (mod,) if mod else ()


def is_module(x: Any) -> bool:
    return isinstance(x, type(sys))


def is_patch(before: Any, now: Any) -> bool:
    """Whether an attribute that changed from ``before`` to ``now`` was patched. Libraries
    rebind their own data all the time (hypothesis's garbage-collection timings, counters,
    caches), so a patch is a callable put in place or taken away: plugins wrap functions,
    methods and classes. A plugin that leaves a data value behind is not caught by this."""
    return now is not before and (callable(before) or callable(now))


def snapshot(own: tuple[str, ...]) -> dict[tuple[int, str], tuple[Any, str, Any]]:
    """Every attribute of every loaded module and of every class defined in one, by owner and
    name: (value, dotted name, owner). Owners are held, so their ids stay unique."""
    snap: dict[tuple[int, str], tuple[Any, str, Any]] = {}
    classes: set[int] = set()
    for modname, mod in list(sys.modules.items()):
        if modname.split(".")[0] in own or modname in own:
            continue
        d = getattr(mod, "__dict__", None) if is_module(mod) else None
        if not isinstance(d, dict):
            continue
        for k, v in list(d.items()):
            snap[(id(mod), k)] = (v, f"{modname}.{k}", mod)
            if (
                isinstance(v, type)
                and id(v) not in classes
                and getattr(v, "__module__", None) == modname
            ):
                classes.add(id(v))
                for ck, cv in list(vars(v).items()):
                    snap[(id(v), ck)] = (cv, f"{modname}.{v.__qualname__}.{ck}", v)
    return snap
