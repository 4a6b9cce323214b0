"""Grouping saved profiles by launch configuration on the command line: ``kprof show --by
config`` and ``kprof run --by config`` print ``p.report(by=("name", "config"))``, and
``kprof diff --by config`` (``Profile.diff(by="config")``) compares a kernel's
configurations as rows of their own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from array import array
from pathlib import Path

import pytest

import kprof
from kprof_core.cli.main import main
from kprof_core.data.records import KERNEL, PLACED, HostTable, QueueRecord, ThreadRecord
from kprof_core.result import Profile

SMALL, LARGE = "global 64 local 64", "global 4096 local 64"


def configured(small: list[int], large: list[int], plain: list[int]) -> Profile:
    """Kernel ``k`` launched with two configurations (durations ``small`` and ``large``),
    ``j`` with none (``plain``), in a host range ``step``."""
    p = Profile(backends=["testdev"])
    p.names = ["k", "j", "step"]
    p.queues = [QueueRecord("testdev", "dev", "queue 1", "testdev:0")]
    p.threads = [ThreadRecord(1, "MainThread")]
    p.configs = [SMALL, LARGE]
    now = p.start_ns = 1_000_000
    for name, cfg, durs in ((0, 0, small), (0, 1, large), (1, -1, plain)):
        for d in durs:
            p.table.append(name, KERNEL, 0, 0, now, now + 10, now + 20, d, -1, PLACED, -1, cfg)
            now += d + 100
    p.host.append(2, HostTable.RANGE, 0, p.start_ns, now, -1)
    p.end_ns = now
    return p


BEFORE = configured([100, 110, 120, 130, 140, 150], [900, 910, 920, 930, 940, 950], [7, 8])
AFTER = configured([101, 111, 119, 131, 139, 151], [1800, 1810, 1820, 1830, 1840, 1850], [7, 8])


@pytest.fixture
def saved(tmp_path: Path) -> tuple[str, str]:
    pa, pb = tmp_path / "base.kprof", tmp_path / "new.kprof"
    BEFORE.save(pa)
    AFTER.save(pb)
    return str(pa), str(pb)


def test_show_by_config_prints_the_report_by_name_and_config(
    saved: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    pa, _ = saved
    assert main(["show", "--by", "config", pa]) == 0
    out = capsys.readouterr().out
    assert out == kprof.load(pa).report(by=("name", "config")) + "\n"
    lines = out.splitlines()
    top = lines.index("Device-side activity by name and config:")
    assert lines[top + 1].split()[-2:] == ["Config", "Name"]
    # Largest total first: k's large configuration, its small one, then j with none.
    assert [line[line.index("ns  ", 60) + 4 :] for line in lines[top + 3 : top + 6]] == [
        f"{LARGE}  k",
        f"{SMALL}    k",
        f"{'-':<{len(LARGE)}}  j",
    ]
    assert [line.split()[4] for line in lines[top + 3 : top + 6]] == ["6", "6", "2"]
    assert main(["show", pa]) == 0  # by name, the default: one row for k, no Config
    default = capsys.readouterr().out
    assert default == kprof.load(pa).report() + "\n" and "Config" not in default


def test_show_refuses_an_unknown_grouping(
    saved: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["show", "--by", "grid", saved[0]])
    assert exc.value.code == 2
    assert "invalid choice: 'grid' (choose from 'name', 'config')" in capsys.readouterr().err


def test_diff_by_config_a_row_per_configuration() -> None:
    [k, _j] = BEFORE.diff(AFTER).section("device")
    assert (k.name, k.config, k.calls_before) == ("k", None, 12)
    d = BEFORE.diff(AFTER, by="config")
    assert d.by == "config"
    rows = d.section("device")
    assert [(r.label, r.status, r.calls_before, r.total_before, r.total_after) for r in rows] == [
        (f"k [{LARGE}]", "slower", 6, 5550, 10950),
        (f"k [{SMALL}]", "same", 6, 750, 752),
        ("j", "too few calls", 2, 15, 15),  # 2 calls a side cannot tell
    ]
    assert [r.config for r in rows] == [LARGE, SMALL, None]
    assert d.row("k", config=SMALL).ratio == pytest.approx(125 / 125)
    assert d.row("k", config=LARGE).ratio == pytest.approx(1825 / 925)
    assert [r.label for r in d.slowdowns(1.5)] == [f"k [{LARGE}]"]
    # The same time split by configuration: each section's totals are the by-name ones.
    by_name = BEFORE.diff(AFTER)
    for section in ("device", "device_ranges", "host"):
        for side in ("total_before", "total_after"):
            assert sum(getattr(r, side) for r in d.section(section)) == sum(
                getattr(r, side) for r in by_name.section(section)
            ), (section, side)
    # Host rows: a launch's call by its kernel's configuration, the range by none.
    assert {(r.name, r.config) for r in d.section("host")} == {
        ("k", SMALL), ("k", LARGE), ("j", None), ("step", None)
    }  # fmt: skip
    with pytest.raises(KeyError, match=r"with 'global 1'; rows: \['k \[global 4096"):
        d.row("k", config="global 1")
    with pytest.raises(ValueError, match='"name", "line" or "config"'):
        BEFORE.diff(AFTER, by="grid")


def test_kprof_diff_by_config_on_saved_files(
    saved: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    pa, pb = saved
    assert main(["diff", "--by", "config", pa, pb]) == 0
    out = capsys.readouterr().out
    assert out == kprof.load(pa).diff(kprof.load(pb), by="config").report((pa, pb)) + "\n"
    assert "by launch configuration (a row per name and configuration)" in out
    lines = out.splitlines()
    device = lines.index("Device-side activity (kernels and copies):")
    assert lines[device + 3].endswith(f"slower (p=0.0022)  k [{LARGE}]")
    assert lines[device + 4].endswith(f"same  k [{SMALL}]")
    assert lines[device + 5].endswith("too few calls  j")
    assert main(["diff", "--by", "config", "--json", pa, pb]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["by"] == "config"
    assert [(r["name"], r["config"]) for r in data["rows"] if r["section"] == "device"] == [
        ("k", LARGE),
        ("k", SMALL),
        ("j", None),
    ]
    assert main(["diff", "--by", "config", "--fail-above", "1.5", pa, pb]) == 1
    assert f"1 significant slowdown above 1.5x: k [{LARGE}] 1.97x" in capsys.readouterr().err
    assert main(["diff", "--fail-above", "1.5", pa, pb]) == 0  # by name: k as a whole is not
    assert "k [" not in capsys.readouterr().out


def test_diff_by_config_without_configs_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = configured([1, 2], [3, 4], [5])
    plain.configs = []
    plain.table.config = array("q", [-1] * len(plain.table))
    path = str(tmp_path / "plain.kprof")
    plain.save(path)
    assert main(["diff", "--by", "config", path, path]) == 0
    out = capsys.readouterr()
    assert "neither profile holds launch configurations" in out.err
    assert " k\n" in out.out and "[" not in out.out


SCRIPT = """\
import pyopencl as cl
import kprof_opencl

