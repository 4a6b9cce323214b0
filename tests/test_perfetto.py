"""Perfetto's native format (issue 22): kprof's own protobuf bytes, parsed by the ``perfetto``
package's message classes (tests/pftrace.py), hold the Chrome trace's tracks, slices, flows,
instants and counters, at the profile's own times; the compiled and the Python encoder write
the same bytes; the fields kprof writes are Perfetto's."""

from __future__ import annotations

import io
import os
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kprof_testbackend import device
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
from pftrace import Decoded, decode, flows
from tracecheck import add_device_range, ns, synthetic, validate

import kprof
from kprof_core.data.records import RANGE, UNRESOLVED
from kprof_core.data.sites import Site
from kprof_core.io.exports import ExportError
from kprof_core.low_level import gen_header, native, perfetto_fields, protowire
from kprof_core.renderers.chrome import write_chrome_trace
from kprof_core.renderers.perfetto import INTERN_BATCH, write_perfetto
from kprof_core.result import Profile

try:  # imported whatever path runs: both encoders are compared on every run
    from kprof_core.low_level import _perfetto as COMPILED
except ImportError:
    COMPILED = None


def _both(p: Profile | list[Profile], labels: list[str] | None = None) -> bytes:
    """The trace written by each encoder: the same bytes (returned once)."""
    profiles = p if isinstance(p, list) else [p]
    out = []
    for encoder in (COMPILED, protowire):
        if encoder is None:
            continue
        f = io.BytesIO()
        saved = protowire.encoder
        protowire.encoder = lambda e=encoder: e  # type: ignore[misc]
        try:
            write_perfetto(f, profiles, labels)
        finally:
            protowire.encoder = saved  # type: ignore[assignment]
        out.append(f.getvalue())
    assert all(o == out[0] for o in out), "the compiled and the Python encoder differ"
    return out[0]


def _chrome(profiles: list[Profile], labels: list[str] | None = None) -> Any:
    import json

    f = io.StringIO()
    write_chrome_trace(f, profiles, labels)
    return json.loads(f.getvalue())


def _same_as_chrome(d: Decoded, doc: Any) -> None:
    """Every track, slice (name, category, ts, dur, args), instant, flow and counter point of
    the Chrome trace, in the Perfetto trace, and nothing else."""
    c = validate(doc)

    def track(pid: int, tid: int) -> str:
        return f"{c.processes[pid]} / {c.threads[(pid, tid)]}"

    assert set(d.processes.values()) == set(c.processes.values())
    want = {
        track(*k): Counter((e["name"], e["cat"], ns(e["ts"]), ns(e["dur"])) for e in evs)
        for k, evs in c.slices.items()
    }
    got = {k: Counter((s.name, s.cat, s.ts, s.dur) for s in v) for k, v in d.slices.items()}
    assert got == want
    assert Counter(
        (track(e["pid"], e["tid"]), e["name"], ns(e["ts"])) for e in c.instants
    ) == Counter((k, s.name, s.ts) for k, v in d.instants.items() for s in v)
    chrome_flows = {
        fid: (
            (track(pair["s"]["pid"], pair["s"]["tid"]), ns(pair["s"]["ts"])),
            (track(pair["f"]["pid"], pair["f"]["tid"]), ns(pair["f"]["ts"])),
        )
        for fid, pair in c.flows.items()
    }
    assert flows(d) == chrome_flows
    # Counters: device memory in bytes (ints), device time as busy percentages (floats).
    arg = {"memory": "bytes", "busy": "percent"}
    chrome_counters = {
        f"{c.processes[pid]} / {name}": [(ns(e["ts"]), e["args"][arg[e["cat"]]]) for e in evs]
        for (pid, name), evs in c.counters.items()
    }
    assert dict(d.counters) == chrome_counters
    for name, points in d.counters.items():
        memory = name.split(" / ")[-1].startswith("live bytes, ")
        assert memory != name.split(" / ")[-1].startswith("busy, "), name
        assert all(type(v) is (int if memory else float) for _, v in points), name
        if memory:
            assert d.units[name] == pb.CounterDescriptor.UNIT_SIZE_BYTES, name
            assert name.startswith("device memory / ") or ": device memory / " in name
        else:
            assert d.unit_names[name] == "%" and not d.units[name], name
            assert "device memory" not in name.split(" / ")[0], name
    # What the Chrome trace says in args, the Perfetto trace says in annotations, source
    # locations and callstacks (a site alone: a source location, no callstack).
    frames = doc["otherData"].get("frames", [])
    stacks = doc["otherData"].get("stacks", [])

    def chain(sid: int | None) -> Any:
        if sid is None:
            return None
        return tuple(
            (frames[f]["file"], frames[f]["function"], frames[f]["line"]) for f in stacks[sid]
        )

    by_track: dict[tuple[int, int], list[Any]] = {k: list(v) for k, v in c.slices.items()}
    for e in c.instants:
        by_track.setdefault((e["pid"], e["tid"]), []).append(e)
    for k, evs in by_track.items():
        args: Counter[Any] = Counter()
        for e in evs:
            a = {
                x: e["args"][x]
                for x in ("bytes", "host_timed", "unresolved", "detail")
                if x in e.get("args", {})
            }
            args[
                (
                    e["name"],
                    ns(e["ts"]),
                    tuple(sorted(a.items())),
                    chain(e.get("args", {}).get("stack")),
                )
            ] += 1
        name = track(*k)
        mine = Counter(
            (
                s.name,
                s.ts,
                tuple(sorted(s.args.items())),
                s.stack or ((s.site,) if s.site else None),
            )
            for s in [*d.slices.get(name, []), *d.instants.get(name, [])]
        )
        assert mine == args, name


