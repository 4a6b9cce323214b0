"""Launch stacks as data (no device): ``frames_of`` reads a row's stack, its site alone, or
nothing, whichever the profile recorded."""

from __future__ import annotations

import csv
import io
from array import array

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


def test_stacks_survive_a_save_and_load_as_version_4() -> None:
    data = storage.dumps(with_stacks())
    assert storage.peek_version(data) == 4
    back = loads(data)
    assert back.stacks == with_stacks().stacks
    assert list(back.table.stack) == [1, 0, -1] and list(back.host.stack) == [0]
    assert [frames_of(back, "device", i) for i in range(3)] == [
        frames_of(with_stacks(), "device", i) for i in range(3)
    ]
    # Without stacks, the file is version 3 as before, and loads with no stack column.
    old = storage.dumps(sites_only())
    assert storage.peek_version(old) == 3
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
    v3 = assemble(header, stored)
    v4 = v3[:8] + (4).to_bytes(4, "little") + v3[12:]  # a version 4 file without the columns
    with pytest.raises(kprof.ProfileFileError, match="does not list a stack column"):
        loads(v4)


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
