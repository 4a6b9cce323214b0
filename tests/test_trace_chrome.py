"""The Chrome trace / Perfetto JSON export: well formed, strictly nested tracks, closed flows,
no kernel before its launch, several profiles on one timeline, streaming, and write errors."""

from __future__ import annotations

import io
import itertools
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tracecheck import add_device_range, ns, synthetic, validate, validate_text

import kprof
from kprof_core.data.records import (
    COPY,
    HOST_TIMED,
    KERNEL,
    PLACED,
    RANGE,
    UNRESOLVED,
    HostTable,
    QueueRecord,
    ThreadRecord,
)
from kprof_core.io.exports import ExportError
from kprof_core.renderers.chrome import write_chrome_trace
from kprof_core.result import Profile


def _export(p: Profile, tmp_path: Path, name: str = "t.json") -> dict[str, Any]:
    path = tmp_path / name
    p.export_chrome_trace(path)
    with open(path) as f:
        return json.load(f)


def test_a_real_profile_round_trips_with_its_processes_tracks_and_flows(
    testbackends: Any, tdq: Callable[..., Any], tmp_path: Path
) -> None:
    q1, q2 = tdq(), tdq()

    def worker() -> None:
        with q2, kprof.range("worker"):
            for _ in range(3):
                q2.launch("k2", 50)

    with kprof.profile() as p:
        with q1, kprof.range("step"):
            t = threading.Thread(target=kprof.propagate(worker), name="helper")
            t.start()
            for _ in range(4):
                q1.launch("k1", 50)
            kprof.mark("mid")
            t.join()
    doc = _export(p, tmp_path)
    c = validate(doc)
    assert doc["baseTimeNanoseconds"] == p.start_ns
    assert doc["displayTimeUnit"] == "ns"
    procs = sorted(c.processes.values())
    assert procs == sorted([f"host {p.meta['host']} pid {os.getpid()}", "testdev 0"])
    assert sorted(c.threads.values()) == sorted(
        [
            "thread 1 (MainThread)",
            "thread 2 (helper)",
            f"queue {q1.index}, thread 1",
            f"queue {q2.index}, thread 2",
        ]
    )
    # Every kernel is exactly where the profile placed it, with a flow from its launch.
    kernels = c.all_slices("kernel")
    assert sorted(e["name"] for e in kernels) == ["k1"] * 4 + ["k2"] * 3
    placed = sorted(
        (k.name, k.start_ns + p.start_ns - doc["baseTimeNanoseconds"], k.duration_ns)
        for k in p.kernels
    )
    assert sorted((e["name"], ns(e["ts"]), ns(e["dur"])) for e in kernels) == placed
    assert len(c.flows) == 7
    assert {e["args"]["queue"] for e in kernels} == {f"queue {q1.index}", f"queue {q2.index}"}
    launches = c.all_slices("launch")
    assert {e["args"]["queue"] for e in launches} == {
        f"testdev 0, queue {q1.index}",
        f"testdev 0, queue {q2.index}",
    }
    # Device ranges sit on the queue tracks, enclosing their kernels; markers are instants.
    (dstep,) = [e for e in c.all_slices("range") if e["name"] == "step" and "queue" in e["args"]]
    assert c.track_of("step", "range") >= c.track_of("k1", "kernel")
    assert [e["name"] for e in c.instants] == ["mid"]
    labels = [e for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "process_labels"]
    assert any("host clock (test device) (error ≤ 0 ns)" in e["args"]["labels"] for e in labels)
    assert dstep["dur"] > 0


def test_overlapping_kernels_on_two_queues_are_on_two_tracks(
    testbackends: Any, tdq: Callable[..., Any], tmp_path: Path
) -> None:
    q1, q2 = tdq(), tdq()
    with kprof.profile() as p:
        with q1:
            q1.launch("a", 60_000)  # 60 ms each, launched microseconds apart: they overlap
        with q2:
            q2.launch("b", 60_000)
    c = validate(_export(p, tmp_path))
    (a,), (b,) = ([e for e in c.all_slices("kernel") if e["name"] == n] for n in "ab")
    assert ns(a["ts"]) < ns(b["ts"]) + ns(b["dur"]) and ns(b["ts"]) < ns(a["ts"]) + ns(a["dur"])
    ka, kb = (a["pid"], a["tid"]), (b["pid"], b["tid"])
    assert ka[0] == kb[0] and ka != kb
    assert "overlap" not in c.threads[ka] + c.threads[kb]


def test_kernels_on_one_in_order_queue_follow_each_other_on_one_track(
    testbackends: Any, tdq: Callable[..., Any], tmp_path: Path
) -> None:
    q = tdq()
    with kprof.profile() as p, q:
        for i in range(20):
            q.launch(f"k{i % 3}", 20)
    c = validate(_export(p, tmp_path))
    kernels = sorted(c.all_slices("kernel"), key=lambda e: e["ts"])
    assert len({(e["pid"], e["tid"]) for e in kernels}) == 1
    for x, y in itertools.pairwise(kernels):
        assert ns(x["ts"]) + ns(x["dur"]) <= ns(y["ts"])


