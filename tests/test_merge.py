"""Combining profiles of several processes, the cross-rank summary and ``kprof merge``."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path
from typing import Any

import pytest

import kprof
from kprof_core.cli.main import main
from kprof_core.data.records import (
    COPY,
    KERNEL,
    RANGE,
    UNRESOLVED,
    HostTable,
    QueueRecord,
    ThreadRecord,
)
from kprof_core.io import storage
from kprof_core.ranks.combine import (
    MEASURED,
    REFERENCE,
    SAME_CLOCK,
    UNKNOWN,
    WALL,
    clock_placements,
    shift_profile,
)
from kprof_core.ranks.merge import merge_report
from kprof_core.ranks.summary import cross_rank_summary

DATA = Path(__file__).parent / "data"
Q = QueueRecord("testdev", "testdev 0", "queue 1", "testdev:testdev 0")
T = ThreadRecord(11, "MainThread")


def synthetic(
    rank: int | None,
    kernels: list[tuple[str, int, int]],
    meta: dict[str, Any] | None = None,
    base: int = 10**9,
) -> kprof.Profile:
    """A profile of one process: ``kernels`` are (name, start, duration); plus an unresolved
    launch, the device time of a range, a host range and a marker, which the summary ignores."""
    p = kprof.Profile(backends=["testdev"])
    names: list[str] = []

    def nid(n: str) -> int:
        if n not in names:
            names.append(n)
        return names.index(n)

    for name, start, dur in kernels:
        p.table.append(
            nid(name), KERNEL, 0, 0, base + start - 5, base + start - 2, base + start, dur, -1, 0
        )
    row = p.table.append(nid("lost"), COPY, 0, 0, base, base + 1, base, 0, 64, UNRESOLVED)
    p.errors[row] = "device lost"
    p.table.append(nid("step"), RANGE, 0, 0, base, base + 9000, base + 1, 9000, -1, 0)
    p.host.append(nid("step"), HostTable.RANGE, 0, base, base + 9000)
    p.host.append(nid("tick"), HostTable.MARK, 0, base + 50, base + 50)
    p.names, p.queues, p.threads = names, [Q], [T]
    p.start_ns, p.end_ns = base, base + 10_000
    p.meta = {
        "host": "node",
        "pid": 100 + (rank or 0),
        **({"rank": rank} if rank is not None else {}),
        **(meta or {}),
    }
    return p


def columns(p: kprof.Profile) -> dict[str, list[int]]:
    return {c: list(getattr(p.table, c)) for c in p.table.COLUMNS}


# -- combine -----------------------------------------------------------------------------------------


def test_combine_keeps_every_record_once_and_labels_each_process() -> None:
    a = synthetic(0, [("k1", 100, 10), ("k2", 200, 20)], {"clock_domain": "boot:A"})
    b = synthetic(1, [("k1", 150, 30)], {"clock_domain": "boot:A"})
    c = kprof.combine([a, b])
    assert len(c.table) == len(a.table) + len(b.table) and len(c.host) == len(a.host) + len(b.host)
    assert sorted(r.name for r in c.kernels) == sorted(r.name for p in (a, b) for r in p.kernels)
    assert [q.label for q in c.queues] == ["rank 0: queue 1", "rank 1: queue 1"]
    assert [q.device_key for q in c.queues] == [
        "rank 0/testdev:testdev 0",
        "rank 1/testdev:testdev 0",
    ]
    assert [t.name for t in c.threads] == ["rank 0: MainThread", "rank 1: MainThread"]
    assert c.meta["queue_source"] == [0, 1] and c.meta["thread_source"] == [0, 1]
    assert [s["label"] for s in c.meta["sources"]] == ["rank 0", "rank 1"]
    # Errors follow their rows; one clock domain needs no shift.
    assert {c.names[c.table.name[i]]: m for i, m in c.errors.items()} == {"lost": "device lost"}
    assert sorted(c.errors) == [2, len(a.table) + 1]  # after 2 kernels in a, 1 in b
    assert (
        c.table.start[: len(a.table)] == a.table.start
        and c.table.start[len(a.table) :] == b.table.start
    )
    assert (c.start_ns, c.end_ns) == (a.start_ns, a.end_ns)


def test_one_process_is_not_relabelled() -> None:
    a = synthetic(None, [("k", 0, 5)])
    b = synthetic(None, [("k", 10, 5)])
    c = kprof.combine([a, b])
    assert c.queues == [Q] and c.threads == [T] and [r.name for r in c.kernels].count("k") == 2


def test_measured_offsets_shift_exactly() -> None:
    a = synthetic(
        0, [("k", 100, 10)], {"clock_offset_ns": 0, "clock_error_ns": 0, "clock_domain": "boot:A"}
    )
    b = synthetic(
        1,
        [("k", 100, 10)],
        {"clock_offset_ns": -5_000_000_123, "clock_error_ns": 40, "clock_domain": "boot:B"},
        base=10**9 + 5_000_000_123,
    )
    pl = clock_placements([a, b])
    assert [(x.offset_ns, x.error_ns, x.method) for x in pl] == [
        (0, 0, MEASURED),
        (-5_000_000_123, 40, MEASURED),
    ]
    c = kprof.combine([a, b])
    n = len(a.table)
    assert list(c.table.start[n:]) == list(a.table.start)  # b was the same work, 5 s off
    assert list(c.table.launch_start[n:]) == list(a.table.launch_start)
    assert list(c.host.end[len(a.host) :]) == list(a.host.end)
    assert list(c.table.duration[n:]) == list(b.table.duration)


def test_a_measured_offset_without_a_clock_domain_is_kept() -> None:
    """Issue 25 item 22: with no clock_domain on any profile, the reference's measured
    clock_offset_ns was replaced with 0 (its records then moved by that much)."""
    a = synthetic(0, [("k", 100, 10)], {"clock_offset_ns": 250, "clock_error_ns": 3})
    b = synthetic(1, [("k", 100, 10)], {"clock_offset_ns": -777, "clock_error_ns": 9})
    pl = clock_placements([a, b])
    assert [(x.offset_ns, x.error_ns, x.method) for x in pl] == [
        (250, 3, MEASURED),
        (-777, 9, MEASURED),
    ]


def test_placement_by_clock_domain_then_wall_clock() -> None:
    anchor = {"wall_ns": 1_700_000_000_000_000_000, "perf_ns": 10**9, "bracket_ns": 50}
    r0 = synthetic(
        0,
        [],
        {
            "clock_domain": "boot:A",
            "wall_anchor": anchor,
            "clock_offset_ns": 0,
            "clock_error_ns": 0,
            "clock_reference": True,
        },
    )
    r1 = synthetic(1, [], {"clock_domain": "boot:B", "clock_offset_ns": 777, "clock_error_ns": 9})
    same_as_r1 = synthetic(2, [], {"clock_domain": "boot:B"})
    # Another machine, unmeasured: its perf clock reads 3e9 at the same wall time as r0's 1e9.
    far = synthetic(
        3, [], {"clock_domain": "boot:C", "wall_anchor": {**anchor, "perf_ns": 3 * 10**9}}
    )
    lost = synthetic(4, [])
    pl = clock_placements([r0, r1, same_as_r1, far, lost])
    assert (pl[0].offset_ns, pl[0].error_ns, pl[0].method) == (0, 0, REFERENCE)
    assert (pl[1].offset_ns, pl[1].error_ns, pl[1].method) == (777, 9, MEASURED)
    assert (pl[2].offset_ns, pl[2].error_ns) == (777, 9) and pl[2].method.startswith(SAME_CLOCK)
    assert (pl[3].offset_ns, pl[3].error_ns, pl[3].method) == (-2 * 10**9, None, WALL)
    assert (pl[4].offset_ns, pl[4].method) == (0, UNKNOWN)


def test_without_measurements_the_lowest_rank_is_the_reference() -> None:
    anchor = {"wall_ns": 5 * 10**18, "perf_ns": 10**9, "bracket_ns": 10}
    r1 = synthetic(
        1, [], {"clock_domain": "boot:B", "wall_anchor": {**anchor, "perf_ns": 10**9 + 500}}
    )
    r0 = synthetic(0, [], {"clock_domain": "boot:A", "wall_anchor": anchor})
    pl = clock_placements([r1, r0])
    assert (pl[1].offset_ns, pl[1].error_ns, pl[1].method) == (0, 0, SAME_CLOCK)
    assert (pl[0].offset_ns, pl[0].method) == (-500, WALL)


def test_shift_profile_moves_every_host_time() -> None:
    p = synthetic(
        0, [("k", 100, 10)], {"wall_anchor": {"wall_ns": 1, "perf_ns": 2, "bracket_ns": 3}}
    )
    before = columns(p)
    shift_profile(p, 1000)
    after = columns(p)
    for c in ("launch_start", "launch_end", "start"):
        assert after[c] == [v + 1000 for v in before[c]]
    assert after["duration"] == before["duration"] and p.meta["wall_anchor"]["perf_ns"] == 1002
    assert (p.start_ns, p.end_ns) == (10**9 + 1000, 10**9 + 11_000)


def test_combine_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="at least one profile"):
        kprof.combine([])
    with pytest.raises(TypeError, match=r"kprof\.Profile objects, not dict"):
        kprof.combine([{}])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="1 labels for 2 profiles"):
        kprof.combine([synthetic(0, []), synthetic(1, [])], labels=["x"])


# -- the cross-rank summary ----------------------------------------------------------------------------


def test_cross_rank_summary_min_mean_max() -> None:
    r0 = synthetic(0, [("k1", 0, 100), ("k1", 200, 200), ("k2", 400, 50)])
    r1 = synthetic(1, [("k1", 0, 700)])
    r2 = synthetic(2, [("k1", 0, 300), ("k1", 400, 300)])
    rows = cross_rank_summary([r0, r1, r2])
    assert [r.name for r in rows] == ["k1", "k2"]  # by the slowest rank's total
    k1, k2 = rows
    assert (k1.ranks, k1.calls_min, k1.calls_mean, k1.calls_max) == (3, 1, 5 / 3, 2)
    assert (k1.total_min_ns, k1.total_mean_ns, k1.total_max_ns) == (300, 1600 / 3, 700)
    assert (k1.min_rank, k1.max_rank) == ("rank 0", "rank 1")
    assert k1.imbalance == pytest.approx(700 / (1600 / 3))
    # k2 ran on rank 0 only: the others count as 0, which is the imbalance to show.
    assert (k2.ranks, k2.total_min_ns, k2.total_mean_ns, k2.total_max_ns, k2.max_rank) == (
        1,
        0,
        50 / 3,
        50,
        "rank 0",
    )
    # A combined profile is split back into its ranks: the same summary.
    assert cross_rank_summary([kprof.combine([r0, r1, r2])]) == rows
    text = merge_report([r0, r1, r2])
    assert (
        "across 3 ranks" in text and "700 ns" in text and "lost" not in text.split("Device time")[1]
    )


# -- kprof merge ------------------------------------------------------------------------------------------


@pytest.fixture
def rank_files(tmp_path: Path) -> list[Path]:
    from kprof_testbackend import device

    paths = []
    for rank in range(2):
        q = device.Queue()
        with kprof.profile(backends=["testdev"]) as p:
            with q:
                for _ in range(rank + 1):
                    q.launch("work", 10)
                with kprof.range("step"):
                    q.launch(f"only-{rank}", 5)
        q.close()
        p.meta.update(rank=rank, world_size=2, pid=1000 + rank)
        paths.append(tmp_path / f"prof-{rank}.kprof")
        p.save(paths[-1])
    return paths


def test_merge_command(
    rank_files: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, page, saved = tmp_path / "all.json", tmp_path / "all.html", tmp_path / "all.kprof"
    # Given in reverse: the processes come out in rank order.
    code = main(
        [
            "merge",
            str(rank_files[1]),
            str(rank_files[0]),
            "-o",
            str(out),
            "--html",
            str(page),
            "--save",
            str(saved),
        ]
    )
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert printed.out.index("rank 0: host") < printed.out.index("rank 1: host")
    assert "across 2 ranks" in printed.out and "same host clock" in printed.out
    trace = json.loads(out.read_text())
    procs = {e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "process_name"}
    assert any(n.startswith("rank 0") for n in procs) and any(n.startswith("rank 1") for n in procs)
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    assert sorted(e["name"] for e in kernels) == ["only-0", "only-1", "work", "work", "work"]
    # Each rank's device is a process of its own, named under the rank.
    by_pid = {
        e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "process_name"
    }
    assert sorted(by_pid[e["pid"]] for e in kernels if e["name"] == "work") == [
        "rank 0: testdev 0",
        "rank 1: testdev 0",
        "rank 1: testdev 0",
    ]
    assert page.read_text().startswith("<!DOCTYPE html") or "<html" in page.read_text()[:500]
    merged = kprof.load(saved)
    originals = [kprof.load(f) for f in rank_files]
    assert len(merged.table) == sum(len(p.table) for p in originals)
    assert cross_rank_summary([merged]) == cross_rank_summary(originals)
    # A merged file merges again, with its sources as they were.
    assert main(["merge", str(saved)]) == 0
    assert "rank 0: host" in capsys.readouterr().out


def test_merge_files_of_different_versions(
    rank_files: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file written by format version 1 (kept in tests/data) merges with one written now."""
    old = tmp_path / "old.kprof"
    shutil.copy(DATA / "v1-zlib.kprof", old)  # rank 1 of another job, on another machine
    assert storage.peek_version(old.read_bytes()) == 1
    assert main(["merge", str(rank_files[0]), str(old), "-o", str(tmp_path / "t.json")]) == 0
    out = capsys.readouterr().out
    assert "rank 1: host node7" in out and "saxpy" in out and "work" in out


