"""A signal opens and closes a window at once in a program that never calls ``kprof.step()``
(issue 22: programs that cannot be edited). The programs signal themselves with ``os.kill``,
whose handler runs before it returns, between known launches: each window's kernels are
exact. Where the signal lands inside kprof's own code (one of its locks held: a harvest,
capture being installed, a window opening) the change waits until that code lets go: not
lost, not deadlocked. Both recorder paths."""

from __future__ import annotations

import faulthandler
import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import kprof
from kprof_core import capture_users, profiler
from kprof_core.low_level import native
from kprof_core.recording.harvest import Harvest
from kprof_core.recording.recorder import Recorder

USR2 = getattr(signal, "SIGUSR2", None)
pytestmark = pytest.mark.skipif(USR2 is None, reason="no SIGUSR2 on this platform")


@pytest.fixture(params=[pytest.param(True, id="compiled"), pytest.param(False, id="pure")])
def path(request: pytest.FixtureRequest) -> Iterator[bool]:
    if request.param and native._module is None:
        pytest.skip("the compiled recorder is not built here")
    native.use_compiled(request.param)
    # A deadlock would hang the run: end it with the stacks instead (a guard, not a time).
    faulthandler.dump_traceback_later(300, exit=True)
    yield request.param
    faulthandler.cancel_dump_traceback_later()
    native.use_compiled(native.os.environ.get(native.ENV, "") in ("", "0"))


def usr2() -> None:
    os.kill(os.getpid(), USR2)  # type: ignore[arg-type]


def names(p: kprof.Profile) -> list[str]:
    return [k.name for k in p.kernels]


def test_each_signal_opens_or_closes_a_window_at_once(
    testbackends: Any, tdq: Any, path: bool
) -> None:
    q = tdq()
    with kprof.profile(window_signal=True) as p, q:
        q.launch("before", 0)
        usr2()
        assert profiler.capture_installed() and kprof.plugin.active() is not None
        for _ in range(3):
            q.launch("first", 0)
        usr2()
        assert not profiler.capture_installed() and kprof.plugin.active() is None
        q.launch("between", 0)
        usr2()
        q.launch("second", 0)
        q.launch("second", 0)
        usr2()
        q.launch("after", 0)
    assert signal.getsignal(USR2) is signal.SIG_DFL  # type: ignore[arg-type]
    w1, w2 = p.windows
    assert names(w1) == ["first"] * 3 and names(w2) == ["second"] * 2
    # No steps: a window is named by its signal.
    assert w1.meta["window"] == {"index": 1, "trigger": "SIGUSR2"}
    assert w2.meta["window"] == {"index": 2, "trigger": "SIGUSR2"}
    assert p.meta["windows"]["signals"] == 4 and p.meta["steps"] == 0
    assert "note" not in p.meta["windows"]
    assert str(p).startswith("kprof: 0 steps, windows on SIGUSR2: 2 window(s)")
    assert "Window 2, on SIGUSR2: Profiled" in str(p)


def test_windows_go_to_on_window_on_its_own_thread_in_order(
    testbackends: Any, tdq: Any, path: bool
) -> None:
    q = tdq()
    got: list[tuple[int, list[str], str]] = []

    def on_window(w: kprof.Profile) -> None:
        got.append((w.meta["window"]["index"], names(w), threading.current_thread().name))
        if w.meta["window"]["index"] == 1:
            raise OSError("disk full")  # said in a warning, not raised into the program

    with pytest.warns(RuntimeWarning, match=r"on_window failed for window 1 \(OSError: disk"):
        with kprof.profile(window_signal=True, on_window=on_window) as p, q:
            for name in ("a", "b"):
                usr2()
                q.launch(name, 0)
                usr2()
            usr2()
            q.launch("c", 0)  # still open at the end: partial, handed on there
    # Closed by a signal: on kprof's thread, never inside the handler; all by the end.
    assert got == [
        (1, ["a"], "kprof-windows"),
        (2, ["b"], "kprof-windows"),
        (3, ["c"], "MainThread"),
    ]
    assert p.meta["windows"]["delivered"] == 3 and p.windows == []


def test_a_signal_while_kprof_holds_a_lock_acts_as_it_lets_go(
    testbackends: Any, tdq: Any, path: bool
) -> None:
    q = tdq()
    with kprof.profile(window_signal=True) as p, q:
        with capture_users._capture_lock:  # as if the signal interrupted a capture install
            usr2()
            assert kprof.plugin.active() is None  # noted, not opened inside the lock
            q.launch("held", 0)
        rec = kprof.plugin.active()  # opened as the lock was let go
        assert rec is not None and profiler.capture_installed()
        q.launch("in", 0)
        with rec.rows.lock:  # as if it interrupted the window's harvest: closing would wait
            usr2()
            assert kprof.plugin.active() is rec
            q.launch("in", 0)
        assert kprof.plugin.active() is None and not profiler.capture_installed()
        q.launch("out", 0)
    [w] = p.windows
    assert names(w) == ["in", "in"] and p.meta["windows"]["signals"] == 2


def test_a_signal_inside_a_back_pressure_harvest_closes_as_it_ends(
    testbackends: Any, tdq: Any, path: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Recorder, "harvest_every", 4)
    real = Harvest.harvest_locked
    fired: list[int] = []

    def signalling(self: Harvest, limit: int | None, deadline: float | None) -> int:
        if not fired:  # the handler runs here, in the harvest, holding its lock
            fired.append(len(self.incoming))
            usr2()
        return real(self, limit, deadline)

    q = tdq()
    with kprof.profile(window_signal=True) as p, q:
        usr2()
        monkeypatch.setattr(Harvest, "harvest_locked", signalling)
        for i in range(10):
            q.launch(f"k{i}", 0)
    # The 4th launch's back-pressure harvest took the signal; the window closed as the
    # harvest let go, before the 5th launch.
    [w] = p.windows
    assert fired == [4] and names(w) == ["k0", "k1", "k2", "k3"]


