"""The CUPTI test double, built once per session for the CUPTI tests (``cupti_libdir``), and
``cupti_child``: a scenario script run in a child process on one reader."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "cupti_double"))
import build as cupti_build


@pytest.fixture(scope="session")
def cupti_libdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("cupti_double")
    try:
        cupti_build.build(out)
    except cupti_build.BuildError as exc:
        pytest.fail(f"cannot build the CUPTI test double: {exc}")
    return out


def _child_results(script: str, libdir: Path, reader: str) -> dict[str, str]:
    """Run ``script`` (beside this file) on the ``reader`` ("compiled" or "pure") against the
    double in ``libdir``; its last line's JSON: each scenario's outcome ("ok" or the error)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KPROF_")}
    if reader == "pure":
        env["KPROF_PURE_PYTHON"] = "1"
    else:
        try:
            import kprof_cuda._cupti  # noqa: F401
        except ImportError as exc:
            pytest.skip(f"the compiled CUPTI reader is not built here ({exc})")
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve().parent / script), str(libdir)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, f"child failed:\n{proc.stdout}\n{proc.stderr}"
    out: dict[str, str] = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out.pop("_reader") == reader, out
    return out


@pytest.fixture(scope="session")
def cupti_child() -> Callable[[str, Path, str], dict[str, str]]:
    """``cupti_child(script, libdir, reader)``: a scenario script's outcomes on one reader."""
    return _child_results
