"""Perfetto's native trace format (``.pftrace``), written by kprof itself and streamed.

The same timeline as the Chrome trace (``chrome.py``; see :mod:`.timeline` for which record goes
on which track), as ``TracePacket`` protobuf (fields: ``low_level/perfetto_fields.py``):

- One ``TrackDescriptor`` with a ``ProcessDescriptor`` per host side and per device (the
  Chrome trace's processes and names; ``pid`` from 1), and one with a ``ThreadDescriptor`` per
  track (per thread, per queue and launching thread; ``tid`` from 1000001, named as there).
- One packet sequence per profile (``trusted_packet_sequence_id`` = its position from 1): its
  first packet clears the incremental state (``SEQ_INCREMENTAL_STATE_CLEARED``) and interns the
  categories and annotation names; then its event names (iid = name index + 1) and launch sites
  as ``SourceLocation``s (iid = site index + 1); with launch stacks (``profile(stacks=True)``),
  their function names, source paths, frames and ``Callstack``s (frames outermost first, the
  site last), which launches, ranges and markers refer to by ``callstack_iid``. Every event
  packet after them says ``SEQ_NEEDS_INCREMENTAL_STATE`` and refers to them by iid.
- Slices as ``SLICE_BEGIN``/``SLICE_END`` pairs, markers as ``INSTANT``s, a flow from each
  launch to its device record (``flow_ids`` on the launch, ``terminating_flow_ids`` on the
  kernel or copy: ``id`` as in the Chrome trace); see :mod:`kprof_core.low_level.protowire`.
  Encoded in C (``_perfetto.c``) where the compiled parts run, else in Python: the same bytes.
- Device time: under each device's process, a counter track per queue, ``busy, <queue>``,
  and ``busy, all queues`` on a device with several (``unit_name`` ``%``): the percentage of
  each time bin the device was busy with that work, as ``double_counter_value``; the Chrome
  trace's points (:mod:`.busy`: bins, union, at most ``MAX_BINS`` per track).
- Device memory: a process ``device memory`` with one counter track per device, ``live bytes,
  <device>`` (unit bytes), a ``COUNTER`` event per allocation or free.

Clock: every timestamp is in nanoseconds since the trace's base ``B`` (Perfetto's default trace
clock, unsigned), the base and unit of the Chrome trace (``ts * 1000``): ``B`` is a host
``perf_counter_ns`` time (shifted by each profile's ``meta["clock_offset_ns"]`` when merged), and
each host process's labels say it (``time 0: perf_counter_ns B``).
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import IO, TYPE_CHECKING, Any

from kprof_core.data.records import UNRESOLVED, Interner
from kprof_core.data.stacks import frames_of
from kprof_core.io.exports import BinaryTarget, open_binary
from kprof_core.low_level import perfetto_fields as pf
from kprof_core.low_level import protowire as w
from kprof_core.renderers import timeline
from kprof_core.renderers.busy import Bins, BusyTrack, busy_tracks
from kprof_core.renderers.common import check_profiles, first_time, host_name, offset_of
from kprof_core.renderers.timeline import Timeline, thread_title

if TYPE_CHECKING:
    from kprof_core.data.profile_data import ProfileData

TID_BASE = 1_000_001
#: Interned entries per ``InternedData`` packet (a profile with many names is streamed too).
INTERN_BATCH = 1024

if pf.ITEM_TAGS != {
    "LAUNCH": timeline.LAUNCH,
    "DEVICE": timeline.DEVICE,
    "HOST_RANGE": timeline.HOST_RANGE,
    "MARK": timeline.MARK,
}:
    raise AssertionError("perfetto_fields.ITEM_TAGS differs from renderers/timeline.py's tags")

_K = w.key
K_SEQ, K_FLAGS = (
    _K("TracePacket", "trusted_packet_sequence_id"),
    _K("TracePacket", "sequence_flags"),
)
K_INTERNED, K_TRACK = _K("TracePacket", "interned_data"), _K("TracePacket", "track_descriptor")
_CLEARED = pf.ENUMS["SEQ_INCREMENTAL_STATE_CLEARED"]
_NEEDS = pf.ENUMS["SEQ_NEEDS_INCREMENTAL_STATE"]


def write_perfetto(
    target: BinaryTarget, profiles: Sequence[ProfileData], labels: Sequence[str] | None = None
) -> None:
    """Write one or more profiles as one Perfetto trace (``.pftrace``).

    ``target`` is a path (written atomically; an unwritable one raises
    :class:`kprof.ExportError`) or an open binary file. ``labels`` name each profile's
    processes, as for the Chrome trace. Packets are streamed: memory does not grow with the
    number of events.
    """
    names = check_profiles(profiles, labels)
    offsets = [offset_of(p) for p in profiles]
    base = min(first_time(p) + off for p, off in zip(profiles, offsets))
    enc = w.encoder()
    with open_binary(target, "Perfetto trace") as f:
        ids = [1, TID_BASE, 1]  # the next pid, tid and track uuid
        flow_base = 0
        for seq, (p, name, off) in enumerate(zip(profiles, names, offsets), 1):
            _write_profile(f.write, enc, p, name, off, base, ids, flow_base, seq)
            flow_base += len(p.table)


def _interned(seq: int, entries: list[bytes], first: bool = False) -> bytes:
    body = w.number(K_SEQ, seq) + w.nested(K_INTERNED, b"".join(entries))
    return w.packet(body + w.number(K_FLAGS, _CLEARED if first else _NEEDS))


def _intern(
    write: Callable[[bytes], Any], p: ProfileData, seq: int, stacks: list[list[bytes]]
) -> None:
    """The sequence's first packet (state cleared), then its names and sites in batches, then
    ``stacks``' entries: each list one kind, what is referred to first; no packet mixes two of
    them, so each packet's fields stay in number order (canonical protobuf)."""
    cat, nm, ann, src = (
        _K("InternedData", f)
        for f in ("event_categories", "event_names", "debug_annotation_names", "source_locations")
    )
    iid, name = _K("EventName", "iid"), _K("EventName", "name")

    def entry(k: bytes, i: int, text: str) -> bytes:
        return w.nested(k, w.number(iid, i) + w.text(name, text))

    first = [entry(cat, i, c) for i, c in enumerate(pf.CATEGORIES, 1)]
    first += [entry(ann, i, a) for i, a in enumerate(pf.ANNOTATIONS, 1)]
    write(_interned(seq, first, first=True))
    s_iid, s_file, s_fn, s_line = (
        _K("SourceLocation", f) for f in ("iid", "file_name", "function_name", "line_number")
    )
    batches = [entry(nm, i, n) for i, n in enumerate(p.names, 1)]
    batches += [
        w.nested(
            src,
            w.number(s_iid, i)
            + w.text(s_file, s.file)
            + w.text(s_fn, s.function)
            + w.number(s_line, s.line),
        )
        for i, s in enumerate(p.sites, 1)
    ]
    for entries in (batches, *stacks):
        for lo in range(0, len(entries), INTERN_BATCH):
            write(_interned(seq, entries[lo : lo + INTERN_BATCH]))


