"""What a plugin prepares when the program imports its vendor library, profile or not: the
entry-point group ``kprof.on_import``.

Some device timing must be asked for when an object is created, long before any profile: an
OpenCL queue gives device timestamps only if it was created with ``PROFILING_ENABLE``, and
nearly every program creates its queue at the top, before ``with kprof.profile():``. An entry
point of this group names a top-level module (the entry's name, ``pyopencl``) and a callable
taking no arguments (its value); once both kprof and that module are imported, in either
order, the callable runs once, outside any profile, on a thread of kprof's while the
importing thread waits for it, at most ``KPROF_DISCOVERY_TIMEOUT`` seconds. It must cost the
program nothing per launch and never import another vendor library, nor kprof at its
module's top (``import kprof`` may start it while kprof is still initializing).

``import kprof`` reads this group's entry points (no plugin is imported for it) and watches the
named modules (:mod:`kprof_core.host.imports`). ``KPROF_DISABLE_PLUGIN_AUTOLOAD`` turns them
all off, and ``KPROF_PLUGINS`` keeps those of the distributions that provide the backends it
names. An entry that fails is warned about in one line; the program's import goes on.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from importlib import metadata
from typing import Any

from kprof_core.host import imports
from kprof_core.host.backend import KprofError
from kprof_core.host.calls import InImport, NoAnswer, PluginRaised, bounded
from kprof_core.host.discovery import (
    DEFAULT_DISCOVERY_TIMEOUT,
    ENTRY_POINT_GROUP,
    ENV_DISABLE_AUTOLOAD,
    discovery_timeout,
    env_plugin_names,
)
from kprof_core.host.settings import env_flag

GROUP = "kprof.on_import"

#: The entry points started so far, as ``(module, value)``: each runs once per process.
_done: set[tuple[str, str]] = set()


def _wanted(eps: Any) -> list[metadata.EntryPoint]:
    """This group's entry points (of ``eps``, every group's, read once), less those the
    environment turns off."""
    try:
        if env_flag(ENV_DISABLE_AUTOLOAD):
            return []
        names = env_plugin_names()
    except KprofError:  # said, as an error, when a profile or `kprof backends` loads plugins
        return []
    mine = list(eps.select(group=GROUP))
    if names is None or not mine:
        return mine
    dists = {_dist(ep) for ep in eps.select(group=ENTRY_POINT_GROUP) if ep.name in names} - {None}
    return [ep for ep in mine if _dist(ep) in dists]


def _dist(ep: metadata.EntryPoint) -> str | None:
    dist = getattr(ep, "dist", None)
    return None if dist is None else dist.name


def _runner(ep: metadata.EntryPoint) -> Callable[[str], None]:
    def run(module: str) -> None:
        key = (ep.name, ep.value)
        if key in _done:
            return
        _done.add(key)
        try:
            timeout = discovery_timeout()
        except KprofError:  # said when a profile or `kprof backends` loads plugins
            timeout = DEFAULT_DISCOVERY_TIMEOUT
        try:
            # Bounded as a plugin's start is: the program's import never waits past it.
            bounded(lambda: ep.load()(), timeout, f"{GROUP} entry point {ep.name}")
        except Exception as exc:  # a plugin's failure must not fail the program's import
            why = (
                f"it imports {exc.module}, which the program was importing"
                if isinstance(exc, InImport)
                else str(exc)
                if isinstance(exc, (NoAnswer, PluginRaised))
                else f"{type(exc).__name__}: {exc}"
            )
            warnings.warn(
                f"kprof: the {GROUP} entry point {ep.name} = {ep.value!r} failed after "
                f"{module} was imported ({why}); profiles still run, without what it prepares",
                RuntimeWarning,
                stacklevel=3,
            )

    return run


def start() -> None:
    """Watch every wanted entry point's module (called once, by ``import kprof``)."""
    for ep in _wanted(metadata.entry_points()):
        imports.watch([ep.name], _runner(ep))


__all__ = ["GROUP", "start"]
