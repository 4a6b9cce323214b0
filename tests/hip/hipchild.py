"""Running HIP scenarios in child processes (used by conftest.py and the tests).

hip-python fixes where it loads ``libamdhip64.so`` at its first call in a process, so the HIP
scenarios (``hip_scenarios.py``) run in fresh interpreters whose ``ROCM_PATH`` points at the
double; nothing in the pytest process itself calls into HIP.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
SCENARIOS = HERE / "hip_scenarios.py"
CHILD_TIMEOUT_S = 120  # a hang in kprof would show as a timeout here, not a stuck test run

# tests/hip_double/build.py, loaded by path ("build" alone could be PyPI's build package).
_spec = importlib.util.spec_from_file_location(
    "hipdouble_build", HERE.parent / "hip_double" / "build.py"
)
assert _spec is not None and _spec.loader is not None
hipdouble_build = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(hipdouble_build)


def child_env(rocm_path: Path | str, **extra: str) -> dict[str, str]:
    """The environment of a child: only the hip backend, the given HIP runtime."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("HIPDOUBLE_", "KPROF_", "ROCM_"))
    }
    env.update(ROCM_PATH=str(rocm_path), KPROF_PLUGINS="hip", PYTHONUNBUFFERED="1", **extra)
    return env


def run_child(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S
    )


class Results(dict[str, Any]):
    """Scenario name -> its data; reading a scenario that raised in the child fails the test
    with the child's traceback."""

    stderr = ""

    def __getitem__(self, name: str) -> Any:
        data = super().__getitem__(name)
        if isinstance(data, dict) and set(data) == {"error"}:
            pytest.fail(
                f"scenario {name!r} raised in the child:\n{data['error']}\n"
                f"child stderr:\n{self.stderr}"
            )
        return data