def _callstacks(p: ProfileData) -> tuple[array[int], array[int], list[list[bytes]]]:
    """Each device and host row's callstack iid - 1 (-1: none), and the interned entries
    (function names, source paths, frames, callstacks) they refer to. Only for profiles with
    stacks (``profile(stacks=True)``): a site alone is the row's source location."""
    t, h = p.table, p.host
    if not any(x >= 0 for x in t.stack) and not any(x >= 0 for x in h.stack):
        return array("q", [-1]) * len(t), array("q", [-1]) * len(h), []
    functions, paths, frames, stacks = Interner(), Interner(), Interner(), Interner()
    cols = []
    for which, tab in (("device", t), ("host", h)):
        known: dict[tuple[int, int], int] = {}
        col = array("q")
        stack_col = tab.stack if len(tab.stack) else array("q", [-1]) * len(tab)
        for i, key in enumerate(zip(stack_col, tab.site)):
            sid = known.get(key)
            if sid is None:
                fs = frames_of(p, which, i)  # type: ignore[arg-type]
                sid = known[key] = stacks(tuple(frames(f) for f in fs)) if fs else -1
            col.append(sid)
        cols.append(col)
    fn_key, path_key = _K("InternedData", "function_names"), _K("InternedData", "source_paths")
    s_iid, s_str = _K("InternedString", "iid"), _K("InternedString", "str")
    fn_entries: list[bytes] = []
    path_entries: list[bytes] = []
    frame_entries: list[bytes] = []
    for i, site in enumerate(frames.values, 1):
        fn, path = functions(site.function), paths(site.file)
        if fn == len(fn_entries):
            fn_entries.append(
                w.nested(fn_key, w.number(s_iid, fn + 1) + w.text(s_str, site.function))
            )
        if path == len(path_entries):
            path_entries.append(
                w.nested(path_key, w.number(s_iid, path + 1) + w.text(s_str, site.file))
            )
        frame = w.number(_K("Frame", "iid"), i) + w.number(_K("Frame", "function_name_id"), fn + 1)
        frame += w.number(_K("Frame", "source_path_iid"), path + 1)
        frame += w.number(_K("Frame", "line_number"), site.line)
        frame_entries.append(w.nested(_K("InternedData", "frames"), frame))
    c_iid, c_frame = _K("Callstack", "iid"), _K("Callstack", "frame_ids")
    stack_entries = [
        w.nested(
            _K("InternedData", "callstacks"),
            w.number(c_iid, i) + b"".join(w.number(c_frame, f + 1) for f in fs),
        )
        for i, fs in enumerate(stacks.values, 1)
    ]
    return cols[0], cols[1], [fn_entries, path_entries, frame_entries, stack_entries]


