"""Launch sites and stacks in the Chrome trace: an interned integer id per event, one table of
stacks and frames in the trace's metadata, unique across the profiles of one file."""

from __future__ import annotations

import json
from array import array
from pathlib import Path
from typing import Any

from test_tree_views import X1, Y2, built

from kprof_core.data.sites import Site
from kprof_core.renderers.chrome import write_chrome_trace


def trace(tmp_path: Path, *profiles: Any) -> dict[str, Any]:
    path = tmp_path / "t.json"
    write_chrome_trace(path, list(profiles), labels=[f"p{i}" for i in range(len(profiles))])
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def frames(data: dict[str, Any], sid: int) -> list[str]:
    other = data["otherData"]
    return [other["frames"][f]["name"] for f in other["stacks"][sid]]


def test_each_launch_carries_its_stack_id_and_the_trace_one_table(tmp_path: Path) -> None:
    p = built()
    main = Site("/src/main.py", 9, "main")
    p.stacks = ((main, X1), (main, Y2))
    # Row 0 has a stack; the others only their site (frames_of: the site alone).
    p.table.stack = array("q", [0] + [-1] * (len(p.table) - 1))
    data = trace(tmp_path, p)
    other = data["otherData"]
    assert other["frames"][0] == {
        "name": "main.py:9 main", "file": "/src/main.py", "line": 9, "function": "main"
    }  # fmt: skip
    launches = [e for e in data["traceEvents"] if e.get("cat") == "launch" and e["ph"] == "X"]
    got = [frames(data, e["args"]["stack"]) if "stack" in e["args"] else None for e in launches]
    assert got[0] == ["main.py:9 main", "x.py:1 f"], "row 0, the first launch of thread 0"
    assert sorted(map(str, got)) == sorted(
        map(
            str,
            [
                ["main.py:9 main", "x.py:1 f"],
                ["y.py:2 g"],
                ["x.py:1 f"],
                ["y.py:2 g"],
                ["y.py:2 g"],
                ["y.py:2 g"],  # the unresolved launch keeps its site
                None,
                ["x.py:1 f"],
            ],
        )
    )
    assert all(isinstance(e.get("args", {}).get("stack", 0), int) for e in data["traceEvents"])
    ranges = [
        e for e in data["traceEvents"] if e.get("cat") == "range" and "queue" not in e["args"]
    ]
    # The ranges of thread 0 (step, step, inner inside it), then thread 1's.
    assert [frames(data, e["args"]["stack"]) for e in ranges] == [
        ["x.py:1 f"], ["x.py:1 f"], ["y.py:2 g"], ["x.py:1 f"]
    ]  # fmt: skip
    # No event spells a file name: only the table does.
    assert all("/src/" not in json.dumps(e) for e in data["traceEvents"])


def test_ids_are_unique_in_a_file_of_several_profiles(tmp_path: Path) -> None:
    a, b = built(), built()
    b.sites = [Y2, Site("/src/z.py", 3, "h")]  # y.py:2 is a's second site and b's first
    data = trace(tmp_path, a, b)
    assert [frames(data, i) for i in range(len(data["otherData"]["stacks"]))] == [
        ["x.py:1 f"], ["y.py:2 g"], ["z.py:3 h"]
    ]  # fmt: skip
    pids = {e["args"]["name"]: e["pid"] for e in data["traceEvents"] if e["name"] == "process_name"}
    by_pid: dict[int, set[str]] = {}
    for e in data["traceEvents"]:
        if e.get("cat") == "launch" and e["ph"] == "X" and "stack" in e["args"]:
            by_pid.setdefault(e["pid"], set()).add(frames(data, e["args"]["stack"])[-1])
    assert by_pid[pids["p0"]] == {"x.py:1 f", "y.py:2 g"}
    assert by_pid[pids["p1"]] == {"y.py:2 g", "z.py:3 h"}


def test_without_sites_the_trace_has_no_table(tmp_path: Path) -> None:
    p = built()
    p.sites = []
    p.table.site = array("q", [-1] * len(p.table))
    p.host.site = array("q", [-1] * len(p.host))
    data = trace(tmp_path, p)
    assert "stacks" not in data["otherData"] and "frames" not in data["otherData"]
    assert not any("stack" in e.get("args", {}) for e in data["traceEvents"])
