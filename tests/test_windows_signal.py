"""Windows opened and closed by a signal (issue 22), for programs that cannot be edited:
``profile(window_signal=...)``, ``kprof run --signal``, ``KPROF_WINDOW_SIGNAL`` and
``KPROF_STEPS``. The programs signal themselves between known steps, so the window's steps
and kernel counts are exact; both recorder paths. Programs without steps:
``test_windows_signal_now.py``."""

from __future__ import annotations

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
from kprof_core import profiler
from kprof_core.low_level import native
from kprof_core.windows import STEPPER

PATHS = [pytest.param(True, id="compiled"), pytest.param(False, id="pure")]
USR2 = getattr(signal, "SIGUSR2", None)
pytestmark = pytest.mark.skipif(USR2 is None, reason="no SIGUSR2 on this platform")


@pytest.fixture(params=PATHS)
def path(request: pytest.FixtureRequest) -> Iterator[bool]:
    if request.param and native._module is None:
        pytest.skip("the compiled recorder is not built here")
    native.use_compiled(request.param)
    yield request.param
    native.use_compiled(native.os.environ.get(native.ENV, "") in ("", "0"))


def signalled_loop(q: Any, steps: int, signal_in: set[int], per_step: int = 2) -> None:
    """Each step launches ``per_step`` kernels named after it; in the steps of ``signal_in``
    the process sends itself SIGUSR2 after its launches, before ``kprof.step()``."""
    for s in range(steps):
        for _ in range(per_step):
            q.launch(f"s{s}", 0)
        if s in signal_in:
            os.kill(os.getpid(), USR2)
        kprof.step()


def test_a_signal_opens_and_the_next_closes_a_window(
    testbackends: Any, tdq: Any, path: bool
) -> None:
    mine: list[int] = []

    def handler(signum: int, frame: Any) -> None:
        mine.append(signum)

    previous = signal.signal(USR2, handler)
    try:
        q = tdq()
        with kprof.profile(window_signal=True) as p, q:
            # Nothing is installed until the first signal is taken at a step.
            assert profiler.capture_installed() is False
            signalled_loop(q, 12, {3, 7})
            assert profiler.capture_installed() is False
        assert signal.getsignal(USR2) is handler  # the user's handler is back
        os.kill(os.getpid(), USR2)
        assert mine == [USR2]  # and gets the signals again, kprof none
    finally:
        signal.signal(USR2, previous)
    [w] = p.windows
    # Signalled in step 3: the window opens at the step() ending it, step 4 is the first;
    # signalled in step 7: it closes at the step() ending step 7.
    assert [k.name for k in w.kernels] == [f"s{s}" for s in range(4, 8) for _ in range(2)]
    assert w.meta["window"] == {"index": 1, "first_step": 4, "last_step": 7, "trigger": "SIGUSR2"}
    assert p.meta["windows"]["signals"] == 2 and p.meta["steps"] == 12
    assert str(p).startswith("kprof: 12 steps, windows on SIGUSR2: 1 window(s)")
    assert "Window 1, steps 4-7: Profiled" in str(p)


def test_signalled_windows_repeat_and_one_open_at_the_end_is_partial(
    testbackends: Any, tdq: Any, path: bool
) -> None:
    q = tdq()
    got: list[kprof.Profile] = []
    with kprof.profile(window_signal=USR2, on_window=got.append) as p, q:
        signalled_loop(q, 10, {1, 2, 5}, per_step=3)
    assert signal.getsignal(USR2) is signal.SIG_DFL
    assert [(w.meta["window"]["first_step"], w.meta["window"]["last_step"]) for w in got] == [
        (2, 2),
        (6, 10),
    ]
    assert [len(w.kernels) for w in got] == [3, 4 * 3]  # steps 6-9; step 10 launched nothing
    assert got[1].meta["window"]["partial"] is True and "partial" not in got[0].meta["window"]
    assert p.windows == [] and p.meta["windows"]["delivered"] == 2


def test_a_handler_the_program_sets_during_the_profile_stays(
    testbackends: Any, tdq: Any, path: bool
) -> None:
    """kprof puts back what was there before only where its own handler is still installed:
    one the program set meanwhile is the program's (it was thrown away, and the program's next
    SIGUSR2 killed it)."""
    mine: list[int] = []

    def handler(signum: int, frame: Any) -> None:
        mine.append(signum)

    q = tdq()
    try:
        with kprof.profile(window_signal=True), q:
            signalled_loop(q, 4, {1})
            signal.signal(USR2, handler)  # the program's own, from here on
            signalled_loop(q, 2, set())
        assert signal.getsignal(USR2) is handler
        os.kill(os.getpid(), USR2)
        assert mine == [USR2]
    finally:
        signal.signal(USR2, signal.SIG_DFL)


def test_window_signal_outside_the_main_thread_raises_and_leaves_nothing(
    testbackends: Any,
) -> None:
    err: list[BaseException] = []

    def run() -> None:
        try:
            with kprof.profile(window_signal=True):
                pass
        except ValueError as exc:
            err.append(exc)
        assert STEPPER.get() is None

    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert len(err) == 1 and "main thread" in str(err[0])
    assert signal.getsignal(USR2) is signal.SIG_DFL


