"""MPI: real jobs under mpiexec (2 ranks, and 4 once), and the clock measurement on its own.

The jobs need mpi4py and an MPI library with its ``mpiexec`` (the ``mpich`` wheel brings both).
Where they are missing the jobs are skipped, unless ``KPROF_REQUIRE_MPI=1`` (CI) makes that a
failure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import kprof
from kprof_core.cli.main import main
from kprof_core.data.provenance import LAUNCHER_VARIABLES
from kprof_core.data.records import RANGE, UNRESOLVED, HostTable
from kprof_core.ranks.mpi import ClockSync, clock_meta, measure_clock_offset, test_clock_skew_ns
from kprof_core.ranks.summary import cross_rank_summary

SCRIPTS = Path(__file__).parent / "scripts"
SKEW = 5_000_000_000  # rank 1's clock reads 5 s ahead
#: A bound this loose still proves the 5 s skew was measured, on a loaded 2-core machine.
MAX_ERROR_NS = 100_000_000


def _mpiexec() -> str | None:
    return shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or shutil.which("mpiexec")


def _why_no_mpi() -> str | None:
    exe = _mpiexec()
    if exe is None:
        return "no mpiexec (pip install mpich)"
    probe = subprocess.run(
        [sys.executable, "-c", "from mpi4py import MPI; MPI.COMM_WORLD.Get_rank()"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if probe.returncode:
        return f"mpi4py does not work here: {probe.stderr.strip().splitlines()[-1:]}"
    return None


@pytest.fixture(scope="module")
def mpiexec() -> Iterator[str]:
    why = _why_no_mpi()
    if why is not None:
        if os.environ.get("KPROF_REQUIRE_MPI") == "1":
            pytest.fail(f"KPROF_REQUIRE_MPI=1 but MPI is not usable: {why}")
        pytest.skip(why)
    exe = _mpiexec()
    assert exe is not None
    yield exe


def run_job(
    mpiexec: str,
    n: int,
    args: list[str],
    cwd: Path,
    skew: str | None = None,
    backend: str = "testdev",
) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "OMPI_"))}
    env.pop("KPROF_TEST_CLOCK_SKEW_NS", None)
    if skew is not None:
        env["KPROF_TEST_CLOCK_SKEW_NS"] = skew
    env["KPROF_PLUGINS"] = backend  # only the backend under test: quicker to start on every rank
    done = subprocess.run(
        [mpiexec, "-n", str(n), sys.executable, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, f"mpiexec -n {n} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def per_source(p: kprof.Profile, source: int) -> dict[str, Any]:
    """The kernel names and host ranges of one source (rank) of a combined profile."""
    qsrc, tsrc = p.meta["queue_source"], p.meta["thread_source"]
    t, h = p.table, p.host
    kernels = sorted(
        p.names[t.name[i]]
        for i in range(len(t))
        if qsrc[t.queue[i]] == source and t.kind[i] != RANGE
    )
    probes = [
        (h.start[i], h.end[i])
        for i in range(len(h))
        if tsrc[h.thread[i]] == source
        and h.kind[i] == HostTable.RANGE
        and p.names[h.name[i]] == "probe"
    ]
    return {"kernels": kernels, "probes": probes}


def check_job(out: Path, n: int, skews: list[int]) -> None:
    """Every rank's records once, clocks aligned within the stated bound, the summary right."""
    ranks = [kprof.load(out / f"prof-{r}.kprof") for r in range(n)]
    combined = kprof.load(out / "all.kprof")
    probes = json.loads((out / "probes.json").read_text())
    for r, p in enumerate(ranks):
        m = p.meta
        assert (m["rank"], m["world_size"]) == (r, n)
        assert m.get("test_clock_skew_ns", 0) == skews[r]
        # True offset between two processes of one machine: 0 on the raw clock, so the
        # measured one must come back as the skews' difference, within the stated error.
        err = m["clock_error_ns"]
        assert 0 <= err < MAX_ERROR_NS, f"rank {r}: error bound {err} ns is not informative"
        assert abs(m["clock_offset_ns"] - (skews[0] - skews[r])) <= err, m
        assert sorted(m["clock_sync"]) == ["end", "method", "start"]
        # The rank's own file is on its (skewed) clock.
        before, after = probes[r]
        h = p.host
        (start,) = [h.start[i] for i in range(len(h)) if p.names[h.name[i]] == "probe"]
        assert before + skews[r] <= start <= after + skews[r]

    assert [s["label"] for s in combined.meta["sources"]] == [f"rank {r}" for r in range(n)]
    assert len(combined.table) == sum(len(p.table) for p in ranks)
    assert len(combined.host) == sum(len(p.host) for p in ranks)
    for r in range(n):
        mine = per_source(combined, r)
        assert mine["kernels"] == sorted(["work"] * (r + 1) + [f"only_rank_{r}"]), (
            r,
            mine["kernels"],
        )
        # Aligned: rank r's probe lands where it really was on rank 0's clock (raw clock +
        # rank 0's skew), within the error bound stated for rank r.
        err = combined.meta["sources"][r]["error_ns"]
        ((start, end),) = mine["probes"]
        before, after = probes[r]
        assert before + skews[0] - err <= start and end <= after + skews[0] + err, (r, err)

    rows = {row.name: row for row in cross_rank_summary([combined])}
    assert rows == {row.name: row for row in cross_rank_summary(ranks)}
    work = rows["work"]
    assert (work.ranks, work.calls_min, work.calls_max, work.calls_mean) == (n, 1, n, (n + 1) / 2)
    totals = [
        sum(
            p.table.duration[i]
            for i in range(len(p.table))
            if p.names[p.table.name[i]] == "work" and not p.table.flags[i] & UNRESOLVED
        )
        for p in ranks
    ]
    assert (work.total_min_ns, work.total_max_ns) == (min(totals), max(totals))
    assert work.total_mean_ns == pytest.approx(sum(totals) / n)
    assert work.max_rank == f"rank {totals.index(max(totals))}"
    for r in range(n):
        only = rows[f"only_rank_{r}"]
        assert (only.ranks, only.calls_min, only.calls_max, only.max_rank) == (1, 0, 1, f"rank {r}")


