"""Launch stacks as data (no device): ``frames_of`` reads a row's stack, its site alone, or
nothing, whichever the profile recorded."""

from __future__ import annotations

import csv
import io
import json
from array import array
from pathlib import Path
from typing import Any

import pytest
from hostile import assemble, split, with_column

import kprof
from kprof_core.data.records import KERNEL, PLACED, QueueRecord, ThreadRecord
from kprof_core.data.sites import Site
from kprof_core.data.stacks import frames_of
from kprof_core.io import storage
from kprof_core.result import loads

OUTER = Site("/src/main.py", 10, "main")
MID = Site("/src/train.py", 20, "step")
LEAF = Site("/src/model.py", 30, "forward")


def sites_only() -> kprof.Profile:
    p = kprof.Profile(backends=["testdev"])
    p.names = ["a"]
    p.queues = [QueueRecord("testdev", "dev", "queue 1", "testdev:0")]
    p.threads = [ThreadRecord(1, "MainThread")]
    p.sites = [LEAF, MID]
    t0 = 1_000_000
    for k, site in enumerate([0, 1, -1]):
        s = t0 + 1000 * k
        p.table.append(0, KERNEL, 0, 0, s, s + 10, s + 20, 100, -1, PLACED, site)
    p.host.append(0, 0, 0, t0, t0 + 5000, 1)
    p.start_ns, p.end_ns = t0, t0 + 10_000
    return p


def test_frames_of_falls_back_to_the_site_or_nothing() -> None:
    p = sites_only()
    assert frames_of(p, "device", 0) == (LEAF,)
    assert frames_of(p, "device", 1) == (MID,)
    assert frames_of(p, "device", 2) == ()
    assert frames_of(p, "host", 0) == (MID,)
    assert kprof.Profile().stacks == ()
    with pytest.raises(ValueError, match='"device" or "host"'):
        frames_of(p, "other", 0)  # type: ignore[arg-type]


def with_stacks() -> kprof.Profile:
    """``sites_only`` with stacks: row 0 main > step > forward, row 1 main > step, row 2 none;
    the host range main > step."""
    p = sites_only()
    p.stacks = ((OUTER, MID), (OUTER, MID, LEAF))
    p.table.stack = array("q", [1, 0, -1])
    p.host.stack = array("q", [0])
    return p


def test_frames_of_reads_the_stack_outermost_first() -> None:
    p = with_stacks()
    assert frames_of(p, "device", 0) == (OUTER, MID, LEAF)
    assert frames_of(p, "device", 1) == (OUTER, MID)
    assert frames_of(p, "device", 2) == ()
    assert frames_of(p, "host", 0) == (OUTER, MID)


def test_stacks_survive_a_save_and_load_as_version_5() -> None:
    data = storage.dumps(with_stacks())
    assert storage.peek_version(data) == 5
    back = loads(data)
    assert back.stacks == with_stacks().stacks
    assert list(back.table.stack) == [1, 0, -1] and list(back.host.stack) == [0]
    assert [frames_of(back, "device", i) for i in range(3)] == [
        frames_of(with_stacks(), "device", i) for i in range(3)
    ]
    # Without stacks, every row's stack is -1 in the file, and loads as no stack column.
    old = storage.dumps(sites_only())
    assert storage.peek_version(old) == 5
    assert loads(old).stacks == () and len(loads(old).table.stack) == 0


def test_a_damaged_stack_column_or_list_is_refused() -> None:
    data = storage.dumps(with_stacks())
    bad = with_column(data, "device", "stack", [0, 2, -1])
    with pytest.raises(
        kprof.ProfileFileError, match=r"device\.stack holds a value outside -1\.\.1"
    ):
        loads(bad)
    header, stored = split(data)
    header["stacks"] = [[0, 9]]
    with pytest.raises(kprof.ProfileFileError, match="'stacks' is not a list of lists"):
        loads(assemble(header, stored))
    header, stored = split(data)
    header["columns"] = [c for c in header["columns"] if c["name"] != "stack"]
    stored = stored[: len(header["columns"])]
    with pytest.raises(kprof.ProfileFileError, match="does not list exactly the record columns"):
        loads(assemble(header, stored))  # a version 5 file without the stack columns


def test_combined_profiles_keep_their_stacks() -> None:
    a, b = with_stacks(), sites_only()
    a.meta.update(rank=0, pid=1)
    b.meta.update(rank=1, pid=2)
    c = kprof.combine([a, b])
    assert c.stacks == a.stacks
    assert list(c.table.stack) == [1, 0, -1, -1, -1, -1] and list(c.host.stack) == [0, -1]
    assert frames_of(c, "device", 0) == (OUTER, MID, LEAF)
    assert frames_of(c, "device", 3) == (LEAF,)  # b's row: its site alone
    d = kprof.combine([sites_only(), sites_only()])
    assert d.stacks == () and len(d.table.stack) == 0


