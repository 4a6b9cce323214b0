"""The OpenCL dispatch-table hook (``_clhook``): which platforms it can hook, and how.

Every cl object begins with a pointer to its ICD's dispatch table (``cl_khr_icd``), and every
loader calls through it, so swapping entries of that table while a profile runs sees every
enqueue of the process: PyOpenCL's and those of C libraries linked to another loader (VkFFT,
CLBlast). ``survey()`` decides per platform whether that is safe:

- hooked: the platform's and its devices' objects share one table, in writable memory that
  belongs to the ICD (PoCL: its global ``pocl_dispatch``, in ``.data``);
- refused, with the reason: the table is read-only (kprof never changes memory protection),
  tables differ per object (a queue's table cannot be known before one exists), or the table
  lies in the loader (``cl_khr_icd`` 2.0's loader-managed dispatch: one table per loader, and
  this process may hold two). Such platforms keep PyOpenCL's capture alone; C libraries'
  launches there are not seen, and the profile says so.

The hook's records go to the launching thread's recorder like the Python capture's; calls
that PyOpenCL's capture records itself are made inside ``_clhook.quiet`` and skipped by the
hook, so nothing is counted twice.
"""

from __future__ import annotations

import atexit
import os
import re
import sys
from dataclasses import dataclass
from typing import Any

from kprof import plugin as kp

# Slots the hook may write, up to clEnqueueSVMMemFill's (131 pointers): the table must be that
# long in writable memory, or the platform is refused.
_TABLE_BYTES = 131 * 8

# Python modules known to launch OpenCL work from C, unseen without the hook.
C_LAUNCHERS = ("pyvkfft", "pyclblast", "gpyfft", "clfft", "pyclpeak")

#: ``KPROF_OPENCL_HOOK=preload``: never write a dispatch table, use the interposer that
#: ``kprof run`` preloads instead (for an ICD whose table misbehaves when written, and tests).
ENV_HOOK = "KPROF_OPENCL_HOOK"
PRELOAD_MECHANISM = "LD_PRELOAD interposer (kprof run)"


@dataclass(frozen=True)
class Platform:
    """What the hook does on one OpenCL platform."""

    title: str
    table: int | None  # the dispatch table's address where it can be hooked
    version: int  # the platform's OpenCL version, major * 10 + minor
    why: str  # "hooked ..." or why not, for `kprof backends`


def module() -> Any:
    """The compiled hook, or None (pure Python, not built, or not supported here)."""
    mod = kp.load_plugin_part("kprof_opencl", "_clhook")
    if mod is None or not getattr(mod, "supported", False):
        return None
    return mod


#: ``_mapping``'s answers: an ICD's table stays where its library was loaded, as it was (the
#: survey is made at every profile's start; reading /proc/self/maps was most of it).
_mappings: dict[int, tuple[str, str] | None] = {}


def _mapping(address: int) -> tuple[str, str] | None:
    """``(permissions, path)`` of the memory mapping holding ``address``..+table (Linux)."""
    if address not in _mappings:
        _mappings[address] = _read_mapping(address)
    return _mappings[address]


def _read_mapping(address: int) -> tuple[str, str] | None:
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                parts = line.split(None, 5)
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                if lo <= address < hi:
                    if address + _TABLE_BYTES > hi:
                        return parts[1], "(the table crosses a mapping)"
                    return parts[1], parts[5].strip() if len(parts) > 5 else ""
    except OSError:
        return None
    return None


def _version(text: str) -> int:
    m = re.match(r"OpenCL (\d+)\.(\d+)", text)
    return int(m.group(1)) * 10 + int(m.group(2)) if m else 10


