"""A strict reader of kprof's Perfetto traces for the tests, on the ``perfetto`` package's own
protobuf classes (the oracle: kprof writes the bytes itself).

``decode(data)`` parses the ``Trace`` and checks what Perfetto's trace processor needs: each
sequence's first packet clears its incremental state, every event that uses an iid says it
needs that state and refers to an iid interned earlier on its sequence, tracks are described
before their events, uuids, pids and tids are unique (no tid equals a pid), on each track the
packets are in time order and every ``SLICE_END`` closes an open slice, and nothing stays open.
It returns the slices, instants, flows and counters per track name (``process / thread``), in
nanoseconds as written, for comparison with the profile and with its Chrome trace.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

CLEARED = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
NEEDS = pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
TE = pb.TrackEvent


@dataclass
class Slice:
    name: str
    cat: str
    ts: int
    dur: int = -1
    flow: int | None = None
    end_flow: int | None = None
    args: dict[str, Any] = field(default_factory=dict)
    site: tuple[str, str, int] | None = None
    stack: tuple[tuple[str, str, int], ...] | None = None  # outermost first


@dataclass
class Decoded:
    processes: dict[int, str] = field(default_factory=dict)  # pid -> name
    labels: dict[int, list[str]] = field(default_factory=dict)  # pid -> process labels
    tracks: dict[int, str] = field(default_factory=dict)  # uuid -> "process / thread"
    slices: dict[str, list[Slice]] = field(default_factory=lambda: defaultdict(list))
    instants: dict[str, list[Slice]] = field(default_factory=lambda: defaultdict(list))
    #: Per counter track: (ts, value), the value an int (``counter_value``) or a float
    #: (``double_counter_value``), as written.
    counters: dict[str, list[tuple[int, int | float]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    units: dict[str, int] = field(default_factory=dict)
    unit_names: dict[str, str] = field(default_factory=dict)
    sequences: set[int] = field(default_factory=set)
    packets: int = 0

    def all_slices(self, cat: str | None = None) -> list[Slice]:
        return [s for v in self.slices.values() for s in v if cat is None or s.cat == cat]


def _annotations(ev: Any, names: dict[int, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for a in ev.debug_annotations:
        assert a.name_iid in names, f"annotation name iid {a.name_iid} not interned"
        which = a.WhichOneof("value")
        out[names[a.name_iid]] = getattr(a, which)
    return out


def decode(data: bytes) -> Decoded:
    trace = pb.Trace()
    trace.ParseFromString(data)
    assert trace.SerializeToString() == data, "kprof's bytes are not canonical protobuf"
    d = Decoded(packets=len(trace.packet))
    state: dict[int, dict[str, dict[int, Any]]] = {}
    pids: dict[int, int] = {}  # pid -> its process track's uuid
    tids: set[int] = set()
    counter_tracks: dict[int, str] = {}
    open_: dict[int, list[Slice]] = defaultdict(list)
    last_ts: dict[int, int] = {}
    for pk in trace.packet:
        seq = pk.trusted_packet_sequence_id
        if pk.HasField("track_descriptor"):
            t = pk.track_descriptor
            assert t.uuid and t.uuid not in d.tracks and t.uuid not in counter_tracks
            assert t.uuid not in pids.values(), f"uuid {t.uuid} described twice"
            if t.HasField("process"):
                assert t.process.pid not in pids, f"pid {t.process.pid} described twice"
                pids[t.process.pid] = t.uuid
                d.processes[t.process.pid] = t.process.process_name
                d.labels[t.process.pid] = list(t.process.process_labels)
            elif t.HasField("thread"):
                th = t.thread
                assert th.pid in d.processes, "a thread track before its process"
                assert th.tid not in tids, f"tid {th.tid} described twice"
                tids.add(th.tid)
                assert t.name == th.thread_name
                d.tracks[t.uuid] = f"{d.processes[th.pid]} / {th.thread_name}"
            else:
                assert t.HasField("counter") and t.parent_uuid in pids.values()
                pid = next(p for p, u in pids.items() if u == t.parent_uuid)
                counter_tracks[t.uuid] = f"{d.processes[pid]} / {t.name}"
                d.units[counter_tracks[t.uuid]] = t.counter.unit
                d.unit_names[counter_tracks[t.uuid]] = t.counter.unit_name
            continue
        assert seq, "every other packet belongs to a sequence"
        d.sequences.add(seq)
        if seq not in state:
            assert pk.sequence_flags & CLEARED, f"sequence {seq} starts without clearing state"
            state[seq] = {
                k: {} for k in ("name", "cat", "ann", "src", "fn", "path", "frame", "stack")
            }
        st = state[seq]
        if pk.HasField("interned_data"):
            i = pk.interned_data
            for key, entries in (
                ("name", i.event_names),
                ("cat", i.event_categories),
                ("ann", i.debug_annotation_names),
            ):
                for e in entries:
                    assert e.iid not in st[key], f"{key} iid {e.iid} interned twice"
                    st[key][e.iid] = e.name
            for s in i.source_locations:
                st["src"][s.iid] = (s.file_name, s.function_name, s.line_number)
            for key, strings in (("fn", i.function_names), ("path", i.source_paths)):
                for x in strings:
                    st[key][x.iid] = x.str.decode()
            for f in i.frames:
                st["frame"][f.iid] = (f.function_name_id, f.source_path_iid, f.line_number)
            for c in i.callstacks:
                st["stack"][c.iid] = list(c.frame_ids)
        if not pk.HasField("track_event"):
            continue
        ev, ts = pk.track_event, pk.timestamp
        assert pk.HasField("timestamp")
        if ev.type == TE.TYPE_COUNTER:
            assert ev.track_uuid in counter_tracks, "a counter on an undescribed track"
            which = ev.WhichOneof("counter_value_field")
            assert which in ("counter_value", "double_counter_value"), "a counter without value"
            d.counters[counter_tracks[ev.track_uuid]].append((ts, getattr(ev, which)))
            continue
        assert pk.sequence_flags == NEEDS, "an event using interned names must say so"
        u = ev.track_uuid
        assert u in d.tracks, f"an event on track {u}, not described before"
        assert ts >= last_ts.get(u, 0), f"{d.tracks[u]}: packets out of time order"
        last_ts[u] = ts
        if ev.type == TE.TYPE_SLICE_END:
            assert open_[u], f"{d.tracks[u]}: an end with no open slice"
            s = open_[u].pop()
            s.dur = ts - s.ts
            continue
        assert ev.name_iid in st["name"], f"name iid {ev.name_iid} not interned before use"
        assert len(ev.category_iids) == 1 and ev.category_iids[0] in st["cat"]
        s = Slice(st["name"][ev.name_iid], st["cat"][ev.category_iids[0]], ts)
        s.args = _annotations(ev, st["ann"])
        if ev.source_location_iid:
            assert ev.source_location_iid in st["src"], "source location not interned"
            s.site = st["src"][ev.source_location_iid]
        if ev.callstack_iid:
            assert ev.callstack_iid in st["stack"], "callstack not interned"
            frames = []
            for f in st["stack"][ev.callstack_iid]:
                fn, path, line = st["frame"][f]
                frames.append((st["path"][path], st["fn"][fn], line))
            s.stack = tuple(frames)
            assert s.site == frames[-1], "a callstack's innermost frame is the slice's site"
        assert len(ev.flow_ids) <= 1 and len(ev.terminating_flow_ids) <= 1
        s.flow = ev.flow_ids[0] if ev.flow_ids else None
        s.end_flow = ev.terminating_flow_ids[0] if ev.terminating_flow_ids else None
        if ev.type == TE.TYPE_INSTANT:
            d.instants[d.tracks[u]].append(s)
        else:
            assert ev.type == TE.TYPE_SLICE_BEGIN
            open_[u].append(s)
            d.slices[d.tracks[u]].append(s)
    assert not any(open_.values()), "slices left open at the end"
    assert not tids & set(pids), "a tid equal to a pid"
    return d


def flows(d: Decoded) -> dict[int, tuple[tuple[str, int], tuple[str, int]]]:
    """Each flow id: (track, ts) of the slice it starts at and of the one it ends at; every
    flow is started once and ended once."""
    starts: dict[int, tuple[str, int]] = {}
    ends: dict[int, tuple[str, int]] = {}
    for track, slices in d.slices.items():
        for s in slices:
            if s.flow is not None:
                assert s.flow not in starts, f"flow {s.flow} starts twice"
                starts[s.flow] = (track, s.ts)
            if s.end_flow is not None:
                assert s.end_flow not in ends, f"flow {s.end_flow} ends twice"
                ends[s.end_flow] = (track, s.ts)
    assert set(starts) == set(ends), "a flow without its other end"
    return {k: (starts[k], ends[k]) for k in starts}
