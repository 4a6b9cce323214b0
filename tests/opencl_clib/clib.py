"""ctypes access to clib.c: a C library that launches OpenCL work through the system's loader,
never through PyOpenCL (as VkFFT and CLBlast do). Built by the tests with the C compiler."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np

SOURCE = Path(__file__).with_name("clib.c")


def build(folder: Path, linked: bool = False) -> Path | None:
    """Compile clib.c into ``folder``; None where there is no C compiler (or, ``linked``: no
    ``libOpenCL.so`` to link with, from ocl-icd-opencl-dev). ``linked`` binds the OpenCL calls
    at load time, as VkFFT's are; else the library opens the loader by path."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    out = folder / ("libkclib_linked.so" if linked else "libkclib.so")
    flags = ["-DKC_LINKED", "-lOpenCL"] if linked else ["-ldl"]
    cmd = [cc, "-shared", "-fPIC", "-O1", "-o", str(out), str(SOURCE), *flags]
    if subprocess.run(cmd, capture_output=True).returncode != 0:
        if linked:
            return None
        subprocess.run(cmd, check=True)  # fails with the compiler's message
    return out


def loader() -> str:
    """The system's OpenCL loader (Debian's ocl-icd), else the one PyOpenCL loaded."""
    found = ctypes.util.find_library("OpenCL")
    if found:
        return found
    from kprof_opencl.reader import opencl_library

    path = opencl_library()
    assert path, "no OpenCL loader"
    return path


class CLib:
    """The library, opened on ``loader_path``."""

    def __init__(self, so: Path, loader_path: str) -> None:
        lib = ctypes.CDLL(str(so))
        lib.kc_open.argtypes = [ctypes.c_char_p]
        lib.kc_new_queue.restype = ctypes.c_void_p
        lib.kc_new_queue.argtypes = [ctypes.c_void_p]
        lib.kc_release_queue.argtypes = [ctypes.c_void_p]
        lib.kc_queue_properties.restype = ctypes.c_longlong
        lib.kc_queue_properties.argtypes = [ctypes.c_void_p]
        lib.kc_run.argtypes = [
            ctypes.c_void_p,
            ctypes.c_int,
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.c_void_p,
            ctypes.c_void_p,
        ]
        lib.kc_loop.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.kc_loop_events.argtypes = [ctypes.c_void_p, ctypes.c_int]
        err = lib.kc_open(loader_path.encode())
        assert err == 0, f"kc_open({loader_path}) failed: {err}"
        self.lib = lib
        self.loader = loader_path

    def new_queue(self, like: Any) -> int:
        """A queue this library creates itself (properties 0) on ``like``'s context/device."""
        q = self.lib.kc_new_queue(like.int_ptr)
        assert q, "clCreateCommandQueue failed"
        return int(q)

    def release_queue(self, q: int) -> None:
        self.lib.kc_release_queue(q)

    def properties(self, q: int) -> int:
        return int(self.lib.kc_queue_properties(q))

    def run(self, q: int, n: int, size: int = 1024, events: bool = False) -> Any:
        """Write, launch kc_axpb ``n`` times, read back: (result, [(START, END)], refcounts).
        Without ``events`` every enqueue passes no event."""
        x = np.arange(size, dtype=np.float32)
        times = (ctypes.c_uint64 * (2 * n))() if events else None
        refs = (ctypes.c_uint32 * n)() if events else None
        err = self.lib.kc_run(
            q,
            n,
            x.ctypes.data,
            size,
            ctypes.addressof(times) if times is not None else None,
            ctypes.addressof(refs) if refs is not None else None,
        )
        assert err == 0, f"kc_run failed: {err}"
        if not events:
            return x, None, None
        pairs = [(times[2 * i], times[2 * i + 1]) for i in range(n)]
        return x, pairs, list(refs)  # type: ignore[union-attr]

    def loop(self, q: int, n: int) -> None:
        """``n`` tiny launches from C with no event, then clFinish."""
        err = self.lib.kc_loop(q, n)
        assert err == 0, f"kc_loop failed: {err}"

    def loop_events(self, q: int, n: int) -> None:
        """``n`` tiny launches from C, each with its event; after clFinish every event's START
        and END read, then the event released: the hand-written floor of a tool that times
        every launch (bench/bench_floor.py). ``q`` must have profiling enabled."""
        err = self.lib.kc_loop_events(q, n)
        assert err == 0, f"kc_loop_events failed: {err}"