@pytest.mark.parametrize(
    "kw, exc, says",
    [
        ({"window_signal": "USR2"}, TypeError, "True or a signal number"),
        ({"window_signal": 9}, ValueError, "not a signal a handler can catch"),
        ({"window_signal": True, "schedule": kprof.schedule()}, ValueError, "no schedule="),
    ],
)
def test_bad_window_signal(kw: dict[str, Any], exc: type[Exception], says: str) -> None:
    with pytest.raises(exc, match=says):
        kprof.profile(**kw)


# -- kprof run: --signal, KPROF_WINDOW_SIGNAL, KPROF_STEPS -------------------------------------


SCRIPT = """
import os, signal
import kprof
from kprof_testbackend import device
q = device.Queue()
for s in range(20):
    for _ in range(3):
        q.launch(f"s{s}", 0)
    if s in (4, 9) and os.environ.get("SEND_USR2"):
        os.kill(os.getpid(), signal.SIGUSR2)
    kprof.step()
q.close()
"""


def kprof_run(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(SCRIPT))
    e = {k: v for k, v in os.environ.items() if not k.startswith("KPROF_")}
    e.update(KPROF_PLUGINS="testdev", **env)
    return subprocess.run(
        [sys.executable, "-m", "kprof", "run", *args, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        env=e,
        cwd=tmp_path,
    )


@pytest.mark.parametrize("how", ["option", "env"])
def test_kprof_run_signal_window(tmp_path: Path, how: str) -> None:
    if how == "option":
        r = kprof_run(tmp_path, "--signal", "-o", "out.kprof", SEND_USR2="1")
    else:
        r = kprof_run(tmp_path, "-o", "out.kprof", KPROF_WINDOW_SIGNAL="1", SEND_USR2="1")
    assert r.returncode == 0, r.stderr
    assert "kprof: 20 steps, windows on SIGUSR2: 1 window(s)" in r.stdout
    assert "Window 1, steps 5-9: Profiled" in r.stdout
    [f] = tmp_path.glob("*.kprof")
    w = kprof.load(f)
    assert f.name == "out-0001.kprof" and len(w.kernels) == 5 * 3
    assert sorted({k.name for k in w.kernels}) == [f"s{s}" for s in range(5, 10)]


def test_kprof_run_signal_keeps_a_handler_the_script_sets(tmp_path: Path) -> None:
    script = tmp_path / "own.py"
    script.write_text(
        textwrap.dedent(
            """
            import atexit, os, signal
            got = []
            signal.signal(signal.SIGUSR2, lambda s, f: got.append(s))  # the script's own
            os.kill(os.getpid(), signal.SIGUSR2)
            # After the script (and kprof run's profile) ended: still the script's handler.
            atexit.register(lambda: (os.kill(os.getpid(), signal.SIGUSR2), print("handled", len(got))))
            """
        )
    )
    e = {k: v for k, v in os.environ.items() if not k.startswith("KPROF_")}
    e.update(KPROF_PLUGINS="testdev")
    plain = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, env=e
    )
    r = subprocess.run(
        [sys.executable, "-m", "kprof", "run", "--signal", str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        env=e,
        cwd=tmp_path,
    )
    assert plain.returncode == 0 and "handled 2" in plain.stdout
    assert r.returncode == 0, r.stderr
    assert "handled 2" in r.stdout


def test_kprof_steps_from_the_environment(tmp_path: Path) -> None:
    r = kprof_run(tmp_path, "-o", "out.kprof", KPROF_STEPS="3:5")
    assert r.returncode == 0, r.stderr
    assert "Window 1, steps 3-4: Profiled" in r.stdout
    w = kprof.load(tmp_path / "out-0001.kprof")
    assert [k.name for k in w.kernels] == ["s3"] * 3 + ["s4"] * 3
    # The command line wins over the environment.
    r = kprof_run(tmp_path, "--steps", "7:8", "-o", "cli.kprof", KPROF_STEPS="3:5")
    assert "Window 1, steps 7-7: Profiled" in r.stdout


@pytest.mark.parametrize(
    "args, env, says",
    [
        (["--signal", "--steps", "1:2"], {}, "give it no --steps"),
        (["--signal", "--every", "5"], {}, "not --signal"),
        ([], {"KPROF_STEPS": "3:5", "KPROF_WINDOW_SIGNAL": "1"}, "both set"),
        ([], {"KPROF_STEPS": "3"}, "KPROF_STEPS='3': expected FIRST:LAST"),
        ([], {"KPROF_WINDOW_SIGNAL": "maybe"}, "KPROF_WINDOW_SIGNAL='maybe' is not understood"),
    ],
)
def test_kprof_run_bad_window_triggers_exit_2(
    tmp_path: Path, args: list[str], env: dict[str, str], says: str
) -> None:
    r = kprof_run(tmp_path, *args, **env)
    assert r.returncode == 2 and says in r.stderr, r.stderr


@pytest.mark.skipif(not hasattr(signal, "SIGRTMIN"), reason="no real-time signals here")
def test_a_signal_without_a_name(testbackends: Any, tdq: Any) -> None:
    num = signal.SIGRTMIN + 1
    q = tdq()
    with kprof.profile(window_signal=num) as p, q:
        for s in range(4):
            q.launch(f"s{s}", 0)
            if s in (0, 2):
                os.kill(os.getpid(), num)
            kprof.step()
    [w] = p.windows
    assert w.meta["window"]["trigger"] == f"signal {num}"
    assert [k.name for k in w.kernels] == ["s1", "s2"]
    assert signal.getsignal(num) is signal.SIG_DFL
