"""Names of CUPTI's records: kernel names demangled, interned once per distinct name, copy and
memset names; shared by both readers (``cupti_pure``, ``_cupti_src/``), which hand over name
indices into :class:`Interner`'s list."""

from __future__ import annotations

import ctypes
import ctypes.util
from typing import Any

from kprof.plugin import RowNames

from .cupti_abi import COPY_NAMES, MEMSET_NAME

__all__ = ["FIXED_NAMES", "Interner", "demangle"]

#: The first names of every reader's list, by index: 0 memset, 1-10 CUpti_ActivityMemcpyKind
#: values, 11 any other copy; kernel names follow, in the order first seen.
FIXED_NAMES = (MEMSET_NAME, *(COPY_NAMES[k] for k in range(1, 11)), RowNames.ANY_DIRECTION)


class Interner:
    """Raw kernel names (bytes, as CUPTI wrote them) -> index into ``values`` (demangled)."""

    def __init__(self) -> None:
        self.values: list[str] = list(FIXED_NAMES)
        self._index: dict[bytes, int] = {}

    def __call__(self, raw: bytes) -> int:
        i = self._index.get(raw)
        if i is None:
            i = self._index[raw] = len(self.values)
            self.values.append(demangle(raw.decode(errors="replace")))
        return i

    def extend(self, raws: list[bytes]) -> None:
        """Names the compiled reader interned, in its order (it numbers them the same way)."""
        for raw in raws:
            self(raw)


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
