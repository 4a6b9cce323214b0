"""kprof: time GPU kernels on the device, without synchronizing the host::

    with kprof.profile() as p:
        run_my_kernels()
    print(p)

Backend plugin authors import ``kprof.plugin``. The implementation lives in ``kprof_core``,
which is private.
"""

from __future__ import annotations

from typing import Any

from kprof_core._version import __version__
from kprof_core.data.memory import Allocation, Memory, MemoryEvent
from kprof_core.data.records import KernelRecord, MarkerRecord, RangeRecord
from kprof_core.data.site_summary import SiteRow, StackRow
from kprof_core.data.sites import Site
from kprof_core.data.summary import SummaryRow
from kprof_core.data.timefmt import format_time
from kprof_core.host import on_import as _on_import
from kprof_core.host.backend import Backend as _Backend
from kprof_core.host.backend import KprofError
from kprof_core.host.discovery import registry as _registry
from kprof_core.io.exports import ExportError
from kprof_core.io.storage import ProfileFileError
from kprof_core.profiler import profile
from kprof_core.ranks import mpi
from kprof_core.ranks.combine import combine
from kprof_core.recording.annotations import annotate, kernel, mark, propagate, range
from kprof_core.result import Profile, ProfileTree, Summary, drift, load
from kprof_core.windows import Schedule, save_windows, schedule, step

from . import plugin

# In the order a user meets them (profile, range, step, Profile first): the API reference
# (docs/reference/api.rst, autodoc's "bysource" order) lists them in this order, so it stays
# unsorted on purpose.
__all__ = [  # noqa: RUF022
    # Profiling a program
    "profile",
    "range",
    "step",
    "Profile",
    # Recording more: markers, named callables, work rates, threads, which steps
    "mark",
    "kernel",
    "annotate",
    "propagate",
    "schedule",
    "Schedule",
    "save_windows",
    # Reading a profile
    "Summary",
    "SummaryRow",
    "ProfileTree",
    "KernelRecord",
    "RangeRecord",
    "MarkerRecord",
    "Site",
    "SiteRow",
    "StackRow",
    "Memory",
    "MemoryEvent",
    "Allocation",
    "format_time",
    # Saved profiles, many profiles
    "load",
    "combine",
    "drift",
    "mpi",
    # Backends
    "backends",
    "get_backend",
    "register_backend",
    "unregister_backend",
    # Errors
    "KprofError",
    "ProfileFileError",
    "ExportError",
    "__version__",
]


def backends() -> list[_Backend]:
    """Every discovered backend, broken ones included (see ``Backend.info()``)."""
    return _registry.all()


def get_backend(name: str) -> _Backend:
    """The backend called ``name``; an unknown name raises ``KprofError`` listing the known ones."""
    return _registry.get(name)


def register_backend(plugin: object, name: str) -> _Backend:
    """Register a backend plugin object (a module or class instance with hookimpls) directly.

    For plugins that are not installed as a distribution (a notebook, a test). Installed
    plugins are found through the ``kprof.backends`` entry-point group instead.
    """
    return _registry.register(plugin, name)


def unregister_backend(name: str) -> None:
    """Forget the backend called ``name`` (registered with ``register_backend``, or
    discovered): new profiles no longer use it. An unknown name raises ``KprofError``."""
    _registry.unregister(name)


#: Plugin-author names that ``kprof`` exported before ``kprof.plugin`` existed: still found
#: (with a DeprecationWarning) so that third-party plugins written then keep loading.
_MOVED = frozenset(
    {
        "Alignment",
        "Backend",
        "BackendInfo",
        "NeverSubmitted",
        "QueueInfo",
        "TimestampsUnsupported",
        "capture",
        "hookimpl",
    }
)


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        import warnings

        warnings.warn(
            f"kprof.{name} moved to kprof.plugin"
            + ("" if name == "capture" else f".{name}")
            + ": import it from there",
            DeprecationWarning,
            stacklevel=2,
        )
        return plugin if name == "capture" else getattr(plugin, name)
    raise AttributeError(f"module 'kprof' has no attribute {name!r}")


def load_ipython_extension(ipython: object) -> None:
    """``%load_ext kprof``: the ``%kprof`` and ``%%kprof`` magics (IPython is imported here,
    never by ``import kprof``)."""
    from kprof_core.ipython import load_ipython_extension as load

    load(ipython)


# Last, once kprof is whole: plugins prepare for their vendor library once both are imported
# (OpenCL: queues created with profiling), so that what a program makes before its first
# profile can be timed. An entry point may import kprof.plugin; a plugin package importing
# kprof may be initializing meanwhile (its entry point module must not need it).
_on_import.start()