def test_exports_carry_the_stack() -> None:
    p = with_stacks()
    j = p.to_json()
    assert j is not None
    assert j["stacks"][1] == [
        {"file": "/src/main.py", "line": 10, "function": "main"},
        {"file": "/src/train.py", "line": 20, "function": "step"},
        {"file": "/src/model.py", "line": 30, "function": "forward"},
    ]
    assert [r["stack"] for r in j["device"]] == [1, 0, None]
    assert [r["stack"] for r in j["host"]] == [0]
    rows = list(csv.DictReader(io.StringIO(p.to_csv() or "")))
    dev = [r["stack"] for r in rows if r["record"] == "device"]
    assert dev == [
        "/src/main.py:10 main;/src/train.py:20 step;/src/model.py:30 forward",
        "/src/main.py:10 main;/src/train.py:20 step",
        "",
    ]
    assert "stacks" not in (sites_only().to_json() or {})


# -- views: summary(by="stack"), the tree as text, speedscope ----------------------------------


def test_summary_by_stack_sums_device_time_per_stack() -> None:
    p = with_stacks()
    p.table.duration[0] = 300
    rows = p.summary(by="stack")
    assert [(r.stack, r.stats.calls, r.stats.total_ns) for r in rows] == [
        ((OUTER, MID, LEAF), 1, 300),
        ((), 1, 100),  # ties by name: "(site unknown)" first
        ((OUTER, MID), 1, 100),
    ]
    assert rows[0].stats.name == "main.py:10 main > train.py:20 step > model.py:30 forward"
    assert rows[1].stats.name == "(site unknown)"
    assert [k.name for k in rows[0].kernels] == ["a"]
    # Only sites known: one frame per row, as by="line" groups them.
    only = sites_only().summary(by="stack")
    assert [(r.stack, r.stats.total_ns) for r in only] == [((), 100), ((LEAF,), 100), ((MID,), 100)]
    total = sum(r.total_ns for r in p.summary().device)
    assert sum(r.stats.total_ns for r in rows) == total == 500


def test_the_tree_prints_ranges_then_frames_then_kernels() -> None:
    p = with_stacks()
    p.table.duration[0] = 300
    text = str(p.tree()).splitlines()
    assert text[0].startswith("Device time as a tree")
    body = [line[29:] for line in text[3:]]  # after time, share and calls
    assert body == [
        "all device work",
        "└─ range a",
        "   ├─ main.py:10 main",
        "   │  └─ train.py:20 step",
        "   │     ├─ model.py:30 forward",
        "   │     │  └─ kernel a",
        "   │     └─ kernel a",
        "   └─ kernel a",
    ]
    assert text[3].split()[:3] == ["500", "ns", "100.0%"] and text[3].split()[3] == "3"
    assert text[5].split()[:4] == ["400", "ns", "80.0%", "2"]
    shares = p.tree().report(min_share=50).splitlines()
    # Each 20% "kernel a" is counted on a line of its own, in its place.
    assert [x[29:] for x in shares[3:]] == [
        *body[:5],
        "   │     │  └─ kernel a",
        "   │     └─ (1 more under 50%)",
        "   └─ (1 more under 50%)",
    ]


def tree_totals(node: Any) -> list[tuple[int, int]]:
    """Every node's (device time, calls) against its children's sums (kernels are leaves)."""
    out = []
    for n in node.walk():
        if n.children:
            out.append(
                (
                    n.total_ns - sum(c.total_ns for c in n.children),
                    n.calls - sum(c.calls for c in n.children),
                )
            )
    return out


def test_the_trees_totals_equal_the_summarys() -> None:
    for p in (with_stacks(), sites_only()):
        root = p.tree().root
        s = p.summary()
        assert root.total_ns == sum(r.total_ns for r in s.device)
        assert root.calls == sum(r.calls for r in s.device)
        assert set(tree_totals(root)) == {(0, 0)}  # each node is the sum of its children


#: speedscope's file format, as its published schema states it for a sampled profile
#: (https://www.speedscope.app/file-format-schema.json, from src/lib/file-format-spec.ts):
#: the file's required fields, frames with an optional file, line and column, and a sampled
#: profile's samples (lists of frame indexes) and weights.
SPEEDSCOPE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["$schema", "shared", "profiles"],
    "properties": {
        "$schema": {"const": "https://www.speedscope.app/file-format-schema.json"},
        "shared": {
            "type": "object",
            "required": ["frames"],
            "properties": {
                "frames": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["name"],
                        "additionalProperties": False,
                        "properties": {
                            "name": {"type": "string"},
                            "file": {"type": "string"},
                            "line": {"type": "number"},
                            "col": {"type": "number"},
                        },
                    },
                }
            },
        },
        "profiles": {
            "type": "array",
            "items": {
                "type": "object",
                "required": [
                    "type",
                    "name",
                    "unit",
                    "startValue",
                    "endValue",
                    "samples",
                    "weights",
                ],
                "properties": {
                    "type": {"const": "sampled"},
                    "name": {"type": "string"},
                    "unit": {
                        "enum": [
                            "none",
                            "nanoseconds",
                            "microseconds",
                            "milliseconds",
                            "seconds",
                            "bytes",
                        ]
                    },
                    "startValue": {"type": "number"},
                    "endValue": {"type": "number"},
                    "samples": {
                        "type": "array",
                        "items": {"type": "array", "items": {"type": "integer", "minimum": 0}},
                    },
                    "weights": {"type": "array", "items": {"type": "number"}},
                },
            },
        },
        "name": {"type": "string"},
        "activeProfileIndex": {"type": "number"},
        "exporter": {"type": "string"},
    },
}


