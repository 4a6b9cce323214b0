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

DEV = "testdev testdev 0"


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
    counters = [e for e in trace["traceEvents"] if e["ph"] == "C"]
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