def _process(uuid: int, pid: int, name: str, labels: list[str]) -> bytes:
    proc = w.number(_K("ProcessDescriptor", "pid"), pid)
    proc += w.number(_K("ProcessDescriptor", "legacy_sort_index"), pid)
    proc += w.text(_K("ProcessDescriptor", "process_name"), name)
    for label in labels:
        proc += w.text(_K("ProcessDescriptor", "process_labels"), label)
    desc = w.number(_K("TrackDescriptor", "uuid"), uuid) + w.nested(
        _K("TrackDescriptor", "process"), proc
    )
    return w.packet(w.nested(K_TRACK, desc))


def _thread(uuid: int, pid: int, tid: int, name: str, sort_index: int) -> bytes:
    th = w.number(_K("ThreadDescriptor", "pid"), pid) + w.number(_K("ThreadDescriptor", "tid"), tid)
    th += w.number(_K("ThreadDescriptor", "legacy_sort_index"), sort_index)
    th += w.text(_K("ThreadDescriptor", "thread_name"), name)
    desc = w.number(_K("TrackDescriptor", "uuid"), uuid)
    desc += w.text(_K("TrackDescriptor", "name"), name)
    desc += w.nested(_K("TrackDescriptor", "thread"), th)
    return w.packet(w.nested(K_TRACK, desc))


def _extras(p: ProfileData) -> dict[int, bytes]:
    """Per item, what its begin event adds: why a launch is unresolved, a row's detail."""
    out: dict[int, bytes] = {}
    flags = p.table.flags
    for i, why in p.errors.items():
        if 0 <= i < len(flags) and flags[i] & UNRESOLVED:
            out[i << 2 | timeline.LAUNCH] = w.annotation_text(pf.ANN_UNRESOLVED, why)
    for i, detail in p.details.items():
        out[i << 2 | timeline.DEVICE] = w.annotation_text(pf.ANN_DETAIL, detail)
    return out


def _write_profile(
    write: Callable[[bytes], Any],
    enc: ModuleType,
    p: ProfileData,
    label: str | None,
    off: int,
    base: int,
    ids: list[int],
    flow_base: int,
    seq: int,
) -> None:
    """One profile's sequence: interned data, descriptors, each track's events, memory."""
    shift = off - base
    device_stacks, host_stacks, stack_entries = _callstacks(p)
    _intern(write, p, seq, stack_entries)
    tl = Timeline(p)
    clocks = {k: c.describe() for k, c in p.clocks.items()}
    host_labels = [f"host {p.meta.get('host', '?')}", f"pid {p.meta.get('pid', '?')}"]
    if p.meta.get("rank") is not None:
        host_labels.append(f"rank {p.meta['rank']}")
    host_labels.append(f"time 0: perf_counter_ns {base - off}")
    tracks = []
    bins, busy = busy_tracks(tl)
    counters: list[tuple[int, list[BusyTrack]]] = []
    for pi, proc in enumerate(tl.processes):
        pid, puuid = ids[0], ids[2]
        ids[0] += 1
        ids[2] += 1
        if proc.kind == "host":
            pname, plabels = host_name(p, label), host_labels
        else:
            pname = f"{label}: {proc.name}" if label else proc.name
            clock = clocks.get(proc.device_key or "")
            plabels = [f"clock: {clock}"] if clock else []
        write(_process(puuid, pid, pname, plabels))
        if pi in busy:
            counters.append((puuid, busy[pi]))
        for sort_index, track in enumerate(proc.tracks, 1):
            tname = track.name
            if track.kind == "thread":
                tname = thread_title(p.threads[track.thread], track.name)
                if track.lane:
                    tname += f" (overlap {track.lane})"
            write(_thread(ids[2], pid, ids[1], tname, sort_index))
            tracks.append((track, ids[2]))
            ids[1] += 1
            ids[2] += 1
    t, h = p.table, p.host
    tcols = tuple(getattr(t, c).tobytes() for c in pf.TABLE_COLUMNS[:-1])
    tcols += (device_stacks.tobytes(),)
    hcols = tuple(getattr(h, c).tobytes() for c in pf.HOST_COLUMNS[:-1])
    hcols += (host_stacks.tobytes(),)
    extras = _extras(p)
    for track, uuid in tracks:
        enc.track_events(
            write, track.items.tobytes(), tcols, hcols, extras, uuid, shift, flow_base, seq
        )
    if bins is not None:
        _write_busy(write, bins, counters, shift, ids, seq)
    _write_memory(write, p, label, shift, ids, seq)


