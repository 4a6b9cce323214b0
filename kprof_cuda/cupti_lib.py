"""libcupti, loaded by kprof at run time (as Kineto and Triton's proton do): no link-time
dependency and nothing NVIDIA-specific needed to build or import kprof.

Which library (the first that loads):

1. ``KPROF_CUPTI_LIBRARY`` (a path), when set;
2. a copy already loaded in the process (``RTLD_NOLOAD`` on its sonames: the one CuPy,
   PyTorch or a test double loaded is the one every tool of the process must share);
3. the ``nvidia-cuda-cupti`` wheel's (``nvidia/cu13/lib/libcupti.so.13``,
   ``nvidia/cuda_cupti/lib/libcupti.so.12``; the major of the installed CuPy first);
4. the system CUDA's (``$CUDA_HOME``/``$CUDA_PATH``, ``/usr/local/cuda``), then the bare soname
   (``LD_LIBRARY_PATH``, ld.so.cache).

``cuptiGetVersion()`` is checked at load: kprof reads records by the offsets common to CUDA
12.6 to 13.5 (``cupti_abi``), so older CUPTIs are refused with the reason.
"""

from __future__ import annotations

import ctypes
import os
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["MIN_API_VERSION", "Cupti", "CuptiError", "CuptiUnavailable", "explain", "load"]

ENV_LIBRARY = "KPROF_CUPTI_LIBRARY"
#: CUPTI_API_VERSION of CUDA 12.6, the oldest headers kprof's offsets are checked against.
MIN_API_VERSION = 24
SONAMES = ("libcupti.so.13", "libcupti.so.12", "libcupti.so")
_RTLD_NOLOAD = getattr(os, "RTLD_NOLOAD", 4)

u8, u32, u64, sz = ctypes.c_uint8, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_size_t
vp = ctypes.c_void_p
#: CUpti_BuffersCallbackRequestFunc(uint8_t **buffer, size_t *size, size_t *maxNumRecords)
REQUEST = ctypes.CFUNCTYPE(None, ctypes.POINTER(vp), ctypes.POINTER(sz), ctypes.POINTER(sz))
#: CUpti_BuffersCallbackCompleteFunc(CUcontext, uint32_t streamId, uint8_t *buffer, size_t
#: size, size_t validSize)
COMPLETE = ctypes.CFUNCTYPE(None, vp, u32, vp, sz, sz)
#: CUpti_CallbackFunc(void *userdata, CUpti_CallbackDomain, CUpti_CallbackId, const void *cbdata)
CALLBACK = ctypes.CFUNCTYPE(None, vp, ctypes.c_int, u32, vp)

# name -> argtypes (every function returns CUptiResult, an int). Optional ones may be missing.
_FUNCTIONS: dict[str, list[Any]] = {
    "cuptiGetVersion": [ctypes.POINTER(u32)],
    "cuptiGetResultString": [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)],
    "cuptiGetTimestamp": [ctypes.POINTER(u64)],
    "cuptiActivityEnable": [ctypes.c_int],
    "cuptiActivityDisable": [ctypes.c_int],
    "cuptiActivityRegisterCallbacks": [REQUEST, COMPLETE],
    "cuptiActivityFlushAll": [u32],
    "cuptiActivityGetNumDroppedRecords": [vp, u32, ctypes.POINTER(sz)],
    "cuptiActivityPushExternalCorrelationId": [ctypes.c_int, u64],
    "cuptiActivityPopExternalCorrelationId": [ctypes.c_int, ctypes.POINTER(u64)],
    "cuptiActivityGetNextRecord": [vp, sz, ctypes.POINTER(vp)],
}
_OPTIONAL: dict[str, list[Any]] = {
    "cuptiActivityEnableDriverApi": [u32, u8],
    "cuptiActivityEnableRuntimeApi": [u32, u8],
    "cuptiGetStreamIdEx": [vp, vp, u8, ctypes.POINTER(u32)],
    "cuptiGetContextId": [vp, ctypes.POINTER(u32)],
    "cuptiActivityRegisterTimestampCallback": [vp],
    # The callback API (launch sites, cupti_sites.py).
    "cuptiSubscribe": [ctypes.POINTER(vp), CALLBACK, vp],
    "cuptiUnsubscribe": [vp],
    "cuptiEnableCallback": [u32, vp, ctypes.c_int, u32],
}


class CuptiUnavailable(Exception):
    """libcupti cannot be used here; the message says why and what to do."""


class CuptiError(RuntimeError):
    """A CUPTI call failed: ``code`` is its CUptiResult, the message names it."""

    def __init__(self, what: str, code: int, name: str) -> None:
        super().__init__(f"{what} failed: {name} ({code})")
        self.code = code
        self.name = name


