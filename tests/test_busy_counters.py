"""Device-time counter tracks (issue 22): per queue and per device, the percentage of each time
bin the device was busy (the union of its rows' intervals), in the Chrome trace and in the
Perfetto export (parsed by the ``perfetto`` package's classes, both encoders), equal to the
numbers worked out by hand on a profile of known intervals; the bins' rule; the sums against
the idle analysis's busy time."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
from pftrace import decode
from test_perfetto import _both
from tracecheck import add_device_range, synthetic, validate

from kprof_core.data.records import (
    APPROXIMATE,
    COPY,
    HOST_TIMED,
    KERNEL,
    PLACED,
    UNRESOLVED,
    QueueRecord,
    ThreadRecord,
)
from kprof_core.low_level import native
from kprof_core.renderers import busy
from kprof_core.renderers.chrome import write_chrome_trace
from kprof_core.renderers.timeline import Timeline
from kprof_core.result import Profile

T0 = 1_000_000_000
A, B = "testdev dev A", "testdev dev B"


@pytest.fixture(params=[True, False], ids=["compiled", "pure"])
def path(request: Any) -> Iterator[bool]:
    """The arithmetic's helpers: the compiled recorder's sort, or Python's."""
    if request.param and native.compiled() is None:
        pytest.skip("the compiled recorder is not built")
    native.use_compiled(request.param)
    try:
        yield request.param
    finally:
        native.use_compiled(True)


def known() -> Profile:
    """Device A: queue 1 with overlapping kernels, one across three bins, idle gaps, a
    zero-length kernel and a copy past the block's end; queue 2 with a kernel over queue 1's
    and rows that do not count (a range's device time, host-timed, approximate, unresolved).
    Device B: one queue, one kernel. The block is [T0, T0 + 10 µs); the copy ends at 10.5 µs."""
    p = Profile()
    p.meta = {"host": "synth", "pid": 1}
    p.names = ["k", "[copy host to device]"]
    p.threads = [ThreadRecord(1, "MainThread")]
    p.queues = [
        QueueRecord("testdev", "dev A", "queue 1", "testdev:A"),
        QueueRecord("testdev", "dev A", "queue 2", "testdev:A"),
        QueueRecord("testdev", "dev B", "queue 1", "testdev:B"),
    ]
    p.start_ns, p.end_ns = T0, T0 + 10_000

    def row(q: int, s: int, e: int, kind: int = KERNEL, flags: int = PLACED) -> None:
        name = 1 if kind == COPY else 0
        nbytes = 64 if kind == COPY else -1
        p.table.append(name, kind, q, 0, T0 + s, T0 + s, T0 + s, e - s, nbytes, flags)

    row(0, 500, 1500)
    row(0, 1200, 1800)  # overlaps the one before: [500, 1800) once
    row(0, 3000, 3250)
    row(0, 5000, 8000)  # three whole bins
    row(0, 9000, 9000)  # no length
    row(0, 9500, 10_500, COPY)  # past the block's end: the span ends at 10.5 µs
    row(1, 1000, 2000)  # on queue 1's [500, 1800) for the device
    row(1, 4000, 4333)
    row(1, 2000, 3000, flags=PLACED | HOST_TIMED)
    row(1, 6000, 7000, flags=PLACED | APPROXIMATE)
    row(1, 8000, 8000, flags=UNRESOLVED)
    p.errors[len(p.table) - 1] = "never answered"
    add_device_range(p, "step", 1, 0, T0, T0 + 10_000)  # would cover queue 2's gaps
    row(2, 2500, 2750)
    p._finished = True
    return p


_ = 0.0
#: Per counter track, the value at T0 + 0, 1, ..., 10 µs, then 0 at the span's end (10.5 µs).
EXPECTED = {
    f"{A} / busy, queue 1": [50.0, 80.0, _, 25.0, _, 100.0, 100.0, 100.0, _, 50.0, 100.0, _],
    f"{A} / busy, queue 2": [_, 100.0, _, _, 33.3, _, _, _, _, _, _, _],
    f"{A} / busy, all queues": [50.0, 100.0, _, 25.0, 33.3, 100.0, 100.0, 100.0, _, 50.0, 100.0, _],
    f"{B} / busy, queue 1": [_, _, 25.0, _, _, _, _, _, _, _, _, _],
}
TIMES = [*range(0, 10_001, 1000), 10_500]  # ns since the trace's base, T0