def test_host_timed_and_unresolved_records(tmp_path: Path) -> None:
    p = synthetic(40, threads=2, host_timed_every=5, unresolved_every=7)
    c = validate(_export(p, tmp_path))
    n_unresolved = sum(1 for f in p.table.flags if f & UNRESOLVED)
    n_host_timed = sum(1 for f in p.table.flags if f & HOST_TIMED and not f & UNRESOLVED)
    assert n_unresolved == 5 and n_host_timed >= 5
    launches = c.all_slices("launch")
    assert len(launches) == 40, "every launch stays, resolved or not"
    unresolved = [e for e in launches if "unresolved" in e["args"]]
    assert len(unresolved) == n_unresolved
    assert {e["args"]["unresolved"] for e in unresolved} == {"synthetic: the device never answered"}
    device = c.all_slices("kernel") + c.all_slices("copy")
    assert len(device) == 40 - n_unresolved, "unresolved records have no device slice"
    assert len(c.flows) == 40 - n_unresolved
    assert sum(1 for e in device if e["args"].get("host_timed")) == n_host_timed
    copies = c.all_slices("copy")
    assert copies and all(e["args"]["bytes"] > 0 for e in copies)


def test_several_profiles_share_one_timeline_under_their_labels(tmp_path: Path) -> None:
    a, b = synthetic(30, seed=1), synthetic(30, seed=2)
    a.meta.update(rank=0)
    b.meta.update(rank=1, clock_offset_ns=5_000_000)
    path = tmp_path / "merged.json"
    write_chrome_trace(path, [a, b])
    doc = json.loads(path.read_text())
    c = validate_text(
        path.read_text()
    )  # flow ids are unique across the two profiles, or this fails
    assert sorted(c.processes.values()) == [
        "rank 0",
        "rank 0: testdev synth 0",
        "rank 1",
        "rank 1: testdev synth 0",
    ]
    assert len(c.flows) == 60
    base = doc["baseTimeNanoseconds"]
    assert base == min(a.start_ns, b.start_ns + 5_000_000)
    # Profile b's records are moved by its offset.
    pid_b = next(pid for pid, n in c.processes.items() if n == "rank 1")
    first_b = min(ns(e["ts"]) for k, evs in c.slices.items() if k[0] == pid_b for e in evs)
    assert first_b == min(*b.table.launch_start, *b.host.start) + 5_000_000 - base
    assert [x["label"] for x in doc["otherData"]["profiles"]] == ["rank 0", "rank 1"]

    write_chrome_trace(path, [a, b], labels=["left", "right"])
    c = validate_text(path.read_text())
    assert {"left", "right", "left: testdev synth 0"} <= set(c.processes.values())
    with pytest.raises(ValueError, match="one per profile"):
        write_chrome_trace(path, [a, b], labels=["only one"])
    with pytest.raises(ValueError, match="at least one"):
        write_chrome_trace(path, [])
    with pytest.raises(TypeError, match="clock_offset_ns"):
        b.meta["clock_offset_ns"] = 1.5
        write_chrome_trace(path, [a, b])