def test_the_fields_are_perfettos() -> None:
    """Every field number and wire type in perfetto_fields.py is that of Perfetto's protos."""
    from google.protobuf.descriptor import FieldDescriptor as FD

    wire = {
        FD.TYPE_FIXED64: perfetto_fields.FIXED64,
        FD.TYPE_DOUBLE: perfetto_fields.FIXED64,
        FD.TYPE_STRING: perfetto_fields.LEN,
        FD.TYPE_BYTES: perfetto_fields.LEN,
        FD.TYPE_MESSAGE: perfetto_fields.LEN,
    }
    for message, fields in perfetto_fields.FIELDS.items():
        desc = getattr(pb, message).DESCRIPTOR
        for name, (number, wt) in fields.items():
            f = desc.fields_by_name[name]
            assert f.number == number, f"{message}.{name}"
            assert wire.get(f.type, perfetto_fields.VARINT) == wt, f"{message}.{name}"
    assert pb.CounterDescriptor.DESCRIPTOR.fields_by_name["unit"]
    for k, v in perfetto_fields.ENUMS.items():
        owner = (
            pb.TrackEvent
            if k.startswith("TYPE_")
            else pb.TracePacket
            if k.startswith("SEQ_")
            else pb.CounterDescriptor
        )
        assert getattr(owner, k) == v, k


def test_the_committed_perfetto_header_is_current() -> None:
    assert gen_header.PERFETTO_HEADER.read_text(encoding="utf-8") == perfetto_fields.c_header(), (
        "kprof_core/low_level/_perfetto_fields.h is out of date: "
        "run python -m kprof_core.low_level.gen_header and rebuild"
    )
    assert gen_header.main(["--check"]) == 0


def test_the_compiled_encoder_runs_where_the_compiled_parts_do() -> None:
    if native.compiled() is None:
        assert protowire.encoder() is protowire
        return
    assert COMPILED is not None, "the compiled parts run but _perfetto was not built"
    assert COMPILED.SIGNATURE == perfetto_fields.SIGNATURE
    assert protowire.encoder() is COMPILED
    native.use_compiled(False)
    try:
        assert protowire.encoder() is protowire
    finally:
        native.use_compiled(True)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_synthetic_profile_is_its_chrome_trace(seed: int) -> None:
    p = synthetic(
        600, threads=3, queues_per_thread=2, seed=seed, host_timed_every=9, unresolved_every=13
    )
    add_device_range(p, "dev range", 0, 0, p.start_ns + 10, p.start_ns + 5000)
    p.details[4] = "grid (8,1,1) block (64,1,1)"
    p.sites = [Site("/src/train.py", 42, "step"), Site("/src/model.py", 7, "forward")]
    for i in range(0, len(p.table), 3):
        p.table.site[i] = i % 2
    p.host.site[0] = 1
    d = decode(_both(p))
    _same_as_chrome(d, _chrome([p]))
    assert d.sequences == {1}


