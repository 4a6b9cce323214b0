"""Fixtures for the HIP backend tests: the test double, and scenarios run in child processes
(see hipchild.py for why children)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from hipchild import SCENARIOS, Results, child_env, hipdouble_build, run_child


@pytest.fixture(scope="session")
def hip_double(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory to use as ROCM_PATH: the double built as ``<dir>/lib/libamdhip64.so``."""
    out = tmp_path_factory.mktemp("hip_double")
    try:
        hipdouble_build.build(out)
    except hipdouble_build.BuildError as exc:  # the HIP tests must run in CI: fail, don't skip
        pytest.fail(f"cannot build the HIP test double: {exc}")
    return out


@pytest.fixture(scope="session")
def run_scenarios(hip_double: Path) -> Callable[..., Results]:
    """``run_scenarios("a", "b", HIPDOUBLE_DEVICES="2")`` runs scenarios of
    ``hip_scenarios.py`` in one child process, in order, and returns their data."""

    def run(*names: str, **env: str) -> Results:
        proc = run_child([str(SCENARIOS), *names], child_env(hip_double, **env))
        assert proc.returncode == 0, f"scenario child failed:\n{proc.stdout}\n{proc.stderr}"
        results = Results(json.loads(proc.stdout.strip().splitlines()[-1]))
        results.stderr = proc.stderr
        return results

    return run
