"""kprof: time GPU kernels on the device, without synchronizing the host::

    with kprof.profile() as p:
        run_my_kernels()
    print(p)

Backend plugin authors import ``kprof.plugin``. The implementation lives in ``kprof_core``,
which is private.
"""

from __future__ import annotations

from typing import Any

from kprof_core import *  # noqa: F403
from kprof_core import (  # noqa: F401
    __all__,
    __version__,
)
from kprof_core.host import on_import as _on_import

from . import plugin

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
