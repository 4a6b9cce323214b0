"""Benchmark ``startup`` (``python bench/run.py --only startup``)."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def bench(quick: bool) -> dict[str, Any]:
    """Target 6: ``import kprof`` ≤ 150 ms, ``kprof backends`` ≤ 2 s (all vendor libraries installed)."""
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
        "targets": {"import_kprof_s": 0.150, "kprof_backends_s": 2.0},
    }