def _opencl_usable() -> bool:
    try:
        import pyopencl as cl

        return any(p.get_devices() for p in cl.get_platforms())
    except Exception:
        return False


@pytest.mark.parametrize(
    "backend, n, skews",
    [
        ("testdev", 2, [0, SKEW]),
        ("opencl", 2, [0, SKEW]),
        ("testdev", 4, [0, SKEW, -3 * SKEW, 7]),
    ],
)
def test_mpi_job_gathered_and_aligned(
    mpiexec: str,
    tmp_path: Path,
    backend: str,
    n: int,
    skews: list[int],
    capsys: pytest.CaptureFixture[str],
) -> None:
    if backend == "opencl" and not _opencl_usable():
        pytest.skip("no OpenCL device (pip install pyopencl pocl-binary-distribution)")
    out = run_job(
        mpiexec,
        n,
        [str(SCRIPTS / "mpi_app.py"), str(tmp_path), backend],
        tmp_path,
        skew=",".join(map(str, skews)),
        backend=backend,
    )
    assert f"Merged {n} processes onto one timeline" in out and "measured against rank 0" in out
    check_job(tmp_path, n, skews)
    # The per-rank files merge with `kprof merge` to the same timeline and summary.
    files = [str(tmp_path / f"prof-{r}.kprof") for r in reversed(range(n))]
    assert (
        main(
            [
                "merge",
                *files,
                "-o",
                str(tmp_path / "all.json"),
                "--save",
                str(tmp_path / "merged.kprof"),
            ]
        )
        == 0
    )
    assert f"across {n} ranks" in capsys.readouterr().out
    merged, gathered = kprof.load(tmp_path / "merged.kprof"), kprof.load(tmp_path / "all.kprof")
    for c in ("start", "launch_start", "duration"):
        assert sorted(getattr(merged.table, c)) == sorted(getattr(gathered.table, c))
    trace = json.loads((tmp_path / "all.json").read_text())
    names = {e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "process_name"}
    assert {f"rank {r}" for r in range(n)} <= names


