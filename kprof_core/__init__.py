"""kprof's core: the profiler, the plugin host and the reports. ``import kprof`` is its API."""

from __future__ import annotations

from . import mpi
from ._version import __version__
from .annotations import kernel, mark, propagate, range
from .backend import (
    Alignment,
    Backend,
    BackendInfo,
    KprofError,
    NeverSubmitted,
    QueueInfo,
    TimestampsUnsupported,
)
from .combine import combine
from .hookspecs import hookimpl, hookspec
from .plugins import registry
from .processors import SummaryRow
from .profiler import profile
from .records import KernelRecord, MarkerRecord, RangeRecord
from .session import Profile, Summary
from .storage import load
from .timefmt import format_time


def backends() -> list[Backend]:
    """Every discovered backend, broken ones included (see ``Backend.info()``)."""
    return registry.all()


def get_backend(name: str) -> Backend:
    """The backend called ``name``; an unknown name raises ``KprofError`` listing the known ones."""
    return registry.get(name)


def register_backend(plugin: object, name: str) -> Backend:
    """Register a backend plugin object (a module or class instance with hookimpls) directly.

    For plugins that are not installed as a distribution (a notebook, a test). Installed
    plugins are found through the ``kprof.backends`` entry-point group instead.
    """
    return registry.register(plugin, name)


def unregister_backend(name: str) -> None:
    """Forget the backend called ``name`` (registered with ``register_backend``, or
    discovered): new profiles no longer use it. An unknown name raises ``KprofError``."""
    registry.unregister(name)


__all__ = [
    "Alignment",
    "Backend",
    "BackendInfo",
    "KernelRecord",
    "KprofError",
    "MarkerRecord",
    "NeverSubmitted",
    "Profile",
    "QueueInfo",
    "RangeRecord",
    "Summary",
    "SummaryRow",
    "TimestampsUnsupported",
    "__version__",
    "backends",
    "combine",
    "format_time",
    "get_backend",
    "hookimpl",
    "hookspec",
    "kernel",
    "load",
    "mark",
    "mpi",
    "profile",
    "propagate",
    "range",
    "register_backend",
    "unregister_backend",
]
