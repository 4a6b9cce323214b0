"""``os.fork()`` inside a profile (issue 25, item 5): the child starts with no inherited
record side and records only its own work; leaving the block it does not wait for the
parent's tokens (whose device thread it does not have); under ``kprof run`` a child that
exits normally writes its own file, beside the parent's, never over it. Run in child
processes, on both recorder paths."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import kprof

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork")
KPROF = str(Path(sys.executable).with_name("kprof"))

FORK_IN_A_PROFILE = """
import json, os
import kprof
from kprof_testbackend import device
from kprof_testbackend.instant import InstantClock, InstantQueue

plugin = InstantClock()
kprof.register_backend(plugin, "inst")
q = device.Queue()  # a device thread: it does not exist in the child
q.hang.clear()
with kprof.profile(backends=["testdev", "inst"], timeout=5) as p, plugin.using(
    InstantQueue("iq")
):
    with q:
        q.launch("parent-before")
        q.launch("hang")  # not done at the fork; never done in the child
        with kprof.range("parent-before-fork"):
            pass
    pid = os.fork()
    me = "child" if pid == 0 else "parent"
    with kprof.range(f"{me}-range"):
        pass
    kprof.mark(f"{me}-mark")
    if pid:
        q.hang.set()
names = sorted(
    [k.name for k in p.kernels]
    + [r.name for r in p.device_ranges]
    + [r.name for r in p.ranges]
    + [m.name for m in p.markers]
)
out = {"names": names, "unresolved": [r.name for r in p.unresolved], "pid": p.meta.get("pid")}
if pid:
    os.waitpid(pid, 0)  # the child's line first, whole
print(me, json.dumps(out), flush=True)
if pid == 0:
    os._exit(0)
"""


def run_script(code: str, pure: bool, *args: str, cwd: Path | None = None) -> str:
    env = dict(os.environ)
    env.pop("KPROF_PURE_PYTHON", None)
    if pure:
        env["KPROF_PURE_PYTHON"] = "1"
    out = subprocess.run(
        [*args] if args else [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,  # a guard, not a measurement
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.parametrize("pure", [False, True])
def test_a_forked_child_records_only_its_own_work(pure: bool) -> None:
    out = run_script(FORK_IN_A_PROFILE, pure)
    got = dict(line.split(" ", 1) for line in out.splitlines())
    child, parent = json.loads(got["child"]), json.loads(got["parent"])
    # Was: the child waited the whole timeout for the parent's "hang", and listed the
    # parent's records as its own (unresolved).
    assert child["names"] == ["child-mark", "child-range", "child-range"]
    assert child["unresolved"] == []
    assert parent["names"] == [
        "hang",
        "parent-before",
        *["parent-before-fork"] * 3,  # host, testdev and inst
        "parent-mark",
        *["parent-range"] * 2,  # host and inst
    ]
    assert parent["unresolved"] == []
    assert child["pid"] != parent["pid"]


CHILD_EXITS = """
import os, sys
import kprof
kprof.mark("parent-before")
pid = os.fork()
if pid == 0:
    kprof.mark("child-only")
    sys.exit(0)  # unwinds through kprof run's profile: the child writes its file
os.waitpid(pid, 0)
kprof.mark("parent-after")
"""


@pytest.mark.parametrize("pure", [False, True])
@pytest.mark.parametrize("pattern", ["out.kprof", "c-{pid}.kprof"])
def test_kprof_run_a_forked_child_writes_its_own_file(
    pure: bool, pattern: str, tmp_path: Path
) -> None:
    script = tmp_path / "forks.py"
    script.write_text(textwrap.dedent(CHILD_EXITS))
    run_script("", pure, KPROF, "run", "--no-device", "-o", pattern, str(script), cwd=tmp_path)
    files = sorted(tmp_path.glob("*.kprof"))
    assert len(files) == 2  # was one (parent and child wrote the same path) or a mix
    marks = sorted(tuple(m.name for m in kprof.load(f).markers) for f in files)
    assert marks == [("child-only",), ("parent-before", "parent-after")]
