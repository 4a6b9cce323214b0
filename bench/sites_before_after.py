"""The pure-Python launch-site catcher of another revision against this tree's, on PoCL
(``python bench/sites_before_after.py [REV]``, REV a git revision, default ``HEAD~1``).

A tiny PyOpenCL launch in a profile on the pure recorder path, three variants per round, their
order rotated each round: sites off, sites with REV's ``SiteCatcher``
(``kprof_core/recording/sites.py`` as of REV, loaded beside this one and handing out ids
from the same table), and sites with this tree's. Each run is the loop and a ``q.finish()``
in three clocks (``bench_sites._clocked_loop``); printed: the medians of the per-round
differences against off, and of new minus old, per clock, with the load average.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import types
from collections.abc import Callable
from typing import Any

from bench_sites import CLOCKS, _clocked_loop
from harness import ROOT, on_path, opencl


def _catcher_of(rev: str) -> type:
    """``SiteCatcher`` as of ``rev``, its new ids taken from this tree's ``sites.KEYS``."""
    from kprof_core.recording import sites

    src = subprocess.run(
        ["git", "show", f"{rev}:kprof_core/recording/sites.py"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    mod = types.ModuleType("kprof_core.recording._sites_before")
    mod.__file__ = sites.__file__
    exec(compile(src, f"{sites.__file__} at {rev}", "exec"), mod.__dict__)
    mod._new_key = sites._new_key  # type: ignore[attr-defined]
    return mod.SiteCatcher  # type: ignore[no-any-return]


def main(rev: str, n: int = 5000, rounds: int = 41) -> dict[str, Any]:
    import kprof
    from kprof_core.recording import sites

    _cl, _ctx, q, _prg, tiny, _busy, _big, _np, buf = opencl()
    catchers = {"before": _catcher_of(rev), "after": sites.SiteCatcher}

    def variant(mode: str) -> Callable[[], dict[str, float]]:
        def run() -> dict[str, float]:
            sites.SiteCatcher = catchers.get(mode, sites.SiteCatcher)  # type: ignore[misc]
            try:
                q.finish()
                with kprof.profile(backends=["opencl"], sites=mode != "off") as p:
                    r = _clocked_loop(tiny, q, buf, n)
            finally:
                sites.SiteCatcher = catchers["after"]  # type: ignore[misc]
            assert len(p.kernels) == n and len(p.sites) == (mode != "off")
            return r

        return on_path(False, run)

    modes = ["off", "before", "after"]
    runs = {m: variant(m) for m in modes}
    for f in runs.values():
        f(), f()  # warm up
    out: dict[str, Any] = {"rev": rev, "launches_per_run": n, "rounds": rounds}
    out["loadavg_start"] = os.getloadavg()
    got: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
    for r in range(rounds):
        for m in modes[r % 3 :] + modes[: r % 3]:
            got[m].append(runs[m]())
    out["loadavg_end"] = os.getloadavg()
    for c in CLOCKS:
        col = {m: [x[c] for x in got[m]] for m in modes}
        out[f"off_{c}_ns"] = round(statistics.median(col["off"]), 1)
        for a, b in (("before", "off"), ("after", "off"), ("after", "before")):
            d = [x - y for x, y in zip(col[a], col[b])]
            out[f"{a}_minus_{b}_{c}_ns"] = round(statistics.median(d), 1)
    return out


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    print(json.dumps(main(sys.argv[1] if len(sys.argv) > 1 else "HEAD~1"), indent=1))