def test_the_busy_bins_of_known_intervals(path: bool) -> None:
    bins, tracks = busy.busy_tracks(Timeline(known()))
    assert bins == busy.Bins(T0, T0 + 10_500, 1000) and bins.count == 11
    assert bins.edges() == [T0 + t for t in TIMES]
    got = {
        f"{Timeline(known()).processes[pi].name} / {tr.name}": list(tr.busy)
        for pi, trs in tracks.items()
        for tr in trs
    }
    assert got == {
        f"{A} / busy, queue 1": [500, 800, 0, 250, 0, 1000, 1000, 1000, 0, 500, 500],
        f"{A} / busy, queue 2": [0, 1000, 0, 0, 333, 0, 0, 0, 0, 0, 0],
        f"{A} / busy, all queues": [500, 1000, 0, 250, 333, 1000, 1000, 1000, 0, 500, 500],
        f"{B} / busy, queue 1": [0, 0, 250, 0, 0, 0, 0, 0, 0, 0, 0],
    }


def test_the_chrome_trace_has_the_hand_computed_percentages(path: bool) -> None:
    f = io.StringIO()
    write_chrome_trace(f, [known()])
    c = validate(json.loads(f.getvalue()))
    got = {
        f"{c.processes[pid]} / {name}": [(round(e["ts"] * 1000), e["args"]) for e in evs]
        for (pid, name), evs in c.counters.items()
    }
    assert got == {
        k: [(t, {"percent": v}) for t, v in zip(TIMES, vs, strict=True)]
        for k, vs in EXPECTED.items()
    }
    assert {e["cat"] for evs in c.counters.values() for e in evs} == {"busy"}


def test_the_perfetto_trace_has_the_same_counters_on_both_encoders(path: bool) -> None:
    d = decode(_both(known()))  # the compiled and the Python encoder: the same bytes
    assert dict(d.counters) == {k: list(zip(TIMES, vs, strict=True)) for k, vs in EXPECTED.items()}
    assert all(type(v) is float for pts in d.counters.values() for _, v in pts)
    assert set(d.unit_names.values()) == {"%"} and set(d.units.values()) == {0}


@pytest.mark.parametrize("queues", [1, 2])
def test_summed_bins_are_the_idle_analysis_busy_time(path: bool, queues: int) -> None:
    """Two implementations of one definition: the counters' bins, summed, and
    ``Profile.analysis()``'s busy time per queue and per device (the synthetic profile's span
    starts at its block, as the analysis's window)."""
    p = synthetic(3000, threads=2, queues_per_thread=queues, seed=7, host_timed_every=9)
    tl = Timeline(p)
    bins, tracks = busy.busy_tracks(tl)
    assert bins is not None and bins.t0 == p.start_ns
    got = {
        (tl.processes[pi].device_key, tr.name): sum(tr.busy)
        for pi, trs in tracks.items()
        for tr in trs
    }
    a = p.analysis()
    want = {(g.key.split("/")[0], f"busy, {g.key.split('/')[1]}"): g.busy_ns for g in a.queues}
    if len(a.queues) > 1:
        want.update({(g.key, "busy, all queues"): g.busy_ns for g in a.devices})
    assert got == want and all(want.values())


def test_points_per_track_stay_bounded() -> None:
    """However many launches: at most MAX_BINS + 1 points per counter track."""
    p = synthetic(20_000, threads=1, seed=3)
    f = io.StringIO()
    write_chrome_trace(f, [p])
    c = validate(json.loads(f.getvalue()))
    bins, _ = busy.busy_tracks(Timeline(p))
    assert bins is not None and bins.count <= busy.MAX_BINS
    assert [len(v) for v in c.counters.values()] == [bins.count + 1]
    d = decode(_both(p))
    assert [len(v) for v in d.counters.values()] == [bins.count + 1]


@pytest.mark.parametrize(
    ("span", "width"),
    [
        (1, 1000),
        (999_999, 1000),
        (1_000_001, 2000),
        (2_000_000, 2000),
        (2_000_001, 5000),
        (5_000_001, 10_000),
        (10**9, 10**6),
        (3 * 10**12, 5 * 10**9),
    ],
)
def test_the_bin_width_rule(span: int, width: int) -> None:
    assert busy.bin_width(span) == width
    bins = busy.Bins(0, span, width)
    assert bins.count <= busy.MAX_BINS and len(bins.edges()) == bins.count + 1


def test_a_profile_with_no_device_work_has_no_counters() -> None:
    p = known()
    for q in range(3):
        p.queues[q] = QueueRecord("host", "", "", "host")
    f = io.StringIO()
    write_chrome_trace(f, [p])
    assert not validate(json.loads(f.getvalue())).counters
    assert busy.busy_tracks(Timeline(p)) == (None, {})
