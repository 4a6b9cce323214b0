"""Who made a profile: rank and world size from launcher variables, and the clock facts."""

from __future__ import annotations

import os
import sys
import time

import pytest

import kprof
from kprof_core.data.provenance import clock_domain, fill_meta, process_identity, wall_anchor


@pytest.mark.parametrize(
    "env, rank, size, source",
    [
        ({"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4"}, 3, 4, "OMPI_COMM_WORLD_RANK"),
        ({"PMI_RANK": "1", "PMI_SIZE": "2"}, 1, 2, "PMI_RANK"),
        ({"RANK": "0", "WORLD_SIZE": "8"}, 0, 8, "RANK"),
        ({"SLURM_PROCID": "5", "SLURM_NTASKS": "6"}, 5, 6, "SLURM_PROCID"),
        ({"SLURM_PROCID": "2"}, 2, None, "SLURM_PROCID"),
        # Open MPI's own variables win over the generic ones a wrapper script might also set.
        (
            {
                "RANK": "7",
                "WORLD_SIZE": "8",
                "OMPI_COMM_WORLD_RANK": "1",
                "OMPI_COMM_WORLD_SIZE": "2",
            },
            1,
            2,
            "OMPI_COMM_WORLD_RANK",
        ),
    ],
)
def test_rank_from_launcher_variables(
    env: dict[str, str], rank: int, size: int | None, source: str
) -> None:
    ident = process_identity(env)
    assert (
        ident["rank"] == rank and ident.get("world_size") == size and ident["rank_source"] == source
    )
    assert ident["pid"] == os.getpid() and ident["host"]


def test_no_launcher_no_rank() -> None:
    ident = process_identity({"PATH": "/bin", "RANK": " "})
    assert "rank" not in ident and "world_size" not in ident


@pytest.mark.parametrize(
    "env, message",
    [
        ({"PMI_RANK": "one"}, r"PMI_RANK='one' is not an integer ≥ 0"),
        ({"RANK": "-1"}, r"RANK='-1' is not an integer ≥ 0"),
        ({"RANK": "0", "WORLD_SIZE": "0"}, r"WORLD_SIZE='0' is not an integer ≥ 1"),
        ({"SLURM_PROCID": "4", "SLURM_NTASKS": "4"}, "SLURM_PROCID=4 and SLURM_NTASKS=4 disagree"),
    ],
)
def test_bad_launcher_values_are_clear_errors(env: dict[str, str], message: str) -> None:
    with pytest.raises(kprof.KprofError, match=message):
        process_identity(env)


def test_a_bad_variable_does_not_lose_the_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "mpi4py.MPI", raising=False)  # the launcher's word only
    for var in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("RANK", "zero")
    with pytest.warns(RuntimeWarning, match="rank unknown: .*RANK='zero'"):
        with kprof.profile() as p:
            pass
    assert "rank" not in p.meta and p.meta["pid"] == os.getpid()


def test_profile_meta_from_the_launcher(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "mpi4py.MPI", raising=False)
    monkeypatch.delenv("OMPI_COMM_WORLD_RANK", raising=False)
    monkeypatch.setenv("PMI_RANK", "1")
    monkeypatch.setenv("PMI_SIZE", "3")
    with kprof.profile() as p:
        pass
    assert (p.meta["rank"], p.meta["world_size"], p.meta["rank_source"]) == (1, 3, "PMI_RANK")
    assert p.meta["host_clock"] == "perf_counter_ns" and p.meta["clock_domain"] == clock_domain()


def test_mpi4py_is_never_imported_to_find_the_rank() -> None:
    if "mpi4py.MPI" in sys.modules:
        pytest.skip("mpi4py.MPI was imported by another test")
    process_identity()
    assert "mpi4py.MPI" not in sys.modules


def test_wall_anchor_pairs_the_clocks() -> None:
    before_perf, before_wall = time.perf_counter_ns(), time.time_ns()
    a = wall_anchor()
    after_perf, after_wall = time.perf_counter_ns(), time.time_ns()
    assert before_perf <= a["perf_ns"] <= after_perf and before_wall <= a["wall_ns"] <= after_wall
    assert 0 <= a["bracket_ns"] <= after_perf - before_perf


def test_fill_meta_keeps_what_is_there() -> None:
    meta = {"rank": 9, "clock_domain": "boot:x"}
    fill_meta(meta)
    assert meta["rank"] == 9 and meta["clock_domain"] == "boot:x" and "wall_anchor" in meta