q = kprof_opencl.profiling_queue(kprof_opencl.default_device())
prg = cl.Program(q.context, "__kernel void bump(__global float *x) {x[get_global_id(0)] += 1;}")
bump = prg.build().bump
buf = cl.Buffer(q.context, cl.mem_flags.READ_WRITE, 4 * 64)
for _ in range(3):
    bump(q, (64,), (16,), buf)
bump(q, (32,), None, buf)
q.finish()
"""


def test_run_by_config_on_pyopencl(tmp_path: Path) -> None:
    pytest.importorskip("pyopencl")
    import kprof_opencl

    if kprof_opencl.default_device() is None:
        pytest.skip("OpenCL finds no device here (pip install pocl-binary-distribution)")
    (tmp_path / "prog.py").write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KPROF_")}
    r = subprocess.run(
        [sys.executable, "-m", "kprof", "run", "--by", "config", "-o", "p.kprof", "prog.py"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    top = lines.index("Device-side activity by name and config:")
    rows = {int(line.split()[4]): line for line in lines[top + 3 : top + 5]}  # by calls
    assert sorted(rows) == [1, 3]
    assert rows[3].endswith("  global 64 local 16  bump")
    assert rows[1].endswith("  global 32           bump")
    # The file keeps the configurations: show prints the same table from it.
    s = subprocess.run(
        [sys.executable, "-m", "kprof", "show", "--by", "config", "p.kprof"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert s.returncode == 0, s.stderr
    assert s.stdout == kprof.load(tmp_path / "p.kprof").report(by=("name", "config")) + "\n"
