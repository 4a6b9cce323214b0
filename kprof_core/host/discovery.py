"""Finding backend plugins (entry points), isolating broken ones, resolving their hooks."""

from __future__ import annotations

import os
import threading
import warnings
from importlib import metadata
from typing import Any

import pluggy

from kprof_core import envvars
from kprof_core.host import defaults, hookspecs
from kprof_core.host.backend import Backend, BackendInfo, KprofError
from kprof_core.host.calls import InImport, NoAnswer, PluginRaised, bounded
from kprof_core.host.hookspecs import RESOLVED_HOOKS
from kprof_core.host.markers import PROJECT
from kprof_core.host.settings import env_flag, env_seconds

ENTRY_POINT_GROUP = "kprof.backends"
ENV_DISABLE_AUTOLOAD = envvars.DISABLE_PLUGIN_AUTOLOAD
ENV_PLUGINS = envvars.PLUGINS
ENV_DISCOVERY_TIMEOUT = envvars.DISCOVERY_TIMEOUT
#: Seconds a plugin's import, and then its describe_backend, may take before the backend is
#: listed as ``error: did not answer in N s`` and not used (a wedged driver must not hang
#: ``kprof backends``). Generous: CUDA's first initialization on a large node takes seconds.
DEFAULT_DISCOVERY_TIMEOUT = 20.0
#: The distribution whose entry points are kprof's own backends (they win a name collision).
OWN_DISTRIBUTION = "kprof"


def env_plugin_names() -> list[str] | None:
    """The backends named in KPROF_PLUGINS (comma-separated), or None when it is unset."""
    raw = os.environ.get(ENV_PLUGINS)
    if raw is None or not raw.strip():
        return None
    names = [n.strip() for n in raw.split(",") if n.strip()]
    for n in names:
        if not n.replace("_", "").replace("-", "").replace(".", "").isalnum():
            raise KprofError(
                f"{ENV_PLUGINS}={raw!r}: {n!r} is not a backend name; give a comma-separated "
                f"list of installed backends ({', '.join(installed_names()) or 'none installed'})"
            )
    return names


def discovery_timeout() -> float | None:
    """KPROF_DISCOVERY_TIMEOUT in seconds (default 20); 0 runs discovery inline, unbounded."""
    value = env_seconds(
        ENV_DISCOVERY_TIMEOUT, DEFAULT_DISCOVERY_TIMEOUT, zero="to wait for plugins without a bound"
    )
    return value or None


def in_import(hook: str, backend: Backend, module: str) -> str:
    """Why a backend started by an import was not used: its plugin imports a module the
    program was importing on the same thread at that moment."""
    return (
        f"{hook} imports {module}, which the program was importing when kprof started the "
        f"backend (from another thread, bounded in time, that waits for the program's import "
        f"to end); import {module.split('.')[0]} before {module}, or name the backend "
        f"(kprof run --backends {backend.name} / kprof.profile(backends=[{backend.name!r}]))"
    )


def installed_names() -> list[str]:
    """The names of every backend entry point of the installed distributions."""
    return sorted({ep.name for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)})


class _BrokenPlugin:
    """Stands in for a plugin that failed to load, so that it is still listed with its error."""

    def __init__(self, error: str) -> None:
        self.error = error


