"""A call right after a module's first import: how ``kprof run`` and ``kprof.profile()`` start a
backend's capture only when the program imports the backend's vendor library, and import
nothing themselves (``split``).

CPython has no post-import hook, so a finder goes first on ``sys.meta_path`` (as coverage and
ddtrace do): for a watched top-level name it asks the finders after it for the module's spec
and wraps the spec's loader, whose ``exec_module`` runs the real one, then the callback. The
module's ``__loader__`` and ``__spec__.loader`` are the real loader again before the callback
runs, so nothing of the watch stays on the module.
"""

from __future__ import annotations

import sys
import threading
import warnings
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from kprof_core.host.discovery import registry

if TYPE_CHECKING:
    from kprof_core.host.backend import Backend

_lock = threading.Lock()
#: name -> the callbacks waiting for its import. A callback is called once, for the first of
#: its names imported, then forgotten with all of its names.
_watches: dict[str, list[Callable[[str], None]]] = {}


class _Loader:
    """The real loader, with the callbacks after ``exec_module``."""

    def __init__(self, loader: Any, name: str) -> None:
        self.loader = loader
        self.name = name

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        try:
            self.loader.exec_module(module)
        finally:
            module.__loader__ = self.loader
            spec = getattr(module, "__spec__", None)
            if spec is not None and spec.loader is self:
                spec.loader = self.loader
        # Only once the module ran to its end. It is complete: marked so now (importlib does
        # after this returns), so that a plugin's thread importing it does not wait for the
        # lock this import holds (calls.bounded).
        if spec is not None:
            spec._initializing = False
        _imported(self.name)

    def __getattr__(self, attr: str) -> Any:  # get_resource_reader, is_package, ...
        return getattr(self.loader, attr)


class _Finder:
    """First on ``sys.meta_path`` while something is watched; finds nothing itself."""

    def __init__(self) -> None:
        self._busy = threading.local()

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if path is not None or fullname not in _watches or getattr(self._busy, "on", False):
            return None
        self._busy.on = True
        try:
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
            else:
                return None
        finally:
            self._busy.on = False
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec  # a namespace package, a legacy loader: imported as it is, not watched
        spec.loader = _Loader(spec.loader, fullname)  # type: ignore[assignment]  # duck-typed
        return spec


_finder = _Finder()


def _imported(name: str) -> None:
    with _lock:
        callbacks = _watches.get(name, [])
        for cb in callbacks:
            _forget(cb)
    for cb in callbacks:
        try:
            cb(name)
        except Exception as exc:  # the program's import must not fail for kprof's sake
            warnings.warn(
                f"kprof: what was to start when the program imported {name} failed: "
                f"{type(exc).__name__}: {exc}",
                RuntimeWarning,
                stacklevel=2,
            )


def _forget(cb: Callable[[str], None]) -> None:
    for name in [n for n, cbs in _watches.items() if cb in cbs]:
        _watches[name] = [c for c in _watches[name] if c != cb]
        if not _watches[name]:
            del _watches[name]
    if not _watches and _finder in sys.meta_path:
        sys.meta_path.remove(_finder)


def watch(names: Iterable[str], callback: Callable[[str], None]) -> None:
    """Call ``callback(name)`` once, on the importing thread, right after the first of the
    top-level modules ``names`` has been imported (its code ran to its end; an import that
    raises does not count). One already imported: called at once. An exception from the
    callback is warned about, never raised into the program's import."""
    names = list(names)
    for n in names:
        if n in sys.modules:
            callback(n)
            return
    with _lock:
        for n in names:
            _watches.setdefault(n, []).append(callback)
        if _finder not in sys.meta_path:
            sys.meta_path.insert(0, _finder)


def unwatch(callback: Callable[[str], None]) -> None:
    """Stop waiting for ``callback``'s modules (nothing happens if it was called already); the
    finder leaves ``sys.meta_path`` with the last watch."""
    with _lock:
        _forget(callback)


def watching() -> bool:
    """Whether anything is watched (kprof's finder is on ``sys.meta_path``)."""
    return _finder in sys.meta_path


def split(backends: list[Backend]) -> tuple[list[Backend], list[tuple[Backend, list[str]]]]:
    """The backends to start now (usable, and either naming no modules in ``capture_modules``
    or one the program has already imported), and the others with the modules whose import
    starts them. Only the first are described (``describe_backend`` imports the vendor
    library): a profile never imports a library the program did not."""
    now: list[Backend] = []
    later: list[tuple[Backend, list[str]]] = []
    for b in backends:
        if b.broken is not None:
            continue
        try:
            mods = b.capture_modules(b)
        except Exception:  # a plugin's failure: started now, as before the hook
            mods = None
        if isinstance(mods, (list, tuple)) and mods and all(isinstance(m, str) for m in mods):
            if not any(m in sys.modules for m in mods):
                later.append((b, list(mods)))
                continue
        # Described through the registry: bounded in time, a hung plugin is skipped.
        try:
            registry.get(b.name)
        except Exception:  # a name another registration replaced: described as it is
            pass
        if b.broken is None and b.info().status == "available":
            now.append(b)
    return now, later
