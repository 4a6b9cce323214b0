"""kprof's ranges as NVTX ranges, so Nsight Systems shows them beside its own data.

Used only when the ``nvtx`` package (``pip install nvtx``, or ``kprof[nvtx]``) is importable
and a tool collects NVTX in the process (Nsight Systems injects one when it starts the
program): without one, ``nvtx`` hands back its dummy domain and every range would be two
calls for nothing. Ranges go to the NVTX domain ``"kprof"``: Nsight Systems shows them in a
row of that name. NVTX ranges are per thread (push/pop), as kprof's are.
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
    """The NVTX bindings, or None when the ``nvtx`` package is not installed (or unusable),
    or no tool collects NVTX ranges in this process."""
    try:
        module = importlib.import_module("nvtx")
        get_domain = getattr(module, "get_domain", None)
        if get_domain is not None and type(get_domain(DOMAIN)).__name__ == "DummyDomain":
            return None  # nvtx's own answer when nothing is injected: nobody would see them
        return Nvtx(module)
    except Exception:  # not installed, or a broken install: ranges just don't go to NVTX
        return None