class Registry:
    """The process-wide set of backends. Loaded lazily: ``import kprof`` loads no plugin."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._backends: dict[str, Backend] | None = None
        #: Loaded from an entry point, not yet asked describe_backend (which imports the vendor
        #: library): described, bounded in time, on the first use that needs it.
        self._undescribed: list[Backend] = []
        #: Loaded from an entry point: calls into them are bounded in time (``bound``).
        self._discovered: set[Backend] = set()
        self._timeout: float | None = None
        self.pm = pluggy.PluginManager(PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.pm.register(defaults, name="kprof.defaults")
        self._defaults = self._impls_of(defaults)

    # -- loading ----------------------------------------------------------------------------

    def _impls_of(self, plugin: object) -> dict[str, tuple[Any, tuple[str, ...]]]:
        found: dict[str, tuple[Any, tuple[str, ...]]] = {}
        for hook in RESOLVED_HOOKS:
            caller = getattr(self.pm.hook, hook)
            for impl in caller.get_hookimpls():
                if impl.plugin is plugin:
                    found[hook] = (impl.function, tuple(impl.argnames))
        return found

    def _load(self) -> dict[str, Backend]:
        backends: dict[str, Backend] = {}
        if env_flag(ENV_DISABLE_AUTOLOAD):
            return backends
        wanted = env_plugin_names()
        eps = metadata.entry_points(group=ENTRY_POINT_GROUP)
        if wanted is not None:  # check before loading anything
            missing = [n for n in wanted if n not in eps.names]
            if missing:
                raise KprofError(
                    f"{ENV_PLUGINS} names unknown backend(s) {', '.join(missing)}; "
                    f"installed backends: {', '.join(sorted(eps.names)) or 'none'}"
                )
        timeout = self._timeout = discovery_timeout()
        for ep in _chosen(eps):
            if wanted is not None and ep.name not in wanted:
                continue
            dist = getattr(ep, "dist", None)
            dist_name = dist.metadata["Name"] if dist is not None else None
            dist_version = dist.version if dist is not None else None
            try:
                plugin = bounded(ep.load, timeout, f"import of {ep.value}")
                backend = self._add(ep.name, plugin, dist_name, dist_version)
                self._undescribed.append(backend)
                self._discovered.add(backend)
            except Exception as exc:
                error = (
                    str(exc)
                    if isinstance(exc, (NoAnswer, PluginRaised))
                    else f"{type(exc).__name__}: {exc}"
                )
                warnings.warn(
                    f"kprof: backend plugin {ep.name!r} ({ep.value}"
                    f"{', ' + dist_name + ' ' + str(dist_version) if dist_name else ''}) "
                    f"failed to load and is skipped: {error}",
                    RuntimeWarning,
                    stacklevel=3,
                )
                backend = Backend(ep.name, _BrokenPlugin(error), dist_name, dist_version)
                backend.resolve({}, self._defaults, RESOLVED_HOOKS)
                backend._info = BackendInfo(status=f"error: {error}", timestamps=False)
            backends[ep.name] = backend
        return backends

    def _add(
        self, name: str, plugin: object, dist: str | None = None, version: str | None = None
    ) -> Backend:
        # pluggy checks every hookimpl's arguments against the spec at registration.
        self.pm.register(plugin, name=f"{ENTRY_POINT_GROUP}:{name}")
        try:
            self.pm.check_pending()
        except pluggy.PluginValidationError:
            self.pm.unregister(plugin)
            raise
        backend = Backend(name, plugin, dist, version)
        backend.resolve(self._impls_of(plugin), self._defaults, RESOLVED_HOOKS)
        return backend

    @staticmethod
    def _describe(backend: Backend, timeout: float | None) -> None:
        """Ask a discovered plugin to describe itself now, bounded: a describe_backend that
        hangs (a wedged driver) or exits must not take `kprof backends`, kprof.profile() or
        the program's import that starts it with it. (A backend registered in the program's
        own code is described when first asked, in the program's thread.)"""
        try:
            bounded(backend.info, timeout, f"describe_backend of {backend.name}")
        except (NoAnswer, PluginRaised) as exc:
            backend.disable(
                f"describe_backend {exc}" if isinstance(exc, PluginRaised) else str(exc)
            )
        except InImport as exc:
            backend.disable(in_import("describe_backend", backend, exc.module))

    def _ensure(self, describe: bool = True) -> dict[str, Backend]:
        if self._backends is None:
            with self._lock:
                if self._backends is None:
                    self._backends = self._load()
        if describe and self._undescribed:
            with self._lock:
                pending, self._undescribed = self._undescribed, []
                for b in pending:
                    self._describe(b, self._timeout)
        return self._backends

    # -- public ---------------------------------------------------------------------------------

    def all(self) -> list[Backend]:
        """Every discovered backend, broken ones included, in discovery order."""
        return list(self._ensure().values())

    def loaded(self) -> list[Backend]:
        """Every discovered backend, its plugin imported but not asked to describe itself: no
        vendor library imported (``kprof run`` describes each when the program imports its
        library, ``capture_modules``). ``info()`` describes one, unbounded in time."""
        return list(self._ensure(describe=False).values())

    def get(self, name: str) -> Backend:
        if not isinstance(name, str):
            raise TypeError(f"a backend name must be a str, not {type(name).__name__}")
        # Only the named backend is described: describing imports its vendor library, and
        # profile(backends=["opencl"]) must not import hip-python or CuPy.
        backends = self._ensure(describe=False)
        try:
            b = backends[name]
        except KeyError:
            raise KprofError(
                f"unknown backend {name!r}; known backends: {', '.join(backends) or 'none'}"
            ) from None
        self.describe(b)
        return b

    def describe(self, backend: Backend) -> BackendInfo:
        """``backend.info()``, the first time bounded in time if ``backend`` was discovered (an
        entry point), as ``get`` does; a plugin that did not answer is disabled, its status
        the reason."""
        if backend in self._undescribed:
            with self._lock:
                if backend in self._undescribed:
                    self._undescribed.remove(backend)
                    self._describe(backend, self._timeout)
        return backend.info()

    def bound(self, backend: Backend) -> float | None:
        """How long a call into ``backend``'s plugin may take (``KPROF_DISCOVERY_TIMEOUT``),
        or None (unbounded, on the caller's thread): for a backend the program registered in
        its own code, as for every call where the timeout is 0."""
        return self._timeout if backend in self._discovered else None

    def usable(self, names: list[str] | None = None) -> list[Backend]:
        """Backends a profile can use: available and not disabled after an error."""
        chosen = [self.get(n) for n in names] if names is not None else self.all()
        return [b for b in chosen if b.broken is None and b.info().status == "available"]

    def register(self, plugin: object, name: str) -> Backend:
        """Register a backend plugin object directly (not through an entry point)."""
        if not isinstance(name, str) or not name:
            raise ValueError("a backend needs a non-empty str name")
        with self._lock:
            backends = self._ensure()
            if name in backends:
                raise KprofError(f"a backend named {name!r} is already registered")
            backend = self._add(name, plugin)
            backends[name] = backend
            return backend

    def unregister(self, name: str) -> None:
        with self._lock:
            backend = self._ensure().pop(name, None)
            if backend is None:
                raise KprofError(f"no backend named {name!r} is registered")
            if not isinstance(backend.plugin, _BrokenPlugin):
                self.pm.unregister(backend.plugin)

    def reset(self) -> None:
        """Forget every plugin, so the next use rediscovers them (tests, environment changes)."""
        with self._lock:
            for name, plugin in self.pm.list_name_plugin():
                if plugin is not defaults:
                    self.pm.unregister(plugin, name)
            self._backends = None
            self._undescribed = []
            self._discovered = set()