class _Sink(io.StringIO):
    """Counts how much each write hands over: streaming means many bounded writes."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0
        self.largest = 0

    def write(self, s: str) -> int:
        self.writes += 1
        self.largest = max(self.largest, len(s))
        return super().write(s)


def test_200k_records_are_streamed_and_the_file_is_valid() -> None:
    p = synthetic(200_000, threads=4, queues_per_thread=2, seed=3)
    sink = _Sink()
    write_chrome_trace(sink, [p])
    text = sink.getvalue()
    assert len(text) > 50_000_000
    assert sink.largest < 2_000_000, "events are written in batches, not as one document"
    assert sink.writes > 100
    c = validate_text(text)
    assert len(c.flows) == 200_000
    assert sum(len(v) for v in c.slices.values()) == 200_000 * 2 + len(
        [k for k in p.host.kind if k == HostTable.RANGE]
    )


def test_an_unwritable_path_raises_a_clear_error_and_keeps_the_profile(tmp_path: Path) -> None:
    p = synthetic(50)
    before = (p.kernels, p.ranges, p.summary())
    missing = tmp_path / "no" / "such" / "dir" / "t.json"
    with pytest.raises(ExportError, match="could not write the Chrome trace") as err:
        p.export_chrome_trace(missing)
    assert isinstance(err.value, OSError) and err.value.filename == str(missing)
    assert "profile is unchanged in memory" in str(err.value)
    # A directory in the way: the write fails at the end; nothing is left behind.
    (tmp_path / "adir").mkdir()
    with pytest.raises(ExportError):
        p.export_chrome_trace(tmp_path / "adir")
    assert sorted(os.listdir(tmp_path)) == ["adir"]
    assert (p.kernels, p.ranges, p.summary()) == before
    validate(_export(p, tmp_path, "ok.json"))


def test_a_running_profile_is_not_exported(testbackends: Any, tmp_path: Path) -> None:
    with kprof.profile() as p:
        with pytest.raises(kprof.KprofError, match="still running"):
            p.export_chrome_trace(tmp_path / "t.json")


# -- properties on random profiles ---------------------------------------------------------------------


@st.composite
def random_profiles(draw: Any) -> Profile:
    """Arbitrary intervals: overlapping kernels on one queue, ranges that overlap without
    nesting, zero durations, host-timed and unresolved records, device ranges, markers."""
    p = Profile()
    p.meta = {"host": "h", "pid": 1}
    p.names = ["a", "b", "c", "r", "m"]
    nth = draw(st.integers(1, 3))
    p.threads = [
        ThreadRecord(10 + i, f"t{i}", draw(st.sampled_from([None, None, "task"])))
        for i in range(nth)
    ]
    p.queues = [
        QueueRecord(
            draw(st.sampled_from(["opencl", "cuda"])), f"d{k % 2}", f"queue {k}", f"dev{k % 2}"
        )
        for k in range(draw(st.integers(1, 3)))
    ]
    t0 = 10**12
    p.start_ns = t0
    small = st.integers(0, 3000)
    for _ in range(draw(st.integers(0, 30))):
        ls = t0 + draw(small)
        le = ls + draw(st.integers(0, 500))
        start = ls + draw(small)  # the recorder never places work before its launch
        kind = draw(st.sampled_from([KERNEL, KERNEL, COPY, RANGE]))
        flags = PLACED | draw(st.sampled_from([0, 0, 0, HOST_TIMED, UNRESOLVED]))
        p.table.append(
            draw(st.integers(0, 3)),
            kind,
            draw(st.integers(0, len(p.queues) - 1)),
            draw(st.integers(0, nth - 1)),
            ls,
            le,
            start,
            draw(small),
            draw(st.integers(1, 4096)) if kind == COPY else -1,
            flags,
        )
        if flags & UNRESOLVED:
            p.errors[len(p.table) - 1] = "never answered"
    for _ in range(draw(st.integers(0, 15))):
        s = t0 + draw(small)
        mark = draw(st.booleans())
        p.host.append(
            4 if mark else 3,
            HostTable.MARK if mark else HostTable.RANGE,
            draw(st.integers(0, nth - 1)),
            s,
            s if mark else s + draw(small),
        )
    p.end_ns = t0 + 10_000
    return p


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_profiles())
def test_any_profile_gives_a_valid_trace(p: Profile) -> None:
    f = io.StringIO()
    write_chrome_trace(f, [p])
    doc = json.loads(f.getvalue())
    c = validate_text(
        f.getvalue()
    )  # strict nesting on every track, flows closed, nothing before its launch
    t = p.table
    resolved = [i for i in range(len(t)) if not t.flags[i] & UNRESOLVED]
    assert len(c.flows) == sum(1 for i in resolved if t.kind[i] != RANGE)
    # Every record appears exactly once, at its exact time.
    base = doc["baseTimeNanoseconds"]
    got = sorted((e["name"], e["cat"], ns(e["ts"]), ns(e["dur"])) for e in c.all_slices())
    kinds = {KERNEL: "kernel", COPY: "copy", RANGE: "range"}
    want = [
        (
            p.names[t.name[i]],
            "launch",
            t.launch_start[i] - base,
            t.launch_end[i] - t.launch_start[i],
        )
        for i in range(len(t))
        if t.kind[i] != RANGE
    ]
    want += [
        (p.names[t.name[i]], kinds[t.kind[i]], t.start[i] - base, t.duration[i]) for i in resolved
    ]
    h = p.host
    want += [
        (p.names[h.name[j]], "range", h.start[j] - base, h.end[j] - h.start[j])
        for j in range(len(h))
        if h.kind[j] == HostTable.RANGE
    ]
    assert got == sorted(want)
    assert len(c.instants) == sum(1 for k in h.kind if k == HostTable.MARK)


def test_device_ranges_enclose_their_kernels_on_the_queue_track(tmp_path: Path) -> None:
    p = synthetic(3, threads=1)
    t = p.table
    add_device_range(p, "dstep", 0, 0, t.start[0] - 5, t.start[2] + t.duration[2] + 5)
    c = validate(_export(p, tmp_path))
    (r,) = [e for e in c.all_slices("range") if e["name"] == "dstep"]
    ks = [e for e in c.all_slices() if e["cat"] in ("kernel", "copy")]
    assert {(e["pid"], e["tid"]) for e in ks} == {(r["pid"], r["tid"])}