def test_slices_are_the_profiles_rows_at_their_times() -> None:
    p = synthetic(400, threads=2, unresolved_every=10)
    d = decode(_both(p))
    base = p.start_ns  # synthetic records start after it: the trace's time 0
    assert any(lab == f"time 0: perf_counter_ns {base}" for lab in d.labels[1])
    t = p.table
    kernels = Counter((s.name, s.ts, s.dur) for s in d.all_slices() if s.cat in ("kernel", "copy"))
    want = Counter(
        (p.names[t.name[i]], t.start[i] - base, max(0, t.duration[i]))
        for i in range(len(t))
        if not t.flags[i] & UNRESOLVED and t.kind[i] != RANGE
    )
    assert kernels == want and sum(want.values()) == 360
    launches = Counter((s.name, s.ts, s.dur) for s in d.all_slices("launch"))
    assert launches == Counter(
        (p.names[t.name[i]], t.launch_start[i] - base, max(0, t.launch_end[i] - t.launch_start[i]))
        for i in range(len(t))
    )
    unresolved = [s for s in d.all_slices("launch") if "unresolved" in s.args]
    assert len(unresolved) == 40 and all(s.flow is None for s in unresolved)
    assert {s.args["unresolved"] for s in unresolved} == {"synthetic: the device never answered"}
    assert len(flows(d)) == 360


@pytest.mark.parametrize("stacks", [False, True], ids=["sites", "stacks"])
def test_a_real_profile_with_sites_memory_and_threads(
    testbackends: Any, tdq: Callable[..., Any], stacks: bool
) -> None:
    """Recorded on each path, written by each encoder: the Chrome trace's content; launch
    stacks as interned callstacks (a site alone as a source location)."""
    for compiled in (True, False):
        native.use_compiled(compiled)
        try:
            q1, q2 = tdq(), tdq()

            def worker(q: Any = q2) -> None:
                with q, kprof.range("worker"):
                    for _ in range(3):
                        q.launch("k2", 50)

            with kprof.profile(backends="testdev", sites=True, stacks=stacks) as p:
                with q1, kprof.range("step"):
                    t = threading.Thread(target=kprof.propagate(worker), name="helper")
                    t.start()
                    a = device.alloc(1000)
                    for _ in range(4):
                        q1.launch("k1", 50)
                    kprof.mark("mid")
                    a.free()
                    t.join()
        finally:
            native.use_compiled(True)
        d = decode(_both(p))
        _same_as_chrome(d, _chrome([p]))
        assert sorted(s.name for s in d.all_slices("kernel")) == ["k1"] * 4 + ["k2"] * 3
        assert [x[1] for x in d.counters["device memory / live bytes, testdev 0"]] == [1000, 0]
        sites = {s.site for s in d.all_slices("launch")}
        assert sites and all(s is not None and s[0] == __file__ for s in sites)
        chains = {s.stack for s in d.all_slices("launch")}
        if stacks:  # this test's frame, under pytest's: several frames, the site last
            assert all(c is not None and len(c) > 1 and c[-1][0] == __file__ for c in chains)
        else:
            assert chains == {None}
        assert d.processes[1] == f"host {p.meta['host']} pid {os.getpid()}"


def test_merged_profiles_share_one_timeline_each_on_its_sequence() -> None:
    a, b = synthetic(200, seed=1), synthetic(300, seed=2)
    a.meta = {**a.meta, "rank": 0, "clock_offset_ns": 0}
    b.meta = {**b.meta, "rank": 1, "clock_offset_ns": 5_000}
    labels = ["rank 0", "rank 1"]
    d = decode(_both([a, b], labels))
    _same_as_chrome(d, _chrome([a, b], labels))
    assert d.sequences == {1, 2}
    assert len(flows(d)) == 500  # flow ids do not collide across profiles
    # b's clock runs 5 us ahead: its time 0 is 5 us before a's on its own clock.
    assert "time 0: perf_counter_ns 999995000" in d.labels[3]