def survey() -> list[Platform]:
    """Each OpenCL platform, and whether (and why not) the hook can be installed on it."""
    import pyopencl as cl

    from .queues import platform_title

    mod = module()
    out = []
    for p in cl.get_platforms():
        title = platform_title(p.name)
        version = _version(p.version)
        if mod is None:
            why = "not built" if kp.compiled_enabled() else kp.recorder_description()
            out.append(Platform(title, None, version, f"PyOpenCL capture only (hook: {why})"))
            continue
        if os.environ.get(ENV_HOOK) == "preload":
            why = f"table hook off ({ENV_HOOK}=preload)"
            out.append(Platform(title, None, version, _fallback(mod, why)))
            continue
        table = mod.table_address(p.int_ptr)
        try:
            devices = p.get_devices()
        except cl.Error:
            devices = []
        if any(mod.table_address(d.int_ptr) != table for d in devices):
            out.append(
                Platform(
                    title,
                    None,
                    version,
                    _fallback(mod, "this ICD gives its objects different dispatch tables"),
                )
            )
            continue
        if not sys.platform.startswith("linux"):
            out.append(
                Platform(
                    title,
                    None,
                    version,
                    _fallback(mod, "the table's writability is read from /proc/self/maps"),
                )
            )
            continue
        where = _mapping(table)
        if where is None:
            why = "its dispatch table is in no mapping kprof can read"
        elif "w" not in where[0]:
            why = f"its dispatch table is read-only ({os.path.basename(where[1]) or 'anonymous'})"
        elif os.path.basename(where[1]).startswith("libOpenCL"):
            why = "its dispatch table belongs to the loader (cl_khr_icd 2.0 loader-managed)"
        elif not where[1].startswith("/"):
            # The heap or anonymous memory: a table made at run time (a loader's, with
            # cl_khr_icd 2.0, may be one per loader): not the one every caller goes through.
            why = f"its dispatch table is in {where[1] or 'anonymous memory'}, not in the ICD"
        else:
            lib = os.path.basename(where[1]) or "anonymous memory"
            out.append(Platform(title, table, version, f"dispatch-table hook (table in {lib})"))
            continue
        out.append(Platform(title, None, version, _fallback(mod, f"table hook refused: {why}")))
    return out


def _fallback(mod: Any, why: str) -> str:
    """What runs where the table cannot be hooked: the interposer if preloaded, else only
    PyOpenCL's capture (and how to get the interposer)."""
    if mod.preloaded():
        return f"{PRELOAD_MECHANISM}; {why}"
    if preload_library() is not None:
        return f"PyOpenCL capture only ({why}); `kprof run` preloads kprof's interposer"
    return f"PyOpenCL capture only ({why}); kprof's interposer is not built"


def preload_library() -> str | None:
    """The path of kprof's interposer (``_clpreload``), where it was built (Linux)."""
    import importlib.util

    if not sys.platform.startswith("linux"):
        return None
    try:
        spec = importlib.util.find_spec("kprof_opencl._clpreload")
    except (ImportError, ValueError):
        return None
    return spec.origin if spec is not None and spec.origin else None


def exec_environment() -> dict[str, str] | None:
    """``LD_PRELOAD`` with kprof's interposer, where some platform needs it and has it not."""
    mod = module()
    lib = preload_library()
    if mod is None or lib is None or mod.preloaded():
        return None
    try:
        platforms = survey()
    except Exception:
        return None
    if all(p.table is not None for p in platforms):
        return None
    current = os.environ.get("LD_PRELOAD", "")
    return {"LD_PRELOAD": f"{lib}:{current}" if current else lib}


def _adopt(handle: int) -> tuple[Any, bool]:
    """A PyOpenCL queue object for a queue handle the hook saw (asked once per handle while
    capturing): the program's own where kprof saw it made (``remember``), else a new one."""
    import pyopencl._cl as _cl

    from .queues import queue_profiles

    mod = module()
    q = mod.remembered(handle) if mod is not None else None
    if q is None:
        q = _cl.CommandQueue.from_int_ptr(handle, retain=True)
    return q, queue_profiles(q)


def _info(handle: int, param: int) -> Any:
    import pyopencl._cl as _cl

    return _cl.Event.from_int_ptr(handle, retain=True).get_info(param)  # type: ignore[arg-type]


