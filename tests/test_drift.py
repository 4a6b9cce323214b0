"""Drift between windows (issue 22): ``kprof.drift`` and ``kprof drift DIR`` on a synthetic run
of the simulated test device (exact durations): a kernel that slows by 1.5x from window 6 on
is flagged, a steady one with a fixed pseudo-random spread is not."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

import kprof
from kprof_core.cli.main import main

CALLS = 8  # per kernel per window: enough for the exact rank test to be sure


@pytest.fixture
def run_dir(testbackends: Any, tdq: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Ten windows of one step each, saved as window-0001.kprof ... window-0010.kprof."""
    monkeypatch.setenv("KPROF_TESTDEV_CLOCK", "simulated")
    q = tdq()
    out = tmp_path / "run"
    sched = kprof.schedule(wait=1, active=1, repeat=10)
    with kprof.profile(schedule=sched, on_window=kprof.save_windows(out)), q:
        for step in range(20):
            w = step // 2  # the window this step belongs to (odd steps are recorded)
            rnd = random.Random(step)
            for _ in range(CALLS):
                q.launch("slows", 150 if w >= 5 else 100)
                q.launch("steady", rnd.uniform(45, 55))
            kprof.step()
    return out


def windows(d: Path) -> list[kprof.Profile]:
    return [kprof.load(f) for f in sorted(d.iterdir())]


def test_a_slowdown_is_flagged_and_a_steady_kernel_is_not(run_dir: Path) -> None:
    ws = windows(run_dir)
    assert len(ws) == 10
    d = kprof.drift(ws)
    assert d.labels[0] == "step 1" and d.labels[5] == "step 11"
    slows, steady = d.row("slows"), d.row("steady")
    assert slows.flagged == [""] * 5 + ["slower"] * 5
    assert slows.ratios == [1.0] * 5 + [1.5] * 5
    assert slows.medians[0] == 100_000 and slows.medians[-1] == 150_000
    assert slows.status == "slower" and slows.worst == (5, 1.5)
    assert steady.status == "steady" and not any(steady.flagged)
    assert [r.name for r in d.rows] == ["slows", "steady"]  # most drifted first
    assert [r.name for r in d.slowdowns(1.4)] == ["slows"] and d.slowdowns(1.6) == []
    text = str(d)
    assert "Drift of device time per call across 10 windows" in text
    assert "p < 0.0011 (alpha 0.01 over 9 comparisons)" in text
    line = next(x for x in text.splitlines() if x.endswith(" slows"))
    assert "1.50× (step 11)" in line and "5 of 9" in line and "▁▁▁▁▁█████" in line
    steady_line = next(x for x in text.splitlines() if x.endswith(" steady"))
    assert set(steady_line.split()[-2]) <= set("▁▂▃▄")  # a 10 % spread: low bars


def test_kprof_drift_dir_and_fail_above(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["drift", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert "slower" in out and "steady" in out
    assert main(["drift", str(run_dir), "--fail-above", "1.2"]) == 1
    err = capsys.readouterr().err
    assert "1 significant slowdown above 1.2x: slows 1.50x (step 11)" in err
    assert main(["drift", str(run_dir), "--fail-above", "1.6"]) == 0
    capsys.readouterr()
    assert main(["drift", str(run_dir), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["windows"]) == 10 and data["rows"][0]["flagged"][5] == "slower"


def test_only_the_first_windows_steady(run_dir: Path) -> None:
    # Windows 1-5 alone: nothing drifted.
    d = kprof.drift(windows(run_dir)[:5])
    assert [r.status for r in d.rows] == ["steady", "steady"]


def test_drift_needs_two_windows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match="at least two"):
        kprof.drift([kprof.Profile()])
    (tmp_path / "empty").mkdir()
    assert main(["drift", str(tmp_path / "empty")]) == 2
    assert "no .kprof files" in capsys.readouterr().err


def test_kprof_show_lists_a_directory_of_windows(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["show", str(run_dir)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 11 and lines[0].split()[:3] == ["window", "steps", "records"]
    first, last = lines[1].split(), lines[10].split()
    assert first[:3] == ["1", "1-1", "16"] and first[-1] == "window-0001.kprof"
    assert last[:3] == ["10", "19-19", "16"] and last[-1] == "window-0010.kprof"


def test_windows_of_three_calls_are_too_few_not_steady(
    testbackends: Any, tdq: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # 3 calls a window: with 2 later windows the test needs p < 0.005, and 3 against 3 calls
    # cannot go below 2 / C(6, 3) = 0.1, so a kernel at 6.3x its first median is not "steady".
    monkeypatch.setenv("KPROF_TESTDEV_CLOCK", "simulated")
    q = tdq()
    out = tmp_path / "run"
    sched = kprof.schedule(wait=1, active=1, repeat=3)
    with kprof.profile(schedule=sched, on_window=kprof.save_windows(out)), q:
        for step in range(6):
            w = step // 2
            for _ in range(3):
                q.launch("grows", 630 if w == 2 else 100)
            for _ in range(8 * (w + 1)):  # called more often each window, same time per call
                q.launch("often", 50)
            kprof.step()
    d = kprof.drift(windows(out))
    grows, often = d.row("grows"), d.row("often")
    assert grows.status == "too few calls" and not any(grows.flagged)
    assert grows.ratios[-1] == pytest.approx(6.3)
    assert often.status == "steady"  # 8 or more calls a window: the test can tell
    # Per step: each window holds one step, so its device time per step is its total.
    assert often.per_step == [400_000, 800_000, 1_200_000]
    assert d.calls_needed == 6 and [r.name for r in d.undecided()] == ["grows"]
    text = str(d)
    assert "400 µs → 1.2 ms" in text
    assert "at least 6 calls a window are needed to flag one" in text
    assert main(["drift", str(out), "--fail-above", "1.1"]) == 0
