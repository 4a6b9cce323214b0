"""``os.fork()`` inside a profile (issue 25, item 5): the child starts with no inherited
record side and records only its own work; leaving the block it does not wait for the
parent's tokens (whose device thread it does not have); a ``kprof.range`` open across the
fork is the child's from the fork on (host only), a ``kprof.kernel`` call that forked leaves
no row in the child; under ``kprof run`` a child that exits normally writes its own file,
beside the parent's, never over it. Run in child processes, on both recorder paths."""

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


RANGE_ACROSS_THE_FORK = """
import json, os, threading, warnings
import kprof
from kprof_testbackend import device
from kprof_testbackend.instant import InstantClock, InstantQueue

class Mirrored(InstantClock):  # a vendor tool's range stack (NVTX-like), per process
    stack = []
    @kprof.plugin.hookimpl
    def range_push(self, backend, name):
        self.stack.append(name)
    @kprof.plugin.hookimpl
    def range_pop(self, backend):
        self.stack.pop()

plugin = Mirrored()
kprof.register_backend(plugin, "inst")
q = device.Queue()  # a device thread: it does not exist in the child
q.hang.clear()
entered, leave = threading.Event(), threading.Event()

def elsewhere():
    with kprof.range("elsewhere"):  # open in another thread at the fork
        entered.set()
        leave.wait()

warnings.simplefilter("ignore")  # the range left open is cut at the end, with a warning
with kprof.profile(backends=["testdev", "inst"], timeout=5) as p, plugin.using(
    InstantQueue("iq")
):
    th = threading.Thread(target=kprof.propagate(elsewhere))
    th.start()
    entered.wait()
    kprof.range("left-open").__enter__()  # never exited: cut at the profile's end
    with kprof.range("outer"):
        with q:
            q.launch("hang")  # not done at the fork; never done in the child
            before = kprof.plugin.now()
            pid = kprof.kernel(os.fork, name="forking-call")()  # a call that forks
        me = "child" if pid == 0 else "parent"
        after = kprof.plugin.now()
        with kprof.range(f"{me}-inner"):
            pass
    kprof.mark(f"{me}-after")
    if pid:
        q.hang.set()
        leave.set()
        th.join()
host = {r.name: (p.start_ns + r.start_ns, r.duration_ns) for r in p.ranges}
out = {
    "ranges": sorted(r.name for r in p.ranges),
    "device_ranges": sorted((r.name, r.backend) for r in p.device_ranges),
    "kernels": sorted((k.name, k.backend) for k in p.kernels),
    "markers": [m.name for m in p.markers],
    "unresolved": [r.name for r in p.unresolved],
    "stack": plugin.stack,
    # The child's part of a range begun before the fork starts at the fork.
    "from_the_fork": [
        before <= host[n][0] <= after for n in ("outer", "left-open") if n in host
    ],
}
if pid:
    os.waitpid(pid, 0)  # the child's line first, whole
print(me, json.dumps(out), flush=True)
if pid == 0:
    os._exit(0)
"""


@pytest.mark.parametrize("pure", [False, True])
def test_a_range_open_across_the_fork_is_the_childs_from_the_fork(pure: bool) -> None:
    """A ``kprof.range`` entered before ``os.fork()`` and exited in the child was dropped
    there (the child had none of its time); a ``kprof.kernel`` call that forked made the
    child wait the whole timeout for the parent's start timestamp and list the call as
    unresolved. Now the child records the range from the fork on, on the host (its device
    timestamps are the parent's), the call leaves no row in the child, the vendor tool's
    range stack is balanced in both, and a range open in another thread (which the child
    does not have) is the parent's only."""
    out = run_script(RANGE_ACROSS_THE_FORK, pure)
    got = dict(line.split(" ", 1) for line in out.splitlines())
    child, parent = json.loads(got["child"]), json.loads(got["parent"])
    assert child == {
        "ranges": ["child-inner", "left-open", "outer"],
        "device_ranges": [["child-inner", "inst"]],
        "kernels": [],
        "markers": ["child-after"],
        "unresolved": [],
        "stack": ["left-open"],  # as the code left it (never exited)
        "from_the_fork": [True, True],
    }
    assert parent == {
        "ranges": ["elsewhere", "left-open", "outer", "parent-inner"],
        "device_ranges": [["outer", "inst"], ["parent-inner", "inst"]],
        "kernels": [["forking-call", "inst"], ["forking-call", "testdev"], ["hang", "testdev"]],
        "markers": ["parent-after"],
        "unresolved": [],
        "stack": ["left-open"],
        "from_the_fork": [False, False],
    }


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


HELD_AT_THE_FORK = """
import importlib, os, sys, threading, time
module, hold, held_now, take = sys.argv[1:5]
m = importlib.import_module(module)

held = threading.Thread(target=getattr(m, hold), args=(0.5,))
held.start()
while not getattr(m, held_now)():  # until the other thread holds the module's locks
    time.sleep(0.0005)
pid = os.fork()
if pid == 0:
    # The child takes them (what its profile end does): free there, whoever held them.
    getattr(m, hold)(0.0)
    getattr(m, take)()
    os._exit(0)
held.join()
deadline = time.monotonic() + 20
while time.monotonic() < deadline:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        print("child", os.waitstatus_to_exitcode(status))
        break
    time.sleep(0.01)
else:
    os.kill(pid, 9)
    print("child stuck")
"""


@pytest.mark.parametrize(
    ("module", "hold", "held", "take"),
    [
        ("kprof_opencl._clhook", "_hold_locks", "_locks_held", "mem_drain"),
        ("kprof_cuda._cupti", "_hold_lock", "_lock_held", "stats"),
    ],
)
def test_a_fork_while_another_thread_holds_a_c_lock(
    module: str, hold: str, held: str, take: str
) -> None:
    """kprof's C locks (the OpenCL hook's two, the CUPTI reader's): a fork while another
    thread held one left the child's copy locked for good (its holder does not exist there),
    so the child's profile end waited for ever. The forking thread now takes them before
    fork() and frees them on both sides."""
    mod = pytest.importorskip(module)
    if not getattr(mod, "supported", True):
        pytest.skip(f"{module} is not built for this platform")
    r = subprocess.run(
        [sys.executable, "-c", HELD_AT_THE_FORK, module, hold, held, take],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "child 0"
