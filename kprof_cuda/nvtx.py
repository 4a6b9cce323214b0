"""kprof's ranges as NVTX ranges, so Nsight Systems shows them beside its own data.

Used only when the ``nvtx`` package (``pip install nvtx``, or ``kprof[nvtx]``) is importable.
Ranges go to the NVTX domain ``"kprof"``: Nsight Systems shows them in a row of that name.
NVTX ranges are per thread (push/pop), as kprof's are.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["DOMAIN", "load"]

DOMAIN = "kprof"


class Nvtx:
    """Push and pop NVTX ranges in kprof's domain."""

    __slots__ = ("_pop", "_push")

    def __init__(self, module: Any) -> None:
        self._push = module.push_range
        self._pop = module.pop_range

    def push(self, name: str) -> None:
        self._push(message=name, domain=DOMAIN)

    def pop(self) -> None:
        self._pop(domain=DOMAIN)


def load() -> Nvtx | None:
    """The NVTX bindings, or None when the ``nvtx`` package is not installed (or unusable)."""
    try:
        module = importlib.import_module("nvtx")
        return Nvtx(module)
    except Exception:  # not installed, or a broken install: ranges just don't go to NVTX
        return None
