"""``Profile.diff(by="line")`` and ``kprof diff --by line``: the same kernel launched from two
lines is two rows, matched across runs by the line's label, on saved files too."""

from __future__ import annotations

import inspect
import json
from array import array
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import kprof
from kprof_core.cli.main import main
from kprof_core.data.records import KERNEL, PLACED, HostTable, QueueRecord, ThreadRecord
from kprof_core.data.sites import Site
from kprof_core.low_level import native
from kprof_core.result import Profile


def two_lines(root: str, at_x: list[int], at_y: list[int], step: int = 1000) -> Profile:
    """Kernel ``k`` launched from x.py:1 (durations ``at_x``) and y.py:2 (``at_y``), under
    ``root`` (two checkouts of one program), in a range ``step`` that ends at y.py:2."""
    p = Profile(backends=["testdev"])
    p.names = ["k", "step"]
    p.queues = [QueueRecord("testdev", "dev", "queue 1", "testdev:0")]
    p.threads = [ThreadRecord(1, "MainThread")]
    p.sites = [Site(f"{root}/x.py", 1, "f"), Site(f"{root}/y.py", 2, "g")]
    now = p.start_ns = 1_000_000
    for site, durs in ((0, at_x), (1, at_y)):
        for d in durs:
            p.table.append(0, KERNEL, 0, 0, now, now + 10, now + 20, d, -1, PLACED, site)
            now += d + 100
    p.host.append(1, HostTable.RANGE, 0, p.start_ns, p.start_ns + step, 1)
    p.end_ns = now
    return p


BEFORE = two_lines("/home/a/proj", [100, 110, 120, 130, 140, 150], [50, 51, 52, 53, 54, 55])
AFTER = two_lines("/ci/proj", [200, 210, 220, 230, 240, 250], [52, 50, 55, 51, 53, 54], 3000)


def test_by_name_one_row_by_line_a_row_per_line() -> None:
    [k] = BEFORE.diff(AFTER).section("device")
    assert (k.name, k.site, k.calls_before, k.calls_after) == ("k", None, 12, 12)
    d = BEFORE.diff(AFTER, by="line")
    assert d.by == "line"
    rows = d.section("device")
    assert [(r.label, r.status, r.calls_before, r.total_before, r.total_after) for r in rows] == [
        ("k @ x.py:1 f", "slower", 6, 750, 1350),
        ("k @ y.py:2 g", "same", 6, 315, 315),
    ]
    assert d.row("k", site="x.py:1 f").ratio == pytest.approx(225 / 125)
    assert [r.label for r in d.slowdowns(1.5)] == ["k @ x.py:1 f"]
    # The same time, split by line: the totals of each section are the by-name ones.
    by_name = BEFORE.diff(AFTER)
    for section in ("device", "device_ranges", "host"):
        for side in ("total_before", "total_after"):
            assert sum(getattr(r, side) for r in d.section(section)) == sum(
                getattr(r, side) for r in by_name.section(section)
            ), (section, side)
    # Host rows by their own site: the range ended at y.py:2, launches' calls where launched.
    assert {(r.name, r.site) for r in d.section("host")} == {
        ("step", "y.py:2 g"), ("k", "x.py:1 f"), ("k", "y.py:2 g")
    }  # fmt: skip
    with pytest.raises(KeyError, match=r"at 'z\.py:3 h'; rows: \['k @ x\.py:1 f'"):
        d.row("k", site="z.py:3 h")
    with pytest.raises(ValueError, match='"name", "line" or "config"'):
        BEFORE.diff(AFTER, by="file")


def test_a_line_only_one_side_has_is_new_or_gone_and_unknown_sites_are_rows() -> None:
    after = two_lines("/ci/proj", [100] * 6, [50] * 6)
    after.sites[1] = Site("/ci/proj/y.py", 7, "g")  # the code moved
    after.table.site[0] = -1  # one launch whose site is unknown
    rows = {r.label: r.status for r in BEFORE.diff(after, by="line").section("device")}
    assert rows == {
        "k @ x.py:1 f": "same",
        "k @ y.py:2 g": "gone",
        "k @ y.py:7 g": "new",
        "k @ (site unknown)": "new",
    }


@pytest.fixture
def saved(tmp_path: Path) -> tuple[str, str]:
    pa, pb = tmp_path / "base.kprof", tmp_path / "new.kprof"
    BEFORE.save(pa)
    AFTER.save(pb)
    return str(pa), str(pb)


def test_kprof_diff_by_line_on_saved_files(
    saved: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    pa, pb = saved
    assert main(["diff", "--by", "line", pa, pb]) == 0
    out = capsys.readouterr().out
    assert out == kprof.load(pa).diff(kprof.load(pb), by="line").report((pa, pb)) + "\n"
    assert "by line (a row per name and launch site)" in out
    lines = out.splitlines()
    device = lines.index("Device-side activity (kernels and copies):")
    assert lines[device + 3].endswith("slower (p=0.0022)  k @ x.py:1 f")
    assert lines[device + 4].endswith("same  k @ y.py:2 g")
    assert main(["diff", "--by", "line", "--json", pa, pb]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["by"] == "line"
    assert [(r["name"], r["site"]) for r in data["rows"] if r["section"] == "device"] == [
        ("k", "x.py:1 f"),
        ("k", "y.py:2 g"),
    ]
    assert main(["diff", "--by", "line", "--fail-above", "1.5", pa, pb]) == 1
    assert "1 significant slowdown above 1.5x: k @ x.py:1 f 1.80x" in capsys.readouterr().err
    assert main(["diff", pa, pb]) == 0  # by name, the default: one row
    assert "k @" not in capsys.readouterr().out


def test_by_line_without_sites_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plain = two_lines("/x", [1, 2], [3, 4])
    plain.sites = []
    plain.table.site = array("q", [-1] * len(plain.table))
    plain.host.site = array("q", [-1] * len(plain.host))
    path = str(tmp_path / "plain.kprof")
    plain.save(path)
    assert main(["diff", "--by", "line", path, path]) == 0
    out = capsys.readouterr()
    assert "neither profile knows its launch sites" in out.err
    assert "k @ (site unknown)" in out.out


# -- captured -----------------------------------------------------------------------------------


@pytest.fixture(params=["compiled", "pure"])
def path(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "compiled" and native.compiled() is None:
        pytest.skip("the compiled recorder is not built here")
    native.use_compiled(request.param == "compiled")
    try:
        yield request.param
    finally:
        native.use_compiled(True)


def launches(q: Any, n: int) -> None:
    for _ in range(n):
        q.launch("k", 20)  # here
    q.launch("k", 20)  # and there


def test_captured_profiles_compare_by_line(
    path: str, testbackends: Any, tdq: Callable[..., Any], tmp_path: Path
) -> None:
    q = tdq()
    saved = []
    for n in (2, 3):
        with kprof.profile(sites=True) as p, q:
            launches(q, n)
        saved.append(tmp_path / f"{n}.kprof")
        p.save(saved[-1])
    before, after = (kprof.load(s) for s in saved)
    src, first = inspect.getsourcelines(launches)
    here, there = (
        first + next(i for i, s in enumerate(src) if t in s) for t in ("# here", "# and")
    )
    rows = before.diff(after, by="line").section("device")
    # (Device times are the test device's wall clock: only the rows and counts are asserted.)
    assert sorted((r.label, r.calls_before, r.calls_after) for r in rows) == [
        (f"k @ test_diff_by_line.py:{here} launches", 2, 3),
        (f"k @ test_diff_by_line.py:{there} launches", 1, 1),
    ]
