"""kprof's core: the profiler, the plugin host and the reports. Private: no stable API.

Import ``kprof`` (what users call) and ``kprof.plugin`` (what backend plugins use) instead;
the modules here move between releases. ``__all__`` is what ``kprof`` re-exports.
"""

from __future__ import annotations

from kprof_core._version import __version__
from kprof_core.data.memory import Allocation, Memory, MemoryEvent
from kprof_core.data.records import KernelRecord, MarkerRecord, RangeRecord
from kprof_core.data.site_summary import SiteRow, StackRow
from kprof_core.data.sites import Site
from kprof_core.data.summary import SummaryRow
from kprof_core.data.timefmt import format_time
from kprof_core.host.backend import Backend, KprofError
from kprof_core.host.discovery import registry
from kprof_core.io.exports import ExportError
from kprof_core.io.storage import ProfileFileError
from kprof_core.profiler import profile
from kprof_core.ranks import mpi
from kprof_core.ranks.combine import combine
from kprof_core.recording.annotations import annotate, kernel, mark, propagate, range
from kprof_core.result import Profile, ProfileTree, Summary, drift, load
from kprof_core.windows import Schedule, save_windows, schedule, step


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
    "Allocation",
    "ExportError",
    "KernelRecord",
    "KprofError",
    "MarkerRecord",
    "Memory",
    "MemoryEvent",
    "Profile",
    "ProfileFileError",
    "ProfileTree",
    "RangeRecord",
    "Schedule",
    "Site",
    "SiteRow",
    "StackRow",
    "Summary",
    "SummaryRow",
    "__version__",
    "annotate",
    "backends",
    "combine",
    "drift",
    "format_time",
    "get_backend",
    "kernel",
    "load",
    "mark",
    "mpi",
    "profile",
    "propagate",
    "range",
    "register_backend",
    "save_windows",
    "schedule",
    "step",
    "unregister_backend",
]
