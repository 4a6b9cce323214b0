"""One number per thing (issue 35): a range's device time is the summed device time of the work
launched inside it, and every view (the summary's table, the tree, the diff, the HTML page, the
JSON export) gives the same figure to the nanosecond; its span on the device is a column of its
own. Checked on a profile whose rows are written out here, so every figure is known."""

from __future__ import annotations

import json
from typing import Any

from kprof_core.data.records import KERNEL, PLACED, RANGE, HostTable, QueueRecord, ThreadRecord
from kprof_core.data.timefmt import format_time
from kprof_core.result import Profile

Q = QueueRecord("testdev", "testdev 0", "queue 1", "testdev:0")


def profile() -> Profile:
    """Three "step" ranges on thread 0, the second with an "inner" range inside; kernels
    launched inside and one outside; the backend timed the spans of two steps only (the first
    was entered before the thread had a current queue)."""
    p = Profile()
    p.start_ns, p.end_ns = 0, 1_000_000
    p.names = ["k", "step", "inner", "other"]
    p.queues = [Q]
    p.threads = [ThreadRecord(1, "MainThread")]
    # (name, launch start, launch end, device start, duration)
    kernels = [
        (0, 1_000, 2_000, 3_000, 10_000),  # step 1
        (0, 4_000, 5_000, 14_000, 20_000),  # step 1
        (0, 101_000, 102_000, 103_000, 5_000),  # step 2, inside "inner"
        (3, 111_000, 112_000, 113_000, 7_000),  # step 2, outside "inner"
        (0, 201_000, 202_000, 203_000, 40_000),  # step 3
        (0, 500_000, 501_000, 502_000, 1_000),  # no range
    ]
    for nid, ls, le, s, d in kernels:
        p.table.append(nid, KERNEL, 0, 0, ls, le, s, d, -1, PLACED)
    # The spans a backend timed (first work's start to last work's end): steps 2 and 3.
    p.table.append(1, RANGE, 0, 0, 100_000, 150_000, 103_000, 17_000, -1, PLACED)
    p.table.append(1, RANGE, 0, 0, 200_000, 250_000, 203_000, 40_000, -1, PLACED)
    for nid, s, e in (
        (1, 0, 50_000),
        (1, 100_000, 150_000),
        (2, 100_500, 110_000),
        (1, 200_000, 250_000),
    ):
        p.host.append(nid, HostTable.RANGE, 0, s, e)
    return p


STEP_WORK = [30_000, 12_000, 40_000]  # per instance: its kernels' device time, nested included


def test_the_summary_counts_every_instance_by_its_work_and_its_span_apart() -> None:
    p = profile()
    rows = {r.name: r for r in p.summary().device_ranges}
    step = rows["step"]
    assert (step.calls, step.total_ns, step.min_ns, step.max_ns) == (3, 82_000, 12_000, 40_000)
    assert step.span_ns == 17_000 + 40_000  # the two the backend timed
    inner = rows["inner"]
    assert (inner.calls, inner.total_ns, inner.span_ns) == (1, 5_000, None)
    assert "other" not in rows  # a kernel, not a range
    assert p.durations().device_ranges[("step", 0)] == STEP_WORK


def test_every_view_gives_the_same_device_time(tmp_path: Any) -> None:
    p = profile()
    total = 82_000
    tree = {n.name: n for n in p.tree().root.walk() if n.kind == "range"}
    assert tree["step"].total_ns == total
    assert tree["inner"].total_ns == 5_000
    diff = p.diff(profile())
    assert diff.row("step", "device_ranges").total_before == total
    assert diff.row("step", "device_ranges").calls_before == 3
    by_line = p.diff(profile(), by="line")
    assert (
        sum(r.total_before for r in by_line.section("device_ranges") if r.name == "step") == total
    )
    data = p.to_json()
    assert [r["total_ns"] for r in data["summary"]["device_ranges"] if r["name"] == "step"] == [
        total
    ]
    text = str(p)
    ranges = text[text.index("Device-side ranges") :].splitlines()
    assert "span: its first work's start to its last work's end" in ranges[0]
    step = next(x for x in ranges if x.endswith("  step"))
    cells = step.split()
    assert cells[2:4] == ["82", "µs"] and cells[4] == "3"  # Total time, Calls
    assert cells[-3:] == ["57", "µs", "step"]  # Span, Name
    p.export_html(tmp_path / "p.html")
    page = (tmp_path / "p.html").read_text()
    assert f"<td>{format_time(total)}</td><td>3</td>" in page
    json.dumps(data)  # JSON-able