def _write_busy(
    write: Callable[[bytes], Any],
    bins: Bins,
    counters: list[tuple[int, list[BusyTrack]]],
    shift: int,
    ids: list[int],
    seq: int,
) -> None:
    """Busy percentages per bin: a counter track each, under its device's process."""
    unit = w.nested(
        _K("TrackDescriptor", "counter"), w.text(_K("CounterDescriptor", "unit_name"), "%")
    )
    head = w.number(w.K_TYPE, pf.ENUMS["TYPE_COUNTER"])
    k_value, seq_part = _K("TrackEvent", "double_counter_value"), w.number(K_SEQ, seq)
    stamps = [w.number(w.K_TS, x + shift) for x in bins.edges()]
    for puuid, tracks in counters:
        for counter in tracks:
            uuid = ids[2]
            ids[2] += 1
            desc = w.number(_K("TrackDescriptor", "uuid"), uuid)
            desc += w.text(_K("TrackDescriptor", "name"), counter.name)
            desc += w.number(_K("TrackDescriptor", "parent_uuid"), puuid)
            write(w.packet(w.nested(K_TRACK, desc + unit)))
            on = head + w.number(w.K_TRACK, uuid)
            values = [*bins.percent(counter.busy), 0.0]
            write(
                b"".join(
                    w.packet(ts + seq_part + w.nested(w.K_EVENT, on + w.double(k_value, v)))
                    for ts, v in zip(stamps, values)
                )
            )


def _write_memory(
    write: Callable[[bytes], Any],
    p: ProfileData,
    label: str | None,
    shift: int,
    ids: list[int],
    seq: int,
) -> None:
    """Live bytes per device: a counter track each, under a process of their own."""
    m = p.memory
    if not m:
        return
    puuid = ids[2]
    write(_process(puuid, ids[0], f"{label}: device memory" if label else "device memory", []))
    ids[0] += 1
    ids[2] += 1
    counter = w.nested(
        _K("TrackDescriptor", "counter"),
        w.number(_K("CounterDescriptor", "unit"), pf.ENUMS["UNIT_SIZE_BYTES"]),
    )
    uuids = []
    for dev in m.labels:
        desc = w.number(_K("TrackDescriptor", "uuid"), ids[2])
        desc += w.text(_K("TrackDescriptor", "name"), f"live bytes, {dev}")
        desc += w.number(_K("TrackDescriptor", "parent_uuid"), puuid)
        write(w.packet(w.nested(K_TRACK, desc + counter)))
        uuids.append(w.number(w.K_TRACK, ids[2]))
        ids[2] += 1
    head = w.number(w.K_TYPE, pf.ENUMS["TYPE_COUNTER"])
    k_value, seq_part = _K("TrackEvent", "counter_value"), w.number(K_SEQ, seq)
    out: list[bytes] = []
    for s, d, live in zip(m.table.time, m.table.device, m.live_after):
        event = head + uuids[d] + w.number(k_value, live)
        out.append(w.packet(w.number(w.K_TS, s + shift) + seq_part + w.nested(w.K_EVENT, event)))
        if len(out) >= 4096:
            write(b"".join(out))
            out.clear()
    write(b"".join(out))


def export_perfetto(p: ProfileData, path: str | os.PathLike[str] | IO[bytes]) -> None:
    """``Profile.export_perfetto``: one profile, unlabelled."""
    write_perfetto(path, [p])