def test_many_names_are_interned_in_batches() -> None:
    p = synthetic(50)
    extra = INTERN_BATCH * 2 + 5
    p.names += [f"name {i}" for i in range(extra)]
    for i in range(len(p.table)):
        p.table.name[i] = len(p.names) - 1 - i  # the last names, interned in the last batch
    data = _both(p)
    trace = pb.Trace()
    trace.ParseFromString(data)
    interned = [pk for pk in trace.packet if pk.HasField("interned_data")]
    assert len(interned) == 1 + 3  # categories first, then names in batches of INTERN_BATCH
    _same_as_chrome(decode(data), _chrome([p]))


def test_written_in_chunks_as_it_goes() -> None:
    p = synthetic(40_000, threads=1)
    chunks: list[int] = []

    class Sink(io.RawIOBase):
        def write(self, b: Any) -> int:
            chunks.append(len(b))
            return len(b)

    write_perfetto(Sink(), [p])  # type: ignore[arg-type]
    assert sum(chunks) > 3 * protowire.CHUNK
    assert max(chunks) < protowire.CHUNK + 4096  # never the whole trace at once


def test_an_unwritable_path_leaves_no_file(tmp_path: Path) -> None:
    p = synthetic(10)
    target = tmp_path / "missing" / "t.pftrace"
    with pytest.raises(ExportError, match="Perfetto trace"):
        p.export_perfetto(target)
    ok = tmp_path / "t.pftrace"
    p.export_perfetto(ok)
    assert ok.read_bytes() == _both(p)
    assert os.listdir(tmp_path) == ["t.pftrace"]


@pytest.mark.skipif(COMPILED is None, reason="the compiled encoder is not built here")
@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.integers(-(2**59), 2**59),  # launch start
            st.integers(-(2**59), 2**59),  # launch end
            st.integers(-(2**59), 2**59),  # start
            st.integers(-(2**40), 2**40),  # duration
            st.sampled_from([0, 1, 2, 4, 8, 10]),  # flags
            st.integers(0, 300),  # name
            st.integers(0, 2),  # kind
            st.integers(-1, 300),  # site
            st.integers(-1, 2**40),  # nbytes
            st.integers(-1, 300),  # callstack
        ),
        min_size=1,
        max_size=30,
    ),
    items=st.lists(st.tuples(st.integers(0, 29), st.integers(0, 3)), max_size=60),
    extras=st.dictionaries(
        st.integers(0, 120),
        st.text(max_size=8).map(lambda x: protowire.annotation_text(perfetto_fields.ANN_DETAIL, x)),
        max_size=5,
    ),
    shift=st.integers(-(2**60), 2**60),
    uuid=st.integers(0, 2**40),
    flow_base=st.integers(0, 2**50),
    seq=st.integers(0, 2**31),
)
def test_both_encoders_write_the_same_bytes_for_any_columns(
    rows: list[tuple[int, ...]],
    items: list[tuple[int, int]],
    extras: dict[int, bytes],
    shift: int,
    uuid: int,
    flow_base: int,
    seq: int,
) -> None:
    from array import array

    table = tuple(array("q", col).tobytes() for col in zip(*rows))
    host = tuple(
        array("q", col).tobytes() for col in zip(*[(r[0], r[1], r[5], r[7], r[9]) for r in rows])
    )
    codes = array("q", [(i % len(rows)) << 2 | tag for i, tag in items]).tobytes()
    got = []
    for enc in (COMPILED, protowire):
        out: list[bytes] = []
        n = enc.track_events(out.append, codes, table, host, extras, uuid, shift, flow_base, seq)
        assert n == sum(map(len, out))
        got.append(b"".join(out))
    assert got[0] == got[1]
    trace = pb.Trace()
    trace.ParseFromString(got[0])  # well formed, whatever the values


