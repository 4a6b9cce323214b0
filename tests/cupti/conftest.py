"""The CUPTI test double, built once per session for the CUPTI tests (``cupti_libdir``)."""

from __future__ import annotations

import sys
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