class Cupti:
    """One loaded libcupti: its functions (ctypes, argtypes set) and API version."""

    def __init__(self, lib: ctypes.CDLL, path: str, how: str) -> None:
        self.lib = lib
        self.path = path
        self.how = how  # which of the places above it came from, in words
        for name, argtypes in {**_FUNCTIONS, **_OPTIONAL}.items():
            try:
                fn = getattr(lib, name)
            except AttributeError:
                if name in _FUNCTIONS:
                    raise CuptiUnavailable(f"{path} has no {name}: not a usable libcupti") from None
                fn = None
            else:
                fn.argtypes = argtypes
                fn.restype = ctypes.c_int
            setattr(self, name[5:], fn)  # cuptiActivityEnable -> self.ActivityEnable
        self.api_version = 0
        self.refresh_version()

    def refresh_version(self) -> int:
        """``cuptiGetVersion()`` (read again at each start: the buffer policy depends on it)."""
        v = u32(0)
        self.check(self.GetVersion(ctypes.byref(v)), "cuptiGetVersion")
        self.api_version = v.value
        return v.value

    def __getattr__(self, name: str) -> Any:  # for mypy: the functions set above
        raise AttributeError(name)

    def result_name(self, code: int) -> str:
        s = ctypes.c_char_p()
        if self.GetResultString(code, ctypes.byref(s)) == 0 and s.value:
            return s.value.decode(errors="replace")
        return f"CUPTI error {code}"

    def check(self, code: int, what: str) -> None:
        if code:
            raise CuptiError(what, code, self.result_name(code))

    def address(self, name: str) -> int:
        """The C address of a function (for the compiled reader), 0 when missing."""
        fn = getattr(self, name[5:], None)
        return 0 if fn is None else ctypes.cast(fn, vp).value or 0

    def timestamp(self) -> int:
        t = u64(0)
        self.check(self.GetTimestamp(ctypes.byref(t)), "cuptiGetTimestamp")
        return t.value

    def dropped(self) -> int:
        """Records CUPTI dropped since the last call (it resets the count when read).

        Read from the global queue (context NULL, stream 0) only: since CUDA 6.0 every
        activity buffer is global (cupti_activity.h, ``CUpti_BuffersCallbackCompleteFunc``:
        its context and stream are deprecated and always NULL), and that queue's count
        includes the records CUPTI had no buffer for and the CDP records the device buffer
        could not hold (``cuptiActivityGetNumDroppedRecords``)."""
        n = sz(0)
        if self.ActivityGetNumDroppedRecords(None, 0, ctypes.byref(n)) != 0:
            return 0
        return n.value


def _loaded() -> tuple[ctypes.CDLL, str] | None:
    for soname in SONAMES:
        try:
            return ctypes.CDLL(soname, mode=_RTLD_NOLOAD | ctypes.RTLD_GLOBAL), soname
        except OSError:
            continue
    return None


def _preferred_major() -> tuple[str, ...]:
    try:
        metadata.version("cupy-cuda13x")
        return ("13", "12")
    except metadata.PackageNotFoundError:
        return ("12", "13")


def _wheel_paths() -> list[Path]:
    out: list[Path] = []
    dirs = {"13": ("cu13",), "12": ("cuda_cupti",)}
    roots = [Path(p) / "nvidia" for p in sys.path if p and (Path(p) / "nvidia").is_dir()]
    for major in _preferred_major():
        for root in roots:
            for sub in dirs[major]:
                p = root / sub / "lib" / f"libcupti.so.{major}"
                if p.is_file() and p not in out:
                    out.append(p)
    return out


def _system_paths() -> list[Path]:
    out = []
    bases = [os.environ.get(v) for v in ("CUDA_HOME", "CUDA_PATH")] + ["/usr/local/cuda"]
    for base in filter(None, bases):
        for sub in ("extras/CUPTI/lib64", "lib64", "targets/x86_64-linux/lib"):
            d = Path(base) / sub
            for soname in SONAMES:
                if (d / soname).is_file():
                    out.append(d / soname)
    return out


def _driver_missing() -> str | None:
    """CUPTI needs the driver: say so plainly when there is none (no libcuda.so.1)."""
    try:
        ctypes.CDLL("libcuda.so.1", mode=ctypes.RTLD_GLOBAL)
    except OSError:
        return "no CUDA driver (libcuda.so.1 cannot be loaded): CUPTI needs one"
    return None


def load() -> Cupti:
    """The process's libcupti (see the module's docstring for the order), version-checked.
    Raises :class:`CuptiUnavailable` with the reason and what to do."""
    why = _driver_missing()
    if why is not None:
        raise CuptiUnavailable(why)
    tried: list[str] = []
    explicit = os.environ.get(ENV_LIBRARY)
    candidates: list[tuple[str, str]] = []
    if explicit:
        candidates.append((explicit, f"{ENV_LIBRARY}"))
    else:
        found = _loaded()
        if found is not None:
            return _checked(Cupti(found[0], found[1], "already loaded in the process"))
        candidates += [(str(p), "the nvidia-cuda-cupti wheel") for p in _wheel_paths()]
        candidates += [(str(p), "the system CUDA") for p in _system_paths()]
        candidates += [(s, "the library search path") for s in SONAMES]
    for path, how in candidates:
        try:
            lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        except OSError as exc:
            tried.append(f"{path}: {exc}")
            continue
        return _checked(Cupti(lib, path, how))
    raise CuptiUnavailable(
        "libcupti was not found (pip install 'kprof[cuda]' for CUDA 12 or 'kprof[cuda13]' "
        f"brings NVIDIA's nvidia-cuda-cupti wheel, or set {ENV_LIBRARY}); tried "
        + "; ".join(tried[-3:] or ["nothing"])
    )


def _checked(c: Cupti) -> Cupti:
    if c.api_version < MIN_API_VERSION:
        raise CuptiUnavailable(
            f"{c.path} is CUPTI API version {c.api_version}, older than CUDA 12.6's "
            f"({MIN_API_VERSION}), whose record layouts kprof reads; install "
            f"nvidia-cuda-cupti-cu12>=12.6 (pip install 'kprof[cuda]')"
        )
    return c


def explain(exc: Exception) -> str:
    """Why enabling CUPTI failed, in words (another tool holding it, named as such)."""
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, CuptiError) and "SUBSCRIBER" in exc.name.upper():
        return f"CUPTI is in use by another tool (Nsight Systems, torch.profiler, ...): {text}"
    if "SUBSCRIBER" in text.upper():
        return f"CUPTI is in use by another tool (Nsight Systems, torch.profiler, ...): {text}"
    return f"enabling CUPTI activity records failed: {text}"