def install(backend: Any) -> tuple[list[int], dict[str, str]]:
    """Hook every platform that allows it; returns (tables hooked, {platform: mechanism})."""
    mod = module()
    try:
        platforms = survey()
    except Exception:  # no platform at all (no ICD): nothing to hook, PyOpenCL will say why
        return [], {}
    # The memory hook's install comes right after (capture_users): it takes this survey
    # rather than make its own (85 µs a survey here, a sixth of an empty profile).
    backend.state["survey"] = platforms
    mechanisms = {p.title: p.why for p in platforms}
    if mod is None:
        return [], mechanisms
    from . import capture as pycapture
    from . import copy_sizes as rows
    from .queues import _current

    # Bound at every install: the registry, and so the Backend, may have been renewed.
    def other(
        rec: Any, kind: int, name: str, q: Any, t0: int, t1: int, tok: Any, n: int, cfg: Any
    ) -> None:
        pycapture._unprofiled(rec, backend, kind, name, q, t0, t1, tok, n, cfg)

    mod.bind(
        kp.active,
        backend,
        _adopt,
        other,
        _info,
        _current,
        (kp.KERNEL, kp.COPY),
        (rows.H2D, rows.D2H, rows.D2D, rows.FILL, rows.SVM_COPY),
        kp.raw_launch_capsule(),  # the recorder's C batch, where compiled
    )
    hooked = []
    for p in platforms:
        if p.table is None or p.table in hooked:
            continue
        try:
            mod.hook(p.table, p.version)
        except Exception as exc:  # never the program's problem: PyOpenCL's capture remains
            mechanisms[p.title] = f"PyOpenCL capture only: hooking failed ({exc})"
            continue
        hooked.append(p.table)
        _hooked.append(p.table)
    refused = [p for p in platforms if p.table is None]
    if refused and mod.preloaded():
        try:
            mod.attach_preload(max(p.version for p in refused))
            hooked.append(PRELOADED)
        except Exception as exc:
            for p in refused:
                mechanisms[p.title] = f"PyOpenCL capture only: the interposer failed ({exc})"
    return hooked, mechanisms


def records_every_kernel(hooked: list[int], platforms: list[Platform]) -> bool:
    """Whether the hook, as ``install`` left it, records every kernel launch of the process
    straight into the compiled recorder (raw launches): every platform hooked (its table, or
    the interposer for those refused) and the compiled parts in use. PyOpenCL's kernel entry
    is then left unpatched, so that each launch has one capture path."""
    if not hooked or not platforms or not kp.compiled_enabled():
        return False
    if kp.raw_launch_capsule() is None:
        return False
    return all(p.table in hooked if p.table is not None else PRELOADED in hooked for p in platforms)


def remove(tables: list[int]) -> list[str]:
    """Restore the tables; returns entries someone else replaced meanwhile (left alone)."""
    mod = module()
    conflicts: list[str] = []
    if mod is None:
        return conflicts
    for t in tables:
        if t == PRELOADED:
            mod.detach_preload()
        elif t in _hooked:
            _hooked.remove(t)
            conflicts += mod.unhook(t)
    return conflicts


# Tables hooked now: restored at exit too, should a profile never end (os._exit aside), so
# that no driver thread calls into an interpreter that is going away.
_hooked: list[int] = []


#: Stands for the interposer in the list ``install`` returns (no table has address 0).
PRELOADED = 0


@atexit.register
def _restore_at_exit() -> None:
    remove([*_hooked, PRELOADED])


def unseen(mechanisms: dict[str, str]) -> str | None:
    """A note for the report when kernels may have run that kprof could not see: a library
    known to launch OpenCL work from C is imported, and some platform has no hook."""
    libs = [m for m in C_LAUNCHERS if m in sys.modules]
    blind = [
        t
        for t, why in mechanisms.items()
        if not why.startswith(("dispatch-table hook", PRELOAD_MECHANISM))
    ]
    if not libs or not blind:
        return None
    if module() is not None and preload_library() is not None:
        fix = "Run the program under `kprof run`, which preloads kprof's OpenCL interposer."
    else:
        fix = (
            "Build kprof's compiled parts (pip install with a C compiler, without "
            "KPROF_PURE_PYTHON=1), then run the program under `kprof run`."
        )
    return (
        f"kprof may have missed OpenCL work: {', '.join(libs)} launch{'es' * (len(libs) == 1)} "
        f"kernels from C, which kprof sees only through its dispatch-table hook or its "
        f"interposer, and neither is active on {', '.join(blind)} ({mechanisms[blind[0]]}). "
        f"{fix}"
    )
