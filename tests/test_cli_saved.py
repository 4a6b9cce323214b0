"""``kprof show`` and ``kprof diff`` on saved profiles: the same report and exports as the
profile itself gives, comparisons with an exit code for CI, and clear errors for bad files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_html_browser import chromium_fixture, embedded_data, rendered  # noqa: F401
from tracecheck import synthetic

import kprof
from kprof_core.cli.main import build_parser, main
from kprof_core.result import Profile


def slowed(p: Profile, name: str, factor: float, extra: int = 0) -> Profile:
    nid = p.names.index(name)
    t = p.table
    for i in range(len(t)):
        if t.name[i] == nid:
            t.duration[i] = int(t.duration[i] * factor) + extra
    return p


@pytest.fixture
def saved(tmp_path: Path) -> tuple[Profile, Path]:
    p = synthetic(200, threads=2, seed=4, host_timed_every=13, unresolved_every=17)
    p.trace = True
    path = tmp_path / "run.kprof"
    p.save(path)
    return p, path


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    assert commands is not None
    assert {"backends", "demo", "run", "merge", "show", "diff"} <= set(commands)
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for c in commands:
        assert f"\n    {c} " in out, f"kprof --help does not list {c}"


def test_show_prints_what_print_did(
    saved: tuple[Profile, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    p, path = saved
    assert main(["show", str(path)]) == 0
    assert capsys.readouterr().out == str(p) + "\n"
    assert "Trace:" in str(p), "profiled with trace=True: the trace is part of print(p)"
    p.trace = False
    p.save(path)
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert out == p.report() + "\n" and "Trace:" not in out
    assert main(["show", "-t", str(path)]) == 0
    assert capsys.readouterr().out == p.report(trace=True) + "\n"


def test_show_exports_what_the_profile_exports(
    saved: tuple[Profile, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    p, path = saved
    page, trace = tmp_path / "a.html", tmp_path / "a.json"
    assert main(["show", str(path), "--html", str(page), "--trace", str(trace)]) == 0
    assert "kprof: wrote" in capsys.readouterr().err
    p.export_html(tmp_path / "b.html")
    p.export_chrome_trace(tmp_path / "b.json")
    assert page.read_text() == (tmp_path / "b.html").read_text()
    assert trace.read_text() == (tmp_path / "b.json").read_text()
    assert main(["show", "--json", str(path)]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(p.to_json()))


@pytest.mark.parametrize(
    "content, why",
    [
        (b"hello, not a profile", "not a kprof profile"),
        (b"\x89KPROF\r\n\x01\x00", "truncated"),
    ],
)
def test_bad_files_get_one_line_and_exit_2(tmp_path: Path, content: bytes, why: str) -> None:
    bad = tmp_path / "bad.kprof"
    bad.write_bytes(content)
    good = tmp_path / "good.kprof"
    synthetic(10).save(good)
    for argv in (["show", str(bad)], ["diff", str(good), str(bad)], ["diff", str(bad), str(good)]):
        r = subprocess.run([sys.executable, "-m", "kprof", *argv], capture_output=True, text=True)
        assert r.returncode == 2, r
        assert why in r.stderr and str(bad) in r.stderr
        assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_missing_file_and_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(tmp_path / "nope.kprof")]) == 2
    assert "nope.kprof: no such file" in capsys.readouterr().err
    assert main(["show", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err


# -- diff -----------------------------------------------------------------------------------------


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    a = synthetic(600, seed=1)
    b = slowed(synthetic(600, seed=2), "kernel_a", 1.5, 4000)
    pa, pb = tmp_path / "base.kprof", tmp_path / "new.kprof"
    a.save(pa)
    b.save(pb)
    return pa, pb


def test_diff_prints_the_comparison(
    pair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    pa, pb = pair
    assert main(["diff", str(pa), str(pb)]) == 0
    out = capsys.readouterr().out
    expected = kprof.load(pa).diff(kprof.load(pb)).report((str(pa), str(pb)))
    assert out == expected + "\n"
    lines = out.splitlines()
    device = lines.index("Device-side activity (kernels and copies):")
    assert lines[device + 3].endswith("slower (p<0.0001)  kernel_a")
    assert "Host-side activity:" in lines


def test_diff_json(pair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    pa, pb = pair
    assert main(["diff", "--json", str(pa), str(pb)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["before"] == str(pa) and data["after"] == str(pb)
    first = data["rows"][0]
    assert first["section"] == "device" and first["name"] == "kernel_a"
    assert first["status"] == "slower" and first["significant"] is True
    # The ranges around kernel_a are slower with it: a range's device time is its work's.
    step = [r for r in data["rows"] if r["section"] == "device_ranges"]
    assert {r["status"] for r in step} == {"slower"}
    assert {r["status"] for r in data["rows"][1:] if r not in step} == {"same"}


def test_fail_above_exits_1_only_for_a_significant_slowdown_above_the_ratio(
    pair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    pa, pb = pair
    ratio = kprof.load(pa).diff(kprof.load(pb)).row("kernel_a").ratio
    assert ratio is not None and 1.5 < ratio < 3
    assert main(["diff", str(pa), str(pb), "--fail-above", "1.10"]) == 1
    err = capsys.readouterr().err
    assert "2 significant slowdowns above 1.1x: kernel_a" in err
    assert ", step " in err  # the range around it, by its work
    assert main(["diff", str(pa), str(pb), "--fail-above", "3"]) == 0
    # The other way round, kernel_a got faster: nothing fails.
    assert main(["diff", str(pb), str(pa), "--fail-above", "1.10"]) == 0
    capsys.readouterr()
    # Noise is not a slowdown: another run of the same workload passes.
    other = pa.with_name("other.kprof")
    synthetic(600, seed=7).save(other)
    assert main(["diff", str(pa), str(other), "--fail-above", "1.01"]) == 0
    assert main(["diff", str(pa), str(pb), "--fail-above", "0"]) == 2
    assert "--fail-above takes a ratio" in capsys.readouterr().err


def test_diff_html_holds_both_profiles_and_the_comparison(
    pair: tuple[Path, Path], tmp_path: Path, chromium: str
) -> None:
    pa, pb = pair
    page = tmp_path / "diff.html"
    assert main(["diff", str(pa), str(pb), "--html", str(page)]) == 0
    text = page.read_text()
    assert "<h2>Comparison</h2>" in text and '<tr data-status="slower">' in text
    assert f"<h2>before: {pa}</h2>" in text and f"<h2>after: {pb}</h2>" in text
    data = embedded_data(text)
    assert [p["label"] for p in data["profiles"]] == [f"before: {pa}", f"after: {pb}"]
    # Both runs start at the left edge, whenever they ran.
    assert [p["start_ns"] for p in data["profiles"]] == [0, 0]
    dom = rendered(chromium, page, tmp_path)
    assert dom.status.get("data-errors") == "0" and dom.status.get("data-state") == "ready"
    assert dom.procs[0] == f"before: {pa}"