@pytest.mark.parametrize("backend, n", [("testdev", 2), ("opencl", 4)])
def test_kprof_run_under_a_launcher_then_merge(
    mpiexec: str, tmp_path: Path, backend: str, n: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's commands: ``mpiexec -n 4 kprof run --output 'prof-{rank}.kprof' app.py``,
    then ``kprof merge prof-*.kprof -o all.json --html all.html``."""
    if backend == "opencl" and not _opencl_usable():
        pytest.skip("no OpenCL device (pip install pyopencl pocl-binary-distribution)")
    run_job(
        mpiexec,
        n,
        [
            "-m",
            "kprof",
            "run",
            "--output",
            "prof-{rank}.kprof",
            str(SCRIPTS / "launcher_app.py"),
            backend,
        ],
        tmp_path,
        backend=backend,
    )
    files = sorted(str(p) for p in tmp_path.glob("prof-*.kprof"))
    assert [Path(f).name for f in files] == [f"prof-{r}.kprof" for r in range(n)]
    profiles = [kprof.load(f) for f in files]
    for r, p in enumerate(profiles):
        assert (p.meta["rank"], p.meta["world_size"]) == (r, n)
        assert p.meta["rank_source"] in {
            var for var, _ in LAUNCHER_VARIABLES
        }  # mpi4py never imported
        assert [k.name for k in p.kernels] == ["advance", "advance"] and not any(
            k.host_timed for k in p.kernels
        )
    assert (
        main(
            [
                "merge",
                *files,
                "-o",
                str(tmp_path / "all.json"),
                "--html",
                str(tmp_path / "all.html"),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    # Processes of one machine share its clock: aligned exactly, with no exchange at all.
    assert printed.count("same host clock, error ≤ 0 ns") == n
    (row,) = cross_rank_summary(profiles)
    assert (row.name, row.ranks, row.calls_min, row.calls_max) == ("advance", n, 2, 2)
    trace = json.loads((tmp_path / "all.json").read_text())
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    assert len(kernels) == 2 * n
    # On one timeline: every kernel within the span of the merged processes' profiles.
    placed = [(float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in kernels]
    assert min(a for a, _ in placed) >= 0


# -- the clock measurement, without MPI ---------------------------------------------------------------


class ScriptedComm:
    """A two-rank communicator seen from one rank; the other side answers from a script."""

    def __init__(self, rank: int, answers: list[int] | None = None) -> None:
        self.rank, self.answers = rank, list(answers or [])
        self.sent: list[int] = []

    def Get_rank(self) -> int:
        return self.rank

    def Get_size(self) -> int:
        return 2

    def Send(self, buf: array[int], dest: int, tag: int) -> None:
        self.sent.append(buf[0])

    def Recv(self, buf: array[int], source: int, tag: int) -> None:
        buf[0] = self.answers.pop(0) if self.answers else 0


def test_ping_pong_keeps_the_fastest_round() -> None:
    # Rank 1 reads (t0, t1) = (0, 100), (200, 230), (400, 500); the root answers 1050, 1215, 1450.
    readings = iter([0, 100, 200, 230, 400, 500])
    sync = measure_clock_offset(
        ScriptedComm(1, [1050, 1215, 1450]), rounds=3, clock=lambda: next(readings)
    )
    assert sync == ClockSync(offset_ns=1000, error_ns=15, rtt_ns=30, at_ns=215, rounds=3)


def test_the_root_answers_with_its_clock() -> None:
    comm = ScriptedComm(0)
    readings = iter(range(10, 100, 10))
    sync = measure_clock_offset(comm, rounds=4, clock=lambda: next(readings))
    assert comm.sent == [10, 20, 30, 40] and (sync.offset_ns, sync.error_ns) == (0, 0)


def test_offset_and_drift_from_two_measurements() -> None:
    start = ClockSync(1000, 15, 30, 0, 16)
    end = ClockSync(1101, 5, 10, 10**9, 16)
    m = clock_meta(start, end)
    # Mean offset (rounded down, so +1), plus half the change over the span, plus the worse bound.
    assert (m["clock_offset_ns"], m["clock_error_ns"]) == (1050, 15 + 51 + 1)
    assert m["clock_drift"] == pytest.approx(101 / 1e9)
    assert m["clock_sync"]["start"]["offset_ns"] == 1000


def test_skew_setting() -> None:
    assert test_clock_skew_ns(3, {}) == 0
    assert test_clock_skew_ns(3, {"KPROF_TEST_CLOCK_SKEW_NS": "-42"}) == -42
    env = {"KPROF_TEST_CLOCK_SKEW_NS": "0, 5000000000"}
    assert [test_clock_skew_ns(r, env) for r in range(3)] == [0, 5_000_000_000, 0]
    with pytest.raises(kprof.KprofError, match="KPROF_TEST_CLOCK_SKEW_NS='5s' must be an integer"):
        test_clock_skew_ns(0, {"KPROF_TEST_CLOCK_SKEW_NS": "5s"})


def test_without_mpi4py_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mpi4py", None)  # import fails as if not installed
    with pytest.raises(kprof.KprofError, match=r"pip install 'kprof\[mpi\]'"):
        with kprof.mpi.profile():
            pass


def test_bad_settings_fail_before_any_exchange(monkeypatch: pytest.MonkeyPatch) -> None:
    """Checked before the first collective call (ScriptedComm has no Dup: reaching it would
    be an AttributeError), so every rank fails alike instead of leaving others waiting."""
    with pytest.raises(kprof.KprofError, match=r"bad output path '\{nope\}\.kprof'"):
        kprof.mpi.profile(comm=ScriptedComm(1), output="{nope}.kprof").__enter__()
    with pytest.raises(ValueError, match="root=2 is not a rank"):
        kprof.mpi.profile(comm=ScriptedComm(1), root=2).__enter__()
    monkeypatch.setenv("KPROF_TEST_CLOCK_SKEW_NS", "soon")
    with pytest.raises(kprof.KprofError, match="KPROF_TEST_CLOCK_SKEW_NS"):
        kprof.mpi.profile(comm=ScriptedComm(1)).__enter__()
