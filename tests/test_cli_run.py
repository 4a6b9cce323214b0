"""`kprof run script.py [args]`, end to end in a subprocess, on a script using pyopencl.array."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parent / "scripts" / "opencl_array_script.py"


def kprof_run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KPROF_")}
    return subprocess.run(
        [sys.executable, "-m", "kprof", "run", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=cwd,
    )


@pytest.fixture(scope="module")
def opencl_device() -> None:
    pytest.importorskip("pyopencl")
    import kprof_opencl

    if kprof_opencl.default_device() is None:
        pytest.skip("OpenCL finds no device here (pip install pocl-binary-distribution)")


def _report_has_the_scripts_work(stdout: str) -> None:
    assert "Device-side activity" in stdout
    assert "[copy host to device]" in stdout and "[copy device to host]" in stdout
    assert "axpb" in stdout  # pyopencl.array's elementwise kernel for 2*a and +1


def test_runs_as_main_with_its_argv_and_prints_the_report(
    opencl_device: None, tmp_path: Path
) -> None:
    r = kprof_run("--backends", "opencl", str(SCRIPT), "ok", "--flag", "x y", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "__name__=__main__" in r.stdout
    assert "argv=['ok', '--flag', 'x y']" in r.stdout
    # The script's output comes first, the report after it.
    assert r.stdout.index("computed") < r.stdout.index("Device-side activity")
    _report_has_the_scripts_work(r.stdout)


def test_a_script_that_raises_still_gets_its_report_and_exit_code_1(opencl_device: None) -> None:
    r = kprof_run("--backends", "opencl", str(SCRIPT), "raise")
    assert r.returncode == 1
    assert "ValueError: boom from the script" in r.stderr
    _report_has_the_scripts_work(r.stdout)


def test_sys_exit_code_is_kept_after_the_report(opencl_device: None) -> None:
    r = kprof_run("--backends", "opencl", str(SCRIPT), "exit3")
    assert r.returncode == 3
    _report_has_the_scripts_work(r.stdout)
    assert "exited with code 3" in r.stderr


def test_missing_script_is_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "no_such_script.py"
    r = kprof_run(str(missing))
    assert r.returncode == 2
    assert "no_such_script.py" in r.stderr and "no such file" in r.stderr
    assert "Traceback" not in r.stderr
