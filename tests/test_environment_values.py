"""Every ``KPROF_*`` variable a user may set, set to hostile values: ``kprof run`` either runs
the script (a value it ignores or warns about) or says in one line what is wrong and exits 2,
never a traceback (``KPROF_STACKS=300`` was a ValueError traceback, rc 1)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kprof_core import envvars

HOSTILE = ["300", "-3", "nan", "x\x1b[2J"]
USER = sorted(v.name for v in envvars.VARIABLES if v.audience == "user")


@pytest.mark.parametrize("name", USER)
def test_a_hostile_value_is_one_line_or_ignored_never_a_traceback(
    name: str, tmp_path: Path
) -> None:
    script = tmp_path / "hi.py"
    script.write_text("print('ran')\n")
    base = {k: v for k, v in os.environ.items() if not k.startswith("KPROF_")}
    for value in HOSTILE:
        r = subprocess.run(
            [sys.executable, "-m", "kprof", "run", str(script)],
            capture_output=True,
            text=True,
            timeout=120,
            env={**base, "KPROF_PLUGINS": "opencl", name: value},
            cwd=tmp_path,
        )
        said = f"{name}={value!r}: rc {r.returncode}\n{r.stderr}"
        assert "Traceback" not in r.stderr, said
        assert r.returncode in (0, 2), said
        if r.returncode == 2:
            errors = [ln for ln in r.stderr.splitlines() if ln.startswith(("kprof:", "kprof run:"))]
            assert errors and name in errors[-1], said
        else:
            assert "ran" in r.stdout, said


def test_kprof_stacks_above_the_depth_kprof_keeps_says_so(tmp_path: Path) -> None:
    script = tmp_path / "hi.py"
    script.write_text("print('ran')\n")
    base = {k: v for k, v in os.environ.items() if not k.startswith("KPROF_")}
    r = subprocess.run(
        [sys.executable, "-m", "kprof", "run", str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**base, "KPROF_STACKS": "300", "KPROF_PLUGINS": "opencl"},
        cwd=tmp_path,
    )
    assert r.returncode == 2
    assert r.stderr.strip() == (
        "kprof: KPROF_STACKS='300' is more frames than kprof keeps: use a depth from 2 to 256, "
        "1 (or true, yes, on) for 32, or 0 (or false, no, off) for none"
    )
