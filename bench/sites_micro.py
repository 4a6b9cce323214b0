"""The launch-site catcher alone, without a device (``python bench/sites_micro.py``).

``capture()`` called under N frames of a skipped module (as PyOpenCL's ``Kernel.__call__``,
its generated invoker and kprof's wrapper are), compiled and pure Python; the same calls with
nothing caught are subtracted. Paired rounds (the order flipped every other round), the
median of the per-round differences, in ns. Needs no OpenCL: it runs wherever kprof_core
imports.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from kprof_core.low_level import native
from kprof_core.recording import sites


def _nest(depth: int) -> Callable[[Callable[[], Any]], Any]:
    """A function of a skipped module ("pyopencl.fake") that calls its argument ``depth``
    frames down."""
    src = "def f0(c):\n    return c()\n"
    for k in range(1, depth):
        src += f"def f{k}(c):\n    return f{k - 1}(c)\n"
    lib: dict[str, Any] = {"__name__": "pyopencl.fake"}
    exec(compile(src, "/lib/pyopencl/fake.py", "exec"), lib)
    return lib[f"f{depth - 1}"]  # type: ignore[no-any-return]


def _per_call(fn: Callable[[Any], Any], arg: Any, n: int) -> float:
    t0 = time.perf_counter_ns()
    for _ in range(n):
        fn(arg)
    return (time.perf_counter_ns() - t0) / n


def main() -> dict[str, Any]:
    n, rounds = 20000, 41
    out: dict[str, Any] = {"python": sys.version.split()[0], "calls": n, "rounds": rounds}
    paths = {"pure": None, **({"compiled": native.compiled()} if native.compiled() else {})}
    for label, mod in paths.items():
        capture = sites.catcher(sites.Skipper(), mod).capture
        for depth in (1, 2, 3, 4):
            fn = _nest(depth)
            diffs = []
            for r in range(rounds):
                if r % 2:
                    off, on = _per_call(fn, int, n), _per_call(fn, capture, n)
                else:
                    on, off = _per_call(fn, capture, n), _per_call(fn, int, n)
                diffs.append(on - off)
            out[f"{label}_{depth}_frames_ns"] = round(statistics.median(diffs), 1)
    return out


if __name__ == "__main__":
    print(json.dumps(main(), indent=1))