def _chosen(eps: Any) -> list[Any]:
    """One entry point per backend name, in discovery order.

    The same distribution seen twice on sys.path is one. Two distributions registering one
    name is a collision: kprof's own backends win over any other; between two others, the one
    whose distribution name sorts first. Either way a warning names both.
    """
    first: dict[str, Any] = {}
    for ep in eps:
        prev = first.get(ep.name)
        if prev is None:
            first[ep.name] = ep
            continue
        if (_dist_name(prev), prev.value) == (_dist_name(ep), ep.value):
            continue  # the same distribution visible twice
        own = [e for e in (prev, ep) if _dist_name(e) == OWN_DISTRIBUTION]
        # Deterministic whatever order the file system lists distributions in.
        keep = (
            own[0] if len(own) == 1 else min(prev, ep, key=lambda e: (_dist_name(e) or "", e.value))
        )
        drop = ep if keep is prev else prev
        first[ep.name] = keep
        why = "kprof's own backends win" if own else "the distribution whose name sorts first wins"
        warnings.warn(
            f"kprof: two plugins register the backend {ep.name!r}: {_describe_ep(keep)} and "
            f"{_describe_ep(drop)}; using {_describe_ep(keep)} ({why}). Rename the other's "
            f"entry point (group {ENTRY_POINT_GROUP!r}) or uninstall it.",
            RuntimeWarning,
            stacklevel=4,
        )
    return list(first.values())


def _dist_name(ep: Any) -> str | None:
    dist = getattr(ep, "dist", None)
    return None if dist is None else str(dist.metadata["Name"])


def _describe_ep(ep: Any) -> str:
    dist = getattr(ep, "dist", None)
    who = (
        f"{dist.metadata['Name']} {dist.version}" if dist is not None else "an unknown distribution"
    )
    return f"{who} ({ep.value})"


registry = Registry()
