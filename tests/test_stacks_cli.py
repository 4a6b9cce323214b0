"""``kprof run --sites/--stacks --tree --speedscope`` and ``kprof show --tree --speedscope``,
end to end in subprocesses, on a PyOpenCL script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import kprof

SCRIPT = """\
import numpy as np
import pyopencl as cl
import kprof, kprof_opencl

q = kprof_opencl.profiling_queue(kprof_opencl.default_device())
prg = cl.Program(q.context, "__kernel void bump(__global float *x) {x[get_global_id(0)] += 1;}")
bump = prg.build().bump
buf = cl.Buffer(q.context, cl.mem_flags.READ_WRITE, 256)


def step():
    bump(q, (64,), None, buf)


def main():
    for _ in range(3):
        step()
    with kprof.range("copy"):
        cl.enqueue_copy(q, np.empty(64, np.float32), buf)
    q.finish()


main()
"""


def kprof_cmd(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KPROF_")}
    return subprocess.run(
        [sys.executable, "-m", "kprof", *args],
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


def test_run_with_stacks_prints_the_tree_and_writes_speedscope(
    opencl_device: None, tmp_path: Path
) -> None:
    (tmp_path / "prog.py").write_text(SCRIPT)
    r = kprof_cmd(
        "run",
        "--stacks",
        "--tree",
        "--speedscope",
        "s.json",
        "-o",
        "p.kprof",
        "prog.py",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    tree = r.stdout[r.stdout.index("Device time as a tree") :].splitlines()
    where = [line[29:] for line in tree[3:]]
    assert where[:5] == [
        "all device work",
        "├─ prog.py:23 <module>",
        "│  └─ prog.py:17 main",
        "│     └─ prog.py:12 step",
        "│        └─ kernel bump",
    ]
    assert "range copy" in where[5] and tree[7].split()[3] == "3"  # step's 3 calls
    p = kprof.load(tmp_path / "p.kprof")
    assert len(p.stacks) == 3 and "Device time by line" in r.stdout  # step, the range, the copy
    doc = json.loads((tmp_path / "s.json").read_text())
    assert sum(doc["profiles"][0]["weights"]) == sum(x.total_ns for x in p.summary().device)
    # show reads the saved stacks back into the same tree and file.
    s = kprof_cmd("show", "p.kprof", "--tree", "--speedscope", "t.json", cwd=tmp_path)
    assert s.returncode == 0, s.stderr
    assert s.stdout[s.stdout.index("Device time as a tree") :].splitlines() == tree
    assert json.loads((tmp_path / "t.json").read_text()) == doc


def test_run_with_sites_gives_one_level_of_lines(opencl_device: None, tmp_path: Path) -> None:
    (tmp_path / "prog.py").write_text(SCRIPT)
    r = kprof_cmd("run", "--sites", "--tree", "-o", "p.kprof", "prog.py", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    where = [x[29:] for x in r.stdout[r.stdout.index("Device time as a tree") :].splitlines()[3:]]
    assert where[:3] == ["all device work", "├─ prog.py:12 step", "│  └─ kernel bump"]
    p = kprof.load(tmp_path / "p.kprof")
    assert p.stacks == () and len(p.sites) == 3
    bad = kprof_cmd("run", "--stacks", "0", "prog.py", cwd=tmp_path)
    assert bad.returncode == 2 and "a depth from 1 to 256" in bad.stderr


@pytest.mark.parametrize("pure", ["0", "1"])
def test_stacks_start_at_the_script_under_the_console_script(
    opencl_device: None, tmp_path: Path, pure: str
) -> None:
    # The `kprof` command (pip's console script), not `python -m kprof`: its frame, kprof's
    # and runpy's are the runner's, never the first lines of the program's stacks.
    script = Path(sys.executable).parent / "kprof"
    if not script.exists():
        pytest.skip("no kprof console script beside this interpreter")
    (tmp_path / "prog.py").write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KPROF_")}
    r = subprocess.run(
        [str(script), "run", "--stacks", "--tree", "prog.py"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "KPROF_PURE_PYTHON": pure},
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    tree = r.stdout[r.stdout.index("Device time as a tree") :].splitlines()
    assert [line[29:] for line in tree[3:6]] == [
        "all device work",
        "├─ prog.py:23 <module>",
        "│  └─ prog.py:17 main",
    ]