def check_speedscope(doc: dict[str, Any]) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(doc, SPEEDSCOPE_SCHEMA)
    nframes = len(doc["shared"]["frames"])
    for prof in doc["profiles"]:
        # What the schema cannot say: indexes within the frames, a weight per sample, and
        # endValue no less than startValue.
        assert all(i < nframes for s in prof["samples"] for i in s)
        assert len(prof["weights"]) == len(prof["samples"])
        assert prof["endValue"] >= prof["startValue"]


def test_the_speedscope_file_follows_the_format_and_weighs_device_time(tmp_path: Path) -> None:
    p = with_stacks()
    p.table.duration[0] = 300
    p.export_speedscope(tmp_path / "p.speedscope.json")
    doc = json.loads((tmp_path / "p.speedscope.json").read_text())
    check_speedscope(doc)
    (prof,) = doc["profiles"]
    assert sum(prof["weights"]) == sum(r.total_ns for r in p.summary().device) == 500
    frames = doc["shared"]["frames"]
    paths = [[frames[i]["name"] for i in s] for s in prof["samples"]]
    assert paths == [
        ["range a", "main", "step", "forward", "a"],
        ["range a", "main", "step", "a"],
        ["range a", "a"],
    ]
    assert prof["weights"] == [300, 100, 100]
    assert frames[1] == {"name": "main", "file": "/src/main.py", "line": 10}
    # The schema check refuses what speedscope would.
    bad = json.loads(json.dumps(doc))
    bad["shared"]["frames"][0]["line"] = "10"
    with pytest.raises(Exception, match="is not of type 'number'"):
        check_speedscope(bad)


def deep(depth: int) -> kprof.Profile:
    """``sites_only`` whose row 0 has a stack ``depth`` frames deep (each frame its own)."""
    p = sites_only()
    p.stacks = (tuple(Site("/src/deep.py", i, f"f{i}") for i in range(depth)),)
    p.table.stack = array("q", [0, -1, -1])
    p.host.stack = array("q", [-1])
    return p


def test_a_file_with_a_stack_deeper_than_kprof_records_is_refused() -> None:
    """A crafted file whose stack is 8,000 frames deep (a real one keeps at most 256) is
    refused in one line instead of rendered: the tree took 17 s and 800 MB on such a file."""
    from kprof_core.io.fileformat import MAX_STACK_FRAMES
    from kprof_core.recording.sites import MAX_STACK_DEPTH

    assert MAX_STACK_FRAMES == MAX_STACK_DEPTH  # a file holds what kprof records, no more
    assert len(loads(storage.dumps(deep(MAX_STACK_FRAMES))).stacks[0]) == MAX_STACK_FRAMES
    header, stored = split(storage.dumps(deep(8)))
    header["frames"] = [["/src/deep.py", i, f"f{i}"] for i in range(8000)]
    header["stacks"] = [list(range(8000))]
    with pytest.raises(
        kprof.ProfileFileError, match="a stack holds 8000 frames, more than the 256 kprof records"
    ):
        loads(assemble(header, stored), name="deep.kprof")


def test_views_of_a_deep_stack_need_no_recursion(tmp_path: Path) -> None:
    """A profile built in memory may hold deeper stacks than a file: the tree, its text, the
    HTML page and speedscope walk them without recursion (3,000 frames is past Python's limit)."""
    import sys

    depth = 3_000
    assert depth > sys.getrecursionlimit()
    p = deep(depth)
    tree = p.tree()
    deepest, todo = 0, [(tree.root, 0)]
    while todo:
        node, level = todo.pop()
        deepest = max(deepest, level)
        todo.extend((c, level + 1) for c in node.children)
    assert deepest == depth + 2  # the enclosing range, every frame, then the kernel
    assert "f2999" in str(tree)
    assert "f2999" in tree._repr_html_()
    p.export_html(tmp_path / "deep.html")
    assert (tmp_path / "deep.html").read_text().count("<details") >= depth
    p.export_speedscope(tmp_path / "deep.speedscope.json")
    assert json.loads((tmp_path / "deep.speedscope.json").read_text())["shared"]["frames"]
