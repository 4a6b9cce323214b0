"""The views understand windows (issue 22): ``kprof show DIR`` lists a run's windows (steps,
records, device time), ``--window N`` shows one; the HTML page's title and the notebook's
frame and heading carry a window's steps. The simulated test device: exact device times."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import kprof
from kprof_core.cli.main import main


@pytest.fixture
def run_dir(testbackends: Any, tdq: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Windows of steps 1-2, 4-5 and 7-8; step s launches two kernels of 10 * (s + 1) µs, so
    the windows hold 100, 220 and 340 µs of device time."""
    monkeypatch.setenv("KPROF_TESTDEV_CLOCK", "simulated")
    q = tdq()
    out = tmp_path / "run"
    sched = kprof.schedule(wait=1, active=2, repeat=3)
    with kprof.profile(schedule=sched, on_window=kprof.save_windows(out)), q:
        for s in range(10):
            q.launch("k", 10 * (s + 1))
            q.launch("k", 10 * (s + 1))
            kprof.step()
    (out / "notes.txt").write_text("not a profile")
    return out


def test_show_lists_the_windows_of_a_directory(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["show", str(run_dir)]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert rows[0] == ["window", "steps", "records", "device", "time", "span", "file"]
    got = [(r[0], r[1], r[2], r[3] + " " + r[4], r[-1]) for r in rows[1:]]
    assert got == [
        ("1", "1-2", "4", "100 µs", "window-0001.kprof"),
        ("2", "4-5", "4", "220 µs", "window-0002.kprof"),
        ("3", "7-8", "4", "340 µs", "window-0003.kprof"),
    ]


def test_show_escapes_what_a_directory_listing_takes_from_its_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A window's steps and a file's name are the files' text: an OSC retitle or a CSI clear
    in them is printed as an escape, never sent to the terminal."""
    p = kprof.Profile(backends=[])
    p.meta["window"] = {"index": 1, "first_step": "\x1b]0;PWNED\x07", "last_step": "\x1b[2J"}
    p.save(tmp_path / "w\x1b[31m-0001.kprof")
    assert main(["show", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert r"\x1b]0;PWNED\x07-\x1b[2J" in out and r"w\x1b[31m-0001.kprof" in out


def test_show_window_n_of_a_directory(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(run_dir), "--window", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Window 2, steps 4-5: Profiled ")
    assert "recording 0 ranges, 4 kernels and 0 copies." in out
    assert main(["show", str(run_dir), "--window", "9"]) == 2
    assert "no window 9; it has windows 1, 2, 3" in capsys.readouterr().err
    one = str(run_dir / "window-0001.kprof")
    assert main(["show", one, "--window", "1"]) == 2
    assert "--window needs a directory of windows" in capsys.readouterr().err
    assert main(["show", one]) == 0
    assert capsys.readouterr().out.startswith("Window 1, steps 1-2: Profiled ")


def test_html_and_notebook_carry_the_windows_steps(run_dir: Path, tmp_path: Path) -> None:
    w = kprof.load(run_dir / "window-0002.kprof")
    page = tmp_path / "w.html"
    assert main(["show", str(run_dir / "window-0002.kprof"), "--html", str(page)]) == 0
    text = page.read_text(encoding="utf-8")
    title = re.search(r"<title>(.*)</title>", text)
    assert title is not None and title.group(1).endswith(", window 2, steps 4-5")
    assert "<h2>Summary of window 2, steps 4-5</h2>" in text
    nb = w._repr_html_()
    assert nb is not None
    assert 'title="kprof timeline, window 2, steps 4-5"' in nb
    assert "<h2>Summary of window 2, steps 4-5</h2>" in nb


def test_a_profile_that_is_no_window_keeps_its_titles(testbackends: Any, tdq: Any) -> None:
    q = tdq()
    with kprof.profile() as p, q:
        q.launch("k", 0)
    nb = p._repr_html_()
    assert nb is not None and 'title="kprof timeline"' in nb and "<h2>Summary</h2>" in nb
