"""Copies under a profile release the host memory the program releases (PyOpenCL's copy events
hold their host array; kprof must not keep those events). Measured in child processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyopencl")

SCRIPT = Path(__file__).parent / "scripts" / "opencl_copy_loop.py"
MB, LOOPS = 4, 40  # 160 MB of arrays in all: held by kprof, the peak would grow by that much


def peak_kib(mode: str, *extra: str) -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KPROF_")}
    r = subprocess.run(
        [sys.executable, str(SCRIPT), str(MB), str(LOOPS), mode, *extra],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert r.returncode == 0, r.stderr
    return int(r.stdout.split()[-1])


@pytest.fixture(scope="module")
def device() -> None:
    import kprof_opencl

    if kprof_opencl.default_device() is None:
        pytest.skip("OpenCL finds no device here (pip install pocl-binary-distribution)")


@pytest.mark.parametrize("queue", ["profiling-queue", "plain-queue"])
def test_peak_memory_of_a_copy_loop_is_that_of_the_unprofiled_program(
    device: None, queue: str
) -> None:
    plain = peak_kib("plain", queue)
    profiled = peak_kib("profiled", queue)
    # Within a few MB (kprof's own tables and imports), far from the 160 MB it held before.
    assert profiled - plain < 12 * 1024, (plain, profiled)