@pytest.mark.skipif(COMPILED is None, reason="the compiled encoder is not built here")
def test_both_encoders_refuse_bad_input_alike() -> None:
    from array import array

    one = array("q", [0]).tobytes()
    table, host = (one,) * 10, (one,) * 5
    for enc in (COMPILED, protowire):
        with pytest.raises(IndexError):
            enc.track_events(len, array("q", [5 << 2]).tobytes(), table, host, {}, 1, 0, 0, 1)
        bad_kind = (*table[:6], array("q", [7]).tobytes(), *table[7:])
        with pytest.raises(ValueError):
            enc.track_events(len, array("q", [1]).tobytes(), bad_kind, host, {}, 1, 0, 0, 1)
        with pytest.raises(ValueError):
            enc.track_events(len, one, table[:9], host, {}, 1, 0, 0, 1)


# -- the command line: kprof run / show / merge --perfetto ---------------------------------------


def test_show_and_merge_write_what_the_api_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kprof_core.cli.main import main
    from kprof_core.ranks.combine import source_labels
    from kprof_core.ranks.merge import _rank_key, aligned_views

    files = []
    for rank in (0, 1):
        p = synthetic(100, seed=rank)
        p.meta = {**p.meta, "rank": rank}
        files.append(tmp_path / f"r{rank}.kprof")
        p.save(files[-1])
    out = tmp_path / "one.pftrace"
    assert main(["show", str(files[0]), "--perfetto", str(out)]) == 0
    assert f"kprof: wrote {out}" in capsys.readouterr().err
    assert out.read_bytes() == _both(kprof.load(files[0]))

    merged, chrome = tmp_path / "all.pftrace", tmp_path / "all.json"
    assert (
        main(["merge", str(files[1]), str(files[0]), "--perfetto", str(merged), "-o", str(chrome)])
        == 0
    )
    loaded = sorted((kprof.load(f) for f in files), key=_rank_key)
    views, labels = aligned_views(loaded), source_labels(loaded)
    assert merged.read_bytes() == _both(views, labels)
    import json

    d = decode(merged.read_bytes())
    _same_as_chrome(d, json.loads(chrome.read_text()))
    assert d.sequences == {1, 2}
    assert sorted(d.processes.values())[:2] == ["rank 0", "rank 0: testdev synth 0"]


def test_run_writes_a_perfetto_trace(tmp_path: Path) -> None:
    import subprocess
    import sys
    import textwrap

    script = tmp_path / "work.py"
    script.write_text(
        textwrap.dedent("""
        import kprof
        from kprof_testbackend import device

        q = device.Queue()
        with q, kprof.range("step"):
            q.launch("k1", 100)
            q.launch("k2", 100)
        q.finish()
        for i in range(6):  # steps for --steps (outside a schedule, step() does nothing)
            with q:
                q.launch(f"s{i}", 10)
            q.finish()
            kprof.step()
    """)
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("KPROF_")}
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "kprof",
            "run",
            "--backends",
            "testdev",
            "--perfetto",
            "t.pftrace",
            "-o",
            "t.kprof",
            str(script),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert "kprof: wrote t.pftrace" in r.stderr
    d = decode((tmp_path / "t.pftrace").read_bytes())
    names = ["k1", "k2", "s0", "s1", "s2", "s3", "s4", "s5"]
    assert sorted(s.name for s in d.all_slices("kernel")) == names
    assert len(flows(d)) == 8
    # The file is the saved profile's export: nothing is lost on the way.
    assert (tmp_path / "t.pftrace").read_bytes() == _both(kprof.load(tmp_path / "t.kprof"))

    # With --steps, one trace per window, holding that window's steps only.
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "kprof",
            "run",
            "--backends",
            "testdev",
            "--steps",
            "1:3",
            "--every",
            "3",
            "--perfetto",
            "w.pftrace",
            str(script),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    windows = [decode((tmp_path / f"w-000{k}.pftrace").read_bytes()) for k in (1, 2)]
    assert [sorted(s.name for s in d.all_slices("kernel")) for d in windows] == [
        ["s1", "s2"],
        ["s4", "s5"],
    ]


def test_a_running_profile_is_not_exported(testbackends: Any, tmp_path: Path) -> None:
    with kprof.profile(backends="testdev") as p:
        with pytest.raises(kprof.KprofError, match="still running"):
            p.export_perfetto(tmp_path / "t.pftrace")
    assert not (tmp_path / "t.pftrace").exists()