def test_a_signal_while_a_window_opens_or_closes_acts_after(
    testbackends: Any, tdq: Any, path: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    armed: list[str] = []

    def once(real: Any, where: str) -> Any:
        def call(*args: Any) -> Any:
            if where in armed:
                armed.remove(where)
                usr2()
            return real(*args)

        return call

    # In the window's capture install (kprof's lock held), and in its end after the harvest
    # (no lock held: only the window's change under way says wait).
    monkeypatch.setattr(
        capture_users, "_release_deferred", once(capture_users._release_deferred, "open")
    )
    monkeypatch.setattr(profiler, "_notes", once(profiler._notes, "close"))
    q = tdq()
    with kprof.profile(window_signal=True) as p, q:
        armed.append("open")
        usr2()  # opens; the second signal, in the middle of it, closes it after
        assert kprof.plugin.active() is None and not profiler.capture_installed()
        usr2()
        q.launch("a", 0)
        armed.append("close")
        usr2()  # closes; the fourth signal, in the middle of it, opens the next after
        q.launch("b", 0)
        usr2()  # and this one closes that one
        q.launch("c", 0)
    assert armed == []
    assert [names(w) for w in p.windows] == [[], ["a"], ["b"]]
    assert [w.meta["window"] for w in p.windows][2] == {"index": 3, "trigger": "SIGUSR2"}
    assert p.meta["windows"]["signals"] == 6


def test_steps_after_a_window_opened_at_once_then_steps_rule(
    testbackends: Any, tdq: Any, path: bool
) -> None:
    q = tdq()
    with kprof.profile(window_signal=True) as p, q:
        q.launch("s0-before", 0)
        usr2()  # no kprof.step() yet: opens now
        q.launch("s0", 0)
        kprof.step()
        q.launch("s1", 0)
        kprof.step()
        usr2()  # a window opened at a signal closes at one
        q.launch("s2", 0)
        kprof.step()
        usr2()  # the program calls kprof.step(): the next window opens at the next step
        q.launch("s3", 0)
        kprof.step()
        q.launch("s4", 0)
    w1, w2 = p.windows
    assert names(w1) == ["s0", "s1"] and w1.meta["window"] == {"index": 1, "trigger": "SIGUSR2"}
    assert names(w2) == ["s4"]
    assert w2.meta["window"] == {
        "index": 2,
        "first_step": 4,
        "last_step": 4,
        "trigger": "SIGUSR2",
        "partial": True,
    }


# -- kprof run --signal on a script without kprof.step() --------------------------------------

SCRIPT = """
import os, signal, threading
import kprof
from kprof_testbackend import device

q = device.Queue()

def usr2():
    if not os.environ.get("NO_USR2"):
        os.kill(os.getpid(), signal.SIGUSR2)

def burst(name, n):
    for _ in range(n):
        q.launch(name, 0)

def in_threads():
    t = threading.Thread(target=burst, args=("plain-thread", 2))
    t.start(); t.join()
    t = threading.Thread(target=kprof.propagate(burst), args=("propagated", 2))
    t.start(); t.join()

burst("before", 2)
usr2()
burst("w1", 3)
in_threads()
usr2()
burst("between", 2)
usr2()
burst("w2", 4)
usr2()
burst("after", 1)
q.close()
"""


def kprof_run(tmp_path: Path, pure: bool, *args: str, **env: str) -> Any:
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(SCRIPT))
    e = {k: v for k, v in os.environ.items() if not k.startswith("KPROF_")}
    e.update(KPROF_PLUGINS="testdev", **env)
    if pure:
        e["KPROF_PURE_PYTHON"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "kprof", "run", *args, str(script)],
        capture_output=True,
        text=True,
        timeout=120,  # a guard against a hang, not a measurement
        env=e,
        cwd=tmp_path,
    )


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "pure"])
def test_kprof_run_signal_windows_without_steps(tmp_path: Path, pure: bool) -> None:
    r = kprof_run(tmp_path, pure, "--signal", "-o", "out.kprof")
    assert r.returncode == 0, r.stderr
    assert "kprof: 0 steps, windows on SIGUSR2: 2 window(s)" in r.stdout
    assert "Window 1, on SIGUSR2: Profiled" in r.stdout
    assert "Window 2, on SIGUSR2: Profiled" in r.stdout
    assert sorted(f.name for f in tmp_path.glob("*.kprof")) == [
        "out-0001.kprof",
        "out-0002.kprof",
    ]
    w1, w2 = (kprof.load(tmp_path / f"out-000{i}.kprof") for i in (1, 2))
    # The threads as `kprof run` records them: the script's context and the threads it hands
    # it to (kprof.propagate), not a plain thread's.
    assert sorted(names(w1)) == ["propagated"] * 2 + ["w1"] * 3
    assert names(w2) == ["w2"] * 4
    assert w1.meta["window"] == {"index": 1, "trigger": "SIGUSR2"}
    # The same script under a plain `kprof run`: the same threads recorded.
    r = kprof_run(tmp_path, pure, "-o", "all.kprof", NO_USR2="1")
    assert r.returncode == 0, r.stderr
    every = names(kprof.load(tmp_path / "all.kprof"))
    assert "propagated" in every and "plain-thread" not in every
