"""The conformance kit passes on the HIP backend through hip-python, against the HIP test double
(in a child process: see hipchild.py)."""

from __future__ import annotations

import re
from pathlib import Path

from hipchild import HERE, child_env, run_child


def test_the_hip_backend_passes_the_conformance_kit(hip_double: Path) -> None:
    proc = run_child(
        ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", str(HERE / "hip_conformance.py")],
        child_env(hip_double),
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    passed = [ln for ln in out.splitlines() if ln.startswith("PASSED")]
    assert len(passed) == 11 and "SKIPPED" not in out, out
    assert re.search(r"kprof conformance, backend 'hip': align_clock: ", out), out