def _one_line_error(capsys: pytest.CaptureFixture[str], *names: str) -> str:
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("kprof merge: ")
    for n in names:
        assert n in err
    return err


def test_merge_errors_name_the_file(
    rank_files: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = str(rank_files[0])
    text = tmp_path / "notes.txt"
    text.write_text("not a profile\n")
    assert main(["merge", good, str(text)]) == 2
    assert "not a kprof profile" in _one_line_error(capsys, "notes.txt")

    data = rank_files[1].read_bytes()
    cut = tmp_path / "cut.kprof"
    cut.write_bytes(data[: len(data) // 2])
    assert main(["merge", good, str(cut)]) == 2
    assert "truncated" in _one_line_error(capsys, "cut.kprof")

    newer = tmp_path / "newer.kprof"
    newer.write_bytes(data[:8] + struct.pack("<I", 99) + data[12:])
    assert main(["merge", good, str(newer)]) == 2
    assert "newer kprof (format version 99" in _one_line_error(capsys, "newer.kprof")

    assert main(["merge", good, str(tmp_path / "missing.kprof")]) == 2
    assert "cannot read it" in _one_line_error(capsys, "missing.kprof")

    assert main(["merge", good, good]) == 2
    assert "same profile" in _one_line_error(capsys, "prof-0.kprof")
