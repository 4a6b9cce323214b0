"""Device memory in the views (issue 23): the report's section, the Chrome trace's counter
track, the JSON export and the DataFrame, on known allocations of the test backend."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
from kprof_testbackend import device

import kprof
from kprof_core.low_level import native
from kprof_core.renderers import memory as memory_view

DEV = "testdev 0"


@pytest.fixture(params=[True, False], ids=["compiled", "pure"])
def p(request: Any, testbackends: Any) -> Iterator[kprof.Profile]:
    """A profile whose live bytes go 1000, 1500, 500, 2500, 2800, 2500 (peak 2800), leaving
    b (500) and c (2000) allocated."""
    native.use_compiled(request.param)
    try:
        with kprof.profile(backends="testdev") as prof:
            a = device.alloc(1000)
            device.alloc(500)
            a.free()
            device.alloc(2000)
            d = device.alloc(300)
            d.free()
        yield prof
    finally:
        native.use_compiled(True)


def test_the_report_says_peak_and_what_is_still_allocated(p: kprof.Profile) -> None:
    text = str(p)
    section = text[text.index("Device memory") :].split("\n\n")[0].splitlines()
    assert section[0] == "Device memory (allocations the backends reported):"
    assert [c.strip() for c in section[1].split("  ") if c] == [
        "Peak",
        "Peak at",
        "Live at end",
        "Allocs",
        "Frees",
        "Device",
    ]
    assert len(section) == 4
    cells = section[3].split()  # the peak's time (cells 2, 3) is the host clock's
    assert cells[:2] == ["2.73", "KiB"] and cells[4:] == ["2.44", "KiB", "4", "2", *DEV.split()]
    leaks = text[text.index("Still allocated at the end") :].split("\n\n")[0].splitlines()
    assert leaks[0] == "Still allocated at the end (possible leaks), largest first:"
    assert [ln.split()[0:2] for ln in leaks[3:]] == [["1.95", "KiB"], ["500", "B"]]
    assert all(ln.endswith(f"{DEV}  -") for ln in leaks[3:])


def test_a_profile_without_memory_has_no_section(testbackends: Any) -> None:
    with kprof.profile(backends="testnots") as p:
        pass
    assert "Device memory" not in str(p) and memory_view.memory_lines(p.memory) == []
    assert "memory" not in p.to_json()


def test_past_ten_leaks_the_rest_are_counted(testbackends: Any) -> None:
    with kprof.profile(backends="testdev") as p:
        for n in range(1, 13):
            device.alloc(n * 100)
    lines = memory_view.memory_lines(p.memory)
    assert lines[-1] == " ... and 2 more (300 B)"  # the two smallest: 200 + 100
    assert sum(1 for ln in lines if ln.endswith(f"{DEV}  -")) == 10


def test_the_chrome_trace_has_a_counter_track_of_live_bytes(p: kprof.Profile) -> None:
    buf = io.StringIO()
    p.export_chrome_trace(buf)
    trace = json.loads(buf.getvalue())
    every = [e for e in trace["traceEvents"] if e["ph"] == "C"]
    # Device memory's counters; device time's (busy, per queue) would be in the device's own
    # process: this profile launched nothing, so it has none.
    counters = [e for e in every if e["cat"] == "memory"]
    assert counters == every
    assert [e["args"]["bytes"] for e in counters] == [1000, 1500, 500, 2500, 2800, 2500]
    assert {e["name"] for e in counters} == {f"live bytes, {DEV}"}
    pid = counters[0]["pid"]
    names = [
        e["args"]["name"]
        for e in trace["traceEvents"]
        if e["ph"] == "M" and e["name"] == "process_name" and e["pid"] == pid
    ]
    assert names == ["device memory"]
    ts = [e["ts"] for e in counters]
    base = trace["baseTimeNanoseconds"]
    assert ts == [round((t - base) / 1000, 3) for t in p.memory.table.time]


def test_json_and_dataframe_hold_the_events_and_figures(p: kprof.Profile) -> None:
    m = p.to_json()["memory"]
    assert m["peak"] == {DEV: 2800} and m["live_bytes_at_end"] == {DEV: 2500}
    assert [a["nbytes"] for a in m["live_at_end"]] == [2000, 500]
    assert [(e["kind"], e["nbytes"], e["live_bytes"]) for e in m["events"]] == [
        ("alloc", 1000, 1000),
        ("alloc", 500, 1500),
        ("free", 1000, 500),
        ("alloc", 2000, 2500),
        ("alloc", 300, 2800),
        ("free", 300, 2500),
    ]
    buf = io.StringIO()
    p.to_json(buf)
    assert json.loads(buf.getvalue())["memory"] == json.loads(json.dumps(m))
    pandas = pytest.importorskip("pandas")
    df = p.memory.to_dataframe()
    assert isinstance(df, pandas.DataFrame)
    assert list(df["live_bytes"]) == [1000, 1500, 500, 2500, 2800, 2500]
    assert list(df["kind"]) == ["alloc", "alloc", "free", "alloc", "alloc", "free"]


# -- .kprof files -------------------------------------------------------------------------------


def test_memory_is_saved_and_loads_back_exactly(p: kprof.Profile, tmp_path: Any) -> None:
    from kprof_core.io.storage import peek_version

    path = tmp_path / "m.kprof"
    p.save(path)
    data = path.read_bytes()
    assert peek_version(data) == 5
    q = kprof.load(path)
    assert q.memory.events == p.memory.events and q.memory.labels == [DEV]
    assert q.memory.peak == {DEV: 2800} and q.memory.live_at_end == p.memory.live_at_end
    assert list(q.memory.table.address) == list(p.memory.table.address)
    assert "Still allocated at the end" in str(q)
    p.save(path, compress=False)
    assert kprof.load(path).memory.events == p.memory.events


def test_a_profile_without_memory_is_still_a_version_1_file(testbackends: Any) -> None:
    from kprof_core.io.storage import dumps, peek_version

    with kprof.profile(backends="testnots") as p:
        pass
    assert peek_version(dumps(p)) == 1
    assert not kprof.load(io.BytesIO(dumps(p))).memory


def test_a_damaged_memory_part_is_refused(p: kprof.Profile) -> None:
    from kprof_core.io.storage import dumps

    data = dumps(p, compress=False)
    with pytest.raises(kprof.ProfileFileError, match="truncated"):
        kprof.load(io.BytesIO(data[:-9]))
    flipped = data[:-3] + bytes([data[-3] ^ 1]) + data[-2:]  # in the last column, site
    with pytest.raises(kprof.ProfileFileError, match=r"column memory\.site checksum mismatch"):
        kprof.load(io.BytesIO(flipped))
    p.memory.table.device[-1] = 7  # one device only: written as it is, refused when read
    with pytest.raises(kprof.ProfileFileError, match="a memory device index is out of range"):
        kprof.load(io.BytesIO(dumps(p)))


def test_combined_ranks_keep_each_ranks_memory_apart(testbackends: Any) -> None:
    ps = []
    for rank, sizes in ((0, (100, 200)), (1, (1000,))):
        with kprof.profile(backends="testdev") as p:
            for n in sizes:
                device.alloc(n)
        p.meta.update(rank=rank, world_size=2)
        ps.append(p)
    both = kprof.combine(ps)
    assert both.memory.peak == {f"rank 0: {DEV}": 300, f"rank 1: {DEV}": 1000}
    assert sorted(a.nbytes for a in both.memory.live_at_end) == [100, 200, 1000]
    assert len(both.memory.events) == 3
