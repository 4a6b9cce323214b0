"""Programs written as PyOpenCL's own tests and examples are give the same results under kprof:
with ``kprof run`` (queues created while capturing: exact device times) and inside
``kprof.profile()`` with queues made before it (observed: approximate times, no waiting)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import kprof

pytest.importorskip("pyopencl")

SCRIPT = Path(__file__).parent / "scripts" / "pyopencl_style_checks.py"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KPROF_")}
    r = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=300, env=env
    )
    assert r.returncode == 0, r.stderr
    return r


def checks(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("check ")]


@pytest.fixture(scope="module")
def unprofiled() -> list[str]:
    import kprof_opencl

    if kprof_opencl.default_device() is None:
        pytest.skip("OpenCL finds no device here (pip install pocl-binary-distribution)")
    out = checks(run(str(SCRIPT)).stdout)
    assert len(out) == 12
    return out


def test_under_kprof_run_results_are_identical_and_every_record_has_device_time(
    unprofiled: list[str], tmp_path: Path
) -> None:
    saved = tmp_path / "run.kprof"
    r = run("-m", "kprof", "run", "--backends", "opencl", "-o", str(saved), str(SCRIPT))
    assert checks(r.stdout) == unprofiled
    p = kprof.load(saved)
    assert len(p.kernels) > 30
    assert [r for r in p.kernels if r.host_timed or r.approximate or r.error] == []
    assert "ProfilingDisabledWarning" not in r.stderr


def test_inside_a_profile_with_queues_made_before_results_are_identical(
    unprofiled: list[str],
) -> None:
    r = run(str(SCRIPT), "inside-profile")
    assert checks(r.stdout) == unprofiled
    assert "approximate: [True]" in r.stderr  # every resolved record observed, none host-timed
