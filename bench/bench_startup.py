"""Benchmark ``startup`` (``python bench/run.py --only startup``; ``python
bench/bench_startup.py [RUNS]`` for the ``kprof run`` part alone)."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_SCRIPT = "x = sum(range(1000))\n"  # uses no GPU library


def _timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall s, CPU s of the child, user + system) of one run of ``cmd``."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _pid, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode:
        raise RuntimeError(f"{cmd} exited with {p.returncode}")
    return wall, usage.ru_utime + usage.ru_stime


def kprof_run_startup(runs: int) -> dict[str, Any]:
    """``kprof run`` on a script that uses no GPU library, against ``python`` on it: the
    three variants in turn (python, kprof run, kprof run with every backend named, which starts
    them with the program as every run did before issue 28), one warm-up each, then ``runs``
    rounds; the figures are medians of the per-round differences to ``python``. Bytecode is
    written on the warm-up (this machine sets PYTHONDONTWRITEBYTECODE; an install has it)."""
    import kprof

    env = {k: v for k, v in os.environ.items() if not k.startswith("KPROF_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    names = ",".join(b.name for b in kprof.backends() if b.info().status == "available")
    with tempfile.TemporaryDirectory() as tmp:
        script = str(Path(tmp) / "plain.py")
        Path(script).write_text(_SCRIPT)
        variants = {
            "python": [sys.executable, script],
            "kprof_run": [sys.executable, "-m", "kprof", "run", script],
            "kprof_run_backends_named": [
                *[sys.executable, "-m", "kprof", "run", "--backends", names, script]
            ],
        }
        for cmd in variants.values():
            _timed(cmd, env)
        got: dict[str, list[tuple[float, float]]] = {k: [] for k in variants}
        for _ in range(runs):
            for k, cmd in variants.items():
                got[k].append(_timed(cmd, env))
    out: dict[str, Any] = {"runs": runs, "backends_named": names}
    for k in ("kprof_run", "kprof_run_backends_named"):
        for i, what in enumerate(("wall", "cpu")):
            diffs = [a[i] - b[i] for a, b in zip(got[k], got["python"])]
            out[f"{k}_minus_python_{what}_s"] = statistics.median(diffs)
    for k, v in got.items():
        out[f"{k}_wall_s"] = statistics.median(w for w, _c in v)
        out[f"{k}_cpu_s"] = statistics.median(c for _w, c in v)
    return out


def bench(quick: bool) -> dict[str, Any]:
    """Target 6: ``import kprof`` ≤ 150 ms, ``kprof backends`` ≤ 2 s (all vendor libraries
    installed); issue 28: ``kprof run`` on a script without GPU libraries ≤ 0.15 s over python."""
    reps = 3 if quick else 7
    imp, cli = [], []
    kprof_bin = Path(sys.executable).with_name("kprof")
    for _ in range(reps):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import kprof"], check=True)
        imp.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        subprocess.run([str(kprof_bin), "backends"], check=True, capture_output=True)
        cli.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    bare = time.perf_counter() - t0
    return {
        "import_kprof_s": statistics.median(imp),
        "kprof_backends_s": statistics.median(cli),
        "bare_python_s": bare,
        "kprof_run": kprof_run_startup(5 if quick else 21),
        "targets": {"import_kprof_s": 0.150, "kprof_backends_s": 2.0, "kprof_run_over_s": 0.15},
    }


if __name__ == "__main__":
    import json

    print(json.dumps(kprof_run_startup(int(sys.argv[1]) if sys.argv[1:] else 21), indent=2))
