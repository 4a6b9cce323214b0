"""Reading CUPTI's records as cupti-python hands them over: fields, kernel names, copy
names, and which API calls enqueue work. Pure functions over the binding's objects; the
CUPTI client that uses them is :mod:`kprof_cuda.activity`."""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable
from typing import Any

__all__ = ["COPY_NAMES", "MEMSET", "demangle", "fields", "kernel_name", "work_cbids"]

COPY_NAMES = {
    "HTOD": "[copy host to device]",
    "DTOH": "[copy device to host]",
    "DTOD": "[copy device to device]",
    "HTOH": "[copy host to host]",
    "PTOP": "[copy peer to peer]",
    "HTOA": "[copy host to array]",
    "ATOH": "[copy array to host]",
    "ATOA": "[copy array to array]",
    "ATOD": "[copy array to device]",
    "DTOA": "[copy device to array]",
}
MEMSET = "[memset]"


class _Demangler:
    """C++ names to readable ones with libstdc++'s ``__cxa_demangle`` (as ``c++filt``).

    libstdc++ is looked up on first use, not at import (``find_library`` runs ldconfig)."""

    def __init__(self) -> None:
        self._cache: dict[str, str] = {}
        self._fn: Any = None
        self._loaded = False

    def _load(self) -> None:
        self._loaded = True
        try:
            lib = ctypes.CDLL(ctypes.util.find_library("stdc++") or "libstdc++.so.6")
            fn = getattr(lib, "__cxa_demangle")  # not lib.__x: that name would be mangled here
            fn.restype = ctypes.c_void_p
            fn.argtypes = [
                ctypes.c_char_p,
                ctypes.c_char_p,
                ctypes.c_void_p,
                ctypes.POINTER(ctypes.c_int),
            ]
            self._free = ctypes.CDLL(None).free
            self._free.argtypes = [ctypes.c_void_p]
            self._fn = fn
        except (OSError, AttributeError):  # no libstdc++: names stay mangled
            pass

    def __call__(self, name: str) -> str:
        out = self._cache.get(name)
        if out is None:
            out = self._cache[name] = self._demangle(name)
        return out

    def _demangle(self, name: str) -> str:
        if not name.startswith("_Z"):
            return name
        if not self._loaded:
            self._load()
        if self._fn is None:
            return name
        status = ctypes.c_int(0)
        ptr = self._fn(name.encode(), None, None, ctypes.byref(status))
        if not ptr or status.value != 0:
            return name
        try:
            return ctypes.string_at(ptr).decode(errors="replace")
        finally:
            self._free(ptr)


demangle = _Demangler()


# Per record class of cupti-python: field name -> position in the record's one-row numpy
# array (``_data``), or None when the class has none (then the public properties are read).
# Measured with the CUPTI double: a property costs 2-4 µs (numpy recarray attribute access),
# one ``_data.item()`` 0.5-0.7 µs for all fields; a kernel record needs ten fields.
_layouts: dict[type, dict[str, int] | None] = {}


def fields(a: Any) -> Callable[[str], Any]:
    """A getter of ``a``'s fields, all read in one call where the binding allows."""
    cls = type(a)
    if cls in _layouts:
        layout = _layouts[cls]
    else:
        layout = None
        data = getattr(a, "_data", None)
        names = getattr(getattr(data, "dtype", None), "names", None)
        if names and getattr(data, "size", 0) == 1:
            layout = {n: i for i, n in enumerate(names)}
        _layouts[cls] = layout
    if layout is None:
        return lambda name: getattr(a, name)
    row = a._data.item()
    return lambda name: row[layout[name]]


def kernel_name(a: Any, get: Callable[[str], Any]) -> str:
    """A kernel record's name: a C string CUPTI owns, valid while its buffer is being read
    (now). Read from the pointer (0.3 µs) where the row has it, else by the property (4 µs)."""
    if _layouts.get(type(a)) is not None:
        ptr = get("name")
        if isinstance(ptr, int):
            return ctypes.string_at(ptr).decode(errors="replace") if ptr else "?"
    return str(a.name)


def work_cbids(c: Any) -> tuple[dict[int, frozenset[int]], frozenset[tuple[int, int]]]:
    """API calls that enqueue device work (launches, copies, memsets, graph launches), by
    activity kind, from the names of CUPTI's callback ids; and the graph launches among them."""
    out: dict[int, frozenset[int]] = {}
    graph: set[tuple[int, int]] = set()
    for kind, enum in (
        (int(c.ActivityKind.DRIVER), c.driver_api_trace_cbid),
        (int(c.ActivityKind.RUNTIME), c.runtime_api_trace_cbid),
    ):
        ids = set()
        for m in enum:
            n = m.name
            if ("Launch" in n and "HostFunc" not in n) or "Memcpy" in n or "Memset" in n:
                ids.add(int(m.value))
                if "GraphLaunch" in n:
                    graph.add((kind, int(m.value)))
        out[kind] = frozenset(ids)
    return out, frozenset(graph)
