"""Bounded capture (issue 22): ``profile(max_records=N, keep=..., min_duration_ns=...)`` keeps
what it says, counts what it drops and says so; the same on both recorder paths. Counts and
the simulated test device's exact durations only."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import kprof
from kprof_core.data.records import KERNEL, RANGE, UNRESOLVED, Details, DeviceTable
from kprof_core.low_level import native
from kprof_core.recording import bounds
from kprof_core.recording.recorder import Recorder

PATHS = [pytest.param(True, id="compiled"), pytest.param(False, id="pure")]


@pytest.fixture(params=PATHS)
def path(request: pytest.FixtureRequest) -> Iterator[bool]:
    if request.param and native._module is None:
        pytest.skip("the compiled recorder is not built here")
    native.use_compiled(request.param)
    yield request.param
    native.use_compiled(native.os.environ.get(native.ENV, "") in ("", "0"))


@pytest.fixture
def sim(testbackends: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The test device on its simulated clock: durations are exactly what was asked."""
    monkeypatch.setenv("KPROF_TESTDEV_CLOCK", "simulated")


@pytest.fixture
def often(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Harvests as launches go (at most 8 pending); the table's length after each bound."""
    monkeypatch.setattr(Recorder, "harvest_every", 4)
    monkeypatch.setattr(Recorder, "max_pending", 8)  # past 8 pending the launch waits
    lengths: list[int] = []
    real = bounds.Bounds.apply

    def spy(self: bounds.Bounds, t: DeviceTable, *a: Any, **kw: Any) -> None:
        real(self, t, *a, **kw)
        lengths.append(len(t))

    monkeypatch.setattr(bounds.Bounds, "apply", spy)
    return lengths


def test_a_ring_keeps_the_latest(sim: None, tdq: Any, path: bool, often: list[int]) -> None:
    q = tdq()
    with kprof.profile(max_records=5) as p, q:
        for i in range(40):
            q.launch(f"k{i}", 1)
    assert [k.name for k in p.kernels] == [f"k{i}" for i in range(35, 40)]
    assert p.meta["bounds"] == {
        "max_records": 5,
        "keep": "last",
        "dropped": 35,
        "dropped_device_ns": 35_000,
    }
    assert len(often) > 5 and max(often) < 2 * 5  # cut as it goes, never past 2 N
    assert (
        " ! max_records=5: kept the latest 5 device records, dropped 35 (35 µs of device "
        "time): the tables lack them"
    ) in str(p)


def test_first_n_keeps_the_first(sim: None, tdq: Any, path: bool, often: list[int]) -> None:
    q = tdq()
    with kprof.profile(max_records=5, keep="first") as p, q:
        for i in range(40):
            q.launch(f"k{i}", 2)
    assert [k.name for k in p.kernels] == [f"k{i}" for i in range(5)]
    assert (p.meta["bounds"]["dropped"], p.meta["bounds"]["dropped_device_ns"]) == (35, 70_000)
    assert max(often) == 5
    assert "kept the first 5 device records, dropped 35" in str(p)


def test_short_kernels_are_dropped_counted_and_totalled(sim: None, tdq: Any, path: bool) -> None:
    q = tdq()
    with kprof.profile(min_duration_ns=50_000) as p, q:
        for _ in range(7):
            q.launch("short", 10)
            q.launch("long", 100)
        q.launch("edge", 50)  # not shorter than the bound: kept
    assert [k.name for k in p.kernels] == ["long"] * 7 + ["edge"]
    assert p.meta["bounds"] == {"min_duration_ns": 50_000, "short": {"short": [7, 70_000]}}
    assert "dropped 7 kernels and copies shorter than 50 µs (70 µs of device time" in str(p)


def test_windows_are_bounded_each(sim: None, tdq: Any, path: bool) -> None:
    q = tdq()
    sched = kprof.schedule(wait=1, active=2, repeat=2)
    with kprof.profile(schedule=sched, max_records=3) as p, q:
        for s in range(6):
            for i in range(4):
                q.launch(f"s{s}k{i}", 1)
            kprof.step()
    got = [([k.name for k in w.kernels], w.meta["bounds"]["dropped"]) for w in p.windows]
    assert got == [(["s2k1", "s2k2", "s2k3"], 5), (["s5k1", "s5k2", "s5k3"], 5)]


def test_the_bounds_are_saved_and_shown(sim: None, tdq: Any, tmp_path: Path) -> None:
    q = tdq()
    with kprof.profile(max_records=2) as p, q:
        for _ in range(3):
            q.launch("k", 1)
    p.save(tmp_path / "b.kprof")
    back = kprof.load(tmp_path / "b.kprof")
    assert back.meta["bounds"]["dropped"] == 1
    assert "kept the latest 2 device records, dropped 1" in str(back)


@pytest.mark.parametrize(
    "kw, says",
    [
        ({"max_records": 0}, "max_records"),
        ({"max_records": 2.5}, "max_records"),
        ({"max_records": 3, "keep": "middle"}, "keep"),
        ({"min_duration_ns": -1}, "min_duration_ns"),
    ],
)
def test_bad_bounds_say_which(kw: dict[str, Any], says: str) -> None:
    with pytest.raises(ValueError, match=says):
        kprof.profile(**kw)


# -- the cuts themselves: errors and details follow their rows ---------------------------------


def table(durations: list[int], flags: dict[int, int] | None = None) -> DeviceTable:
    t = DeviceTable()
    for i, d in enumerate(durations):
        t.append(i, KERNEL, 0, 0, 0, 0, 0, d, 0, (flags or {}).get(i, 0))
    return t


def details_of(rows: int) -> Details:
    d = Details()
    d.add_block(2, 4, "b{0}", ([20, 30, 40, 50],))  # rows 2-5 as a block
    d[7] = "text7"
    return d


def test_a_ring_cut_renumbers_errors_and_details() -> None:
    t = table([5] * 10)
    errors = {1: "e1", 6: "e6", 9: "e9"}
    d = details_of(10)
    b = bounds.Bounds(4, "last", None)
    b.apply(t, errors, d, end=True)  # rows 6..9 stay, as 0..3
    assert list(t.name) == [6, 7, 8, 9]
    assert errors == {0: "e6", 3: "e9"}
    assert dict(d) == {1: "text7"}
    assert (b.dropped, b.dropped_ns) == (6, 30)


def test_a_ring_cut_moves_a_whole_block() -> None:
    t = table([5] * 12)
    d = Details()
    d.add_block(8, 3, "b{0}", ([80, 90, 100],))
    bounds.Bounds(6, "last", None).apply(t, {}, d, end=True)  # rows 6..11 stay
    assert dict(d) == {2: "b80", 3: "b90", 4: "b100"}


def test_a_short_cut_renumbers_and_keeps_unresolved_and_ranges() -> None:
    t = table([1, 100, 1, 100, 1, 1, 100, 1], flags={4: UNRESOLVED})
    t.kind[5] = RANGE
    errors = {4: "never ran", 6: "x"}
    d = details_of(8)
    b = bounds.Bounds(None, "last", 10)
    b.apply(t, errors, d, end=False)
    # Dropped: rows 0, 2, 7 (short resolved kernels); kept 1, 3, 4 (unresolved), 5 (range), 6.
    assert list(t.name) == [1, 3, 4, 5, 6]
    assert errors == {2: "never ran", 4: "x"}
    assert dict(d) == {1: "b30", 2: "b40", 3: "b50"}
    assert b.short == {0: [1, 1], 2: [1, 1], 7: [1, 1]}
    b.apply(t, errors, d, end=True)  # nothing new: nothing more dropped
    assert len(t) == 5


def test_a_ring_on_the_opencl_device(path: bool) -> None:
    pytest.importorskip("pyopencl")
    import kprof_opencl

    dev = kprof_opencl.default_device()
    if dev is None:
        pytest.skip("OpenCL finds no device here (pip install pocl-binary-distribution)")
    queue = kprof_opencl.profiling_queue(dev)
    import pyopencl as cl

    k = cl.Program(queue.context, "__kernel void k(__global float *x) { x[0] += 1; }").build().k
    x = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, 4)
    with kprof.profile(backends=["opencl"], max_records=10, keep="first") as p:
        for _ in range(50):
            k(queue, (1,), None, x)
        queue.finish()
    assert len(p.kernels) == 10 and all(r.error is None for r in p.kernels)
    assert p.meta["bounds"]["dropped"] == 40
