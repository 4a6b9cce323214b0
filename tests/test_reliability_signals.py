"""Nothing kprof does in a signal handler can deadlock (issue 25, item 14). A Python signal
handler runs on the interrupted thread between two bytecodes, kprof's own code included; here
the signal is sent from inside a plugin's hook, so the handler runs exactly there (while the
harvest, or the capture install, holds its lock). Each case runs in a child process, on both
recorder paths: before the fix it hung (the subprocess timeout is only a guard). SIGALRM, not
SIGUSR1: PoCL (the OpenCL backend's CPU device here) takes SIGUSR1 for itself."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGALRM"), reason="POSIX signals")

PRELUDE = """
import os, signal
import kprof
from kprof_core.recording.recorder import Recorder
from kprof_testbackend.instant import InstantClock, InstantQueue
"""

MARK_DURING_HARVEST = """
Recorder.harvest_every, Recorder.max_pending = 16, 64
fired = []

class Signalling(InstantClock):
    @kprof.plugin.hookimpl
    def timestamp_done(self, backend, token):
        if not fired:  # the first harvest (back-pressure): the handler runs inside it
            fired.append(1)
            os.kill(os.getpid(), signal.SIGALRM)
        return True

def handler(signum, frame):
    for i in range(200):  # past max_pending: back-pressure would wait for the harvest
        kprof.mark(f"m{i}")

signal.signal(signal.SIGALRM, handler)
plugin = Signalling()
kprof.register_backend(plugin, "sig")
with kprof.profile(backends=["sig"]) as p, plugin.using(InstantQueue("q")):
    for _ in range(100):
        with kprof.range("r"):
            pass
print("markers", len(p.markers), "ranges", len(p.device_ranges), "fired", len(fired))
"""

PROFILE_DURING_INSTALL = """
from kprof_core import profiler
got = []

class SignalOnInstall(InstantClock):
    @kprof.plugin.hookimpl
    def install_capture(self, backend):
        os.kill(os.getpid(), signal.SIGALRM)  # the handler runs during the install

def handler(signum, frame):
    with kprof.profile(backends=["sig"]) as inner:
        kprof.mark("in the handler")
    got.append(inner)

signal.signal(signal.SIGALRM, handler)
plugin = SignalOnInstall()
kprof.register_backend(plugin, "sig")
with kprof.profile(backends=["sig"]) as p:
    kprof.mark("outer")
print("inner", [m.name for m in got[0].markers], "outer", [m.name for m in p.markers])
print("users left", dict(profiler._capture_users), "installed", len(profiler._installed))
"""


def run_child(code: str, pure: bool) -> str:
    env = dict(os.environ)
    if pure:
        env["KPROF_PURE_PYTHON"] = "1"
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(PRELUDE + code)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,  # a guard against the deadlock, not a measurement
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.parametrize("pure", [False, True])
def test_mark_in_a_handler_during_a_back_pressure_harvest(pure: bool) -> None:
    out = run_child(MARK_DURING_HARVEST, pure)
    assert out.split() == ["markers", "200", "ranges", "100", "fired", "1"]


@pytest.mark.parametrize("pure", [False, True])
def test_a_profile_entered_in_a_handler_during_install_capture(pure: bool) -> None:
    out = run_child(PROFILE_DURING_INSTALL, pure)
    lines = out.splitlines()
    assert lines[0] == "inner ['in the handler'] outer ['outer']"
    assert lines[1] == "users left {} installed 0"  # the counts stayed consistent
