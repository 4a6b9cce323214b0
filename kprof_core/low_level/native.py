"""Which recorder runs: the optional compiled one, or the pure-Python one.

The compiled parts (``kprof_core.low_level._crecorder``, the launch path every plugin uses, and a
plugin's own, such as ``kprof_opencl._clnative``) are built by ``pip install`` where a C
compiler exists. Where they are missing or fail to load, or ``KPROF_PURE_PYTHON=1`` is set,
kprof runs the same logic in Python: records are identical either way, only the per-launch
cost differs (BENCHMARKS.md). ``kprof backends`` says which path is in use.
"""

from __future__ import annotations

import os
import sysconfig
from types import ModuleType
from typing import Any

from kprof_core import envvars
from kprof_core.low_level.layout import SIGNATURE

ENV = envvars.PURE_PYTHON

_module: ModuleType | None = None
_why: str = ""
_enabled = True


def _load() -> None:
    global _module, _why
    _module, _why = None, ""
    if os.environ.get(ENV, "").strip() not in ("", "0"):
        _why = f"{ENV}={os.environ[ENV]} is set"
        return
    if sysconfig.get_config_var("Py_GIL_DISABLED"):
        # The extensions use the limited API, which free-threaded CPython lacks; the Python
        # path's appends and dict updates are atomic per object there, so records stay whole.
        _why = "free-threaded CPython: the pure-Python recorder is the thread-safe one there"
        return
    try:
        import importlib

        crecorder = importlib.import_module("kprof_core.low_level._crecorder")
    except ImportError as exc:
        _why = (
            f"the compiled recorder is not built ({exc}); pip install with a C compiler builds it"
        )
        return
    except Exception as exc:  # a broken build must never break kprof
        _why = f"the compiled recorder failed to load: {type(exc).__name__}: {exc}"
        return
    _why = layout_mismatch(crecorder)
    if not _why:
        _module = crecorder


def layout_mismatch(module: ModuleType) -> str:
    """Why ``module`` (the compiled recorder) must not be used, or "" when its entry layout is
    this kprof's (``layout.SIGNATURE``): a module built from an older ``_layout.h`` would
    read and write entries in another order, silently."""
    built = getattr(module, "LAYOUT", None)
    if built == SIGNATURE:
        return ""
    return (
        "the compiled recorder was built for another entry layout "
        f"({built or 'none recorded'}; this kprof's: {SIGNATURE}): rebuild it "
        "(pip install -e ., or python setup.py build_ext --inplace)"
    )


_load()


def compiled() -> ModuleType | None:
    """The compiled recorder module, or None where kprof runs pure Python."""
    return _module if _enabled else None


def loaded() -> ModuleType | None:
    """The compiled recorder module where it is loaded, even while ``use_compiled(False)``
    turns it off for new profiles (``kprof.range``'s base class is chosen once, at import)."""
    return _module


def launch_capsules() -> tuple[Any, Any] | None:
    """The compiled recorder's launch for a plugin's own compiled launcher, where it is loaded:
    ``(launch, generation)``, two capsules named ``kprof_core.low_level._crecorder._launch_capi``
    (the C function behind ``LaunchPath.launch``, then the method it wraps) and ``..._launch_generation``
    (how many LaunchPaths were made, an ``unsigned long``). ``None`` in pure Python."""
    if _module is None:
        return None
    return _module._launch_capi, _module._launch_generation


def raw_launch_capsule() -> Any:
    """The compiled recorder's raw launch for a plugin's C, where it is loaded: a capsule named
    ``layout.RAW_CAPSULE`` holding a ``KprofRawApi`` (``_layout.h``: the signature it was built
    with, and ``append``). A launch handed over so makes no Python object: the recorder keeps
    it in a C batch until the harvest. ``None`` in pure Python."""
    if _module is None:
        return None
    return _module._raw_launch


def use_compiled(enabled: bool) -> None:
    """Turn the compiled parts off (or back on) for profiles started from now on, within this
    process (the benchmarks compare both paths in one run; tests run both). Setting
    ``KPROF_PURE_PYTHON=1`` before starting Python does the same for a whole run."""
    global _enabled
    _enabled = bool(enabled)


def describe() -> str:
    """One line for ``kprof backends``: which recorder is in use, and why."""
    if compiled() is not None:
        return "compiled (kprof_core.low_level._crecorder)"
    if _module is not None:
        return "pure Python (the compiled recorder is turned off in this process)"
    return f"pure Python ({_why})"


def load_plugin_part(package: str, name: str) -> ModuleType | None:
    """A plugin's own compiled part, e.g. ``load_plugin_part("kprof_opencl", "_clnative")``;
    None where kprof runs pure Python or it is missing (the plugin then uses its Python path)."""
    if compiled() is None:
        return None
    import importlib

    try:
        return importlib.import_module(f"{package}.{name}")
    except Exception:  # missing or broken: the plugin's Python path does the same work
        return None
