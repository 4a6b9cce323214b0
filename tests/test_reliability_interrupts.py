"""Interrupts: KeyboardInterrupt in the profiled block, and while kprof waits for the device."""

from __future__ import annotations

import _thread
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from kprof_testbackend import device, plugin

import kprof
from kprof_core.cli.run import INTERRUPTED

pytestmark = pytest.mark.usefixtures("testbackends")


def test_keyboard_interrupt_in_the_block(tdq: Any) -> None:
    q, pq = tdq(), tdq(plain=True)
    originals = (device.Queue.launch, device.PlainQueue.launch)
    interrupt = KeyboardInterrupt()
    with pytest.raises(KeyboardInterrupt) as ei:
        with kprof.profile() as p:
            with q, kprof.range("r"):
                q.launch("a", 10)
                q.launch("b", 10)
            with pq:
                pq.launch("c")
            raise interrupt
    assert ei.value is interrupt
    assert [k.name for k in p.kernels] == ["a", "b", "c"]
    assert all(k.error is None for k in p.kernels)
    assert [r.name for r in p.ranges] == ["r"]
    assert (device.Queue.launch, device.PlainQueue.launch) == originals
    assert device.Queue.launch is originals[0] and device.PlainQueue.launch is originals[1]
    assert not plugin.live
    assert kprof.plugin.active() is None


def test_keyboard_interrupt_while_resolving(tdq: Any) -> None:
    """Ctrl-C while the profile waits for a device that does not progress: the interrupt
    propagates, resolved records are kept and placed, tokens go back, capture is removed."""
    q = tdq()
    original = device.Queue.launch
    q.hang.clear()
    # The end would wait this long for "hang": far past when the interrupt comes, however
    # loaded the machine (no wall time decides the outcome).
    prof = kprof.profile(timeout=600)

    def interrupt() -> None:
        # Once the profile is ending and "done" is resolved: the end then waits for "hang".
        rec = prof._recorder
        while rec is not None and not (rec._closed and len(rec.rows.tables.table)):
            time.sleep(0.01)
        _thread.interrupt_main()

    timer = threading.Thread(target=interrupt)
    with pytest.raises(KeyboardInterrupt):
        with prof as p, q:
            q.launch("done", 10)
            q.finish()  # "done" completes: it can be resolved before the interrupt
            q.launch("hang")
            q.launch("after")
            timer.start()
    timer.join()
    q.hang.set()
    assert [k.name for k in p.kernels] == ["done"]
    assert p.kernels[0].error is None and p.kernels[0].start_ns >= p.kernels[0].launch_start_ns
    assert device.Queue.launch is original
    assert not plugin.live


# -- Ctrl-C during the end's wait, in the command and the magic (issue 25, item 13) ---------------

SCRIPT = [str(Path(__file__).parent / "scripts" / "interrupted_end.py")]


def test_kprof_run_interrupted_at_the_end_writes_what_it_has(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KPROF_")}
    r = subprocess.run(
        [sys.executable, "-m", "kprof", "run", "-o", "out.kprof", "--html", "out.html", *SCRIPT],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "KPROF_PLUGINS": "testdev"},
        cwd=tmp_path,
    )
    assert r.returncode == 130
    assert "Traceback" not in r.stderr
    assert r.stdout.startswith("script ended\n") and "Device-side activity" in r.stdout
    assert r.stderr.splitlines() == [
        "kprof: wrote out.html",
        "kprof: wrote out.kprof",
        f"kprof run: {INTERRUPTED}",
    ]
    p = kprof.load(tmp_path / "out.kprof")
    assert [k.name for k in p.kernels] == ["done"]
    assert p.meta["interrupted"] == INTERRUPTED
    assert (tmp_path / "out.html").stat().st_size > 0


def test_the_cell_magic_interrupted_at_the_end_keeps_and_writes(
    tdq: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell

    monkeypatch.chdir(tmp_path)
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "kprof")
    q = tdq()
    q.hang.clear()
    ended = threading.Event()
    original = device.Marker.done

    def done_or_interrupt(marker: device.Marker) -> bool:
        done: bool = original.fget(marker)  # type: ignore[attr-defined]
        if ended.is_set() and not done and threading.current_thread() is threading.main_thread():
            ended.clear()
            raise KeyboardInterrupt  # Ctrl-C, the first time the end finds work not done
        return done

    monkeypatch.setattr(device.Marker, "done", property(done_or_interrupt))
    shell.user_ns.update(q=q, ended=ended)
    r = shell.run_cell(
        "%%kprof -v prof -o f.kprof\n"
        "with q:\n"
        "    q.launch('done', 10)\n"
        "    q.finish()\n"
        "    q.launch('hang')\n"
        "ended.set()\n"
    )
    assert isinstance(r.error_in_exec, KeyboardInterrupt)
    p = shell.user_ns.pop("prof")
    assert [k.name for k in p.kernels] == ["done"] and p.meta["interrupted"] == INTERRUPTED
    assert [k.name for k in kprof.load(tmp_path / "f.kprof").kernels] == ["done"]
