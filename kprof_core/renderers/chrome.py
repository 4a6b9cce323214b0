"""Chrome trace / Perfetto JSON, streamed to disk event by event.

Layout (see :mod:`.timeline` for which record goes on which track):

- ``{"displayTimeUnit": "ns", "otherData": {...}, "traceEvents": [...], "baseTimeNanoseconds": B}``
  (keys Perfetto knows first: older Perfetto versions stop reading at an unknown key, so
  ``baseTimeNanoseconds`` comes last, as in Kineto's traces; no byte after the closing brace);
  ``ts``/``dur`` are microseconds with three decimals (exact nanoseconds) relative to ``B``, a
  host ``perf_counter_ns`` time (plus each profile's ``meta["clock_offset_ns"]``, which a merge
  of several processes sets so they share one timeline).
- One process per profile's host side (``host <host> pid <pid>``, or its label such as
  ``rank 0``) and one per device (``OpenCL <device>``, under the label when several profiles
  are written); one track per thread and per queue (and launching thread). ``pid``s count from
  1 and ``tid``s from 1000001, both unique in the file (a thread's ``tid`` never equals a
  ``pid``, which Perfetto would take for that process's main thread).
- Complete (``X``) events: host ranges and launches on thread tracks; kernels, copies and the
  device time of ranges on queue tracks. Markers are instant (``i``) events.
- A flow arrow from each launch to its device record: ``s`` at the launch's start on its
  thread, ``f`` (``bp: "e"``) at the kernel's start, sharing an ``id`` unique in the file.
- ``args``: ``kind``, ``queue``, ``thread``, ``bytes``, ``host_timed``; on launches, ranges
  and markers whose launch site is known, ``stack``: an integer id into ``otherData.stacks``
  (interned: a few bytes per event, not a string per event); a launch the device never timed
  (unresolved) keeps its slice with ``unresolved: <why>`` and has no kernel slice nor flow.
  Host-timed records are drawn on their queue with host times.
- ``otherData.stacks``: per stack id, its frames outermost first (the launch site last; the
  site alone when no stack was recorded), as ids into ``otherData.frames``, where each frame
  is ``{"name": "train.py:42 step", "file", "line", "function"}``. Ids are unique in the file,
  across its profiles.
- Device time: in each device's process, a counter (``C``, category ``busy``) per queue,
  ``busy, <queue>``, and ``busy, all queues`` on a device with several: the percentage of
  each time bin the device was busy with that work (``args``: ``{"percent": 37.5}``), at most
  ``busy.MAX_BINS`` points per track whatever the number of launches; see :mod:`.busy`.
- Device memory (``Profile.memory``): a process ``device memory`` with one counter (``C``)
  track per device, ``live bytes, <device>``, a point per allocation or free.
- Metadata: ``process_name``, ``process_labels`` (host, pid, rank; the device clock's
  alignment method and error bound), ``process_sort_index``, ``thread_name``,
  ``thread_sort_index``.
"""

from __future__ import annotations

import json
import os
from array import array
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING, Any, Literal

from kprof_core.data.records import (
    APPROXIMATE,
    HOST_TIMED,
    KIND_NAMES,
    RANGE,
    UNRESOLVED,
    Interner,
    QueueRecord,
)
from kprof_core.data.stacks import Stack, frames_of
from kprof_core.io.exports import Target, open_text
from kprof_core.renderers.busy import busy_tracks
from kprof_core.renderers.common import check_profiles, first_time, host_name, offset_of
from kprof_core.renderers.timeline import (
    DEVICE,
    HOST_RANGE,
    LAUNCH,
    MARK,
    Timeline,
    device_title,
    thread_title,
)

if TYPE_CHECKING:
    from kprof_core.data.profile_data import ProfileData

FLUSH_EVERY = 4096
TID_BASE = 1_000_001


def _us(ns: int) -> str:
    """Integer nanoseconds as exact microseconds with three decimals."""
    # Exact: a double holds ns/1000 far closer than the half-unit of the third decimal, for
    # any time below ~10^15 ns (ts are relative to the trace's base).
    return f"{ns / 1000:.3f}"


class _Events:
    """Writes comma-separated JSON events in batches."""

    def __init__(self, f: IO[str]) -> None:
        self.f = f
        self.buf: list[str] = []
        self.first = True

    def flush(self) -> None:
        if self.buf:
            self.f.write(("\n" if self.first else ",\n") + ",\n".join(self.buf))
            self.first = False
            self.buf.clear()


def write_chrome_trace(
    target: Target, profiles: Sequence[ProfileData], labels: Sequence[str] | None = None
) -> None:
    """Write one or more profiles as one Chrome trace / Perfetto JSON file.

    ``target`` is a path (written atomically; an unwritable one raises
    :class:`kprof.ExportError`) or an open text file. ``labels`` name each
    profile's processes (default: ``rank N`` from ``meta["rank"]``, else host and pid, when
    there are several). Events are streamed: memory does not grow with the number of events.
    """
    names = check_profiles(profiles, labels)
    offsets = [offset_of(p) for p in profiles]
    base = min(first_time(p) + off for p, off in zip(profiles, offsets))
    from kprof_core._version import __version__

    stacks = Stacks()
    ids = [(stacks.rows(p, "device"), stacks.rows(p, "host")) for p in profiles]

    other: dict[str, Any] = {
        "kprof_version": __version__,
        "profiles": [
            {
                "label": name,
                "host": p.meta.get("host"),
                "pid": p.meta.get("pid"),
                "rank": p.meta.get("rank"),
                "clock_offset_ns": off,
                "start_us": float(_us(p.start_ns + off - base)) if p.start_ns else 0.0,
                "clocks": [
                    f"{device_title(QueueRecord(c.backend, c.device, '', ''))}: {c.describe()}"
                    for c in p.clocks.values()
                ],
            }
            for p, name, off in zip(profiles, names, offsets)
        ],
    }
    if stacks.stacks:
        other["frames"] = [
            {"name": f.label, "file": f.file, "line": f.line, "function": f.function}
            for f in stacks.frames.values
        ]
        other["stacks"] = stacks.stacks
    with open_text(target, "Chrome trace") as f:
        f.write(
            f'{{"displayTimeUnit": "ns", "otherData": {json.dumps(other, default=str)}, '
            '"traceEvents": ['
        )
        ev = _Events(f)
        next_ids = [1, TID_BASE]  # the next pid and tid
        flow_base = 0
        for p, name, off, rows in zip(profiles, names, offsets, ids):
            _write_profile(ev, p, name, off - base, next_ids, flow_base, rows)
            flow_base += len(p.table)
        ev.flush()
        f.write(f'\n], "baseTimeNanoseconds": {base}}}')


class Stacks:
    """The stacks of the profiles written to one file, interned: an id per distinct stack,
    a frame id per distinct ``Site``."""

    def __init__(self) -> None:
        self.frames = Interner()
        self.stacks: list[list[int]] = []
        self._ids: dict[Stack, int] = {}

    def rows(self, p: ProfileData, table: Literal["device", "host"]) -> array[int]:
        """Each row's stack id in the file (-1: unknown); ``frames_of`` is asked once per
        distinct (stack, site) of the table, not per row."""
        t = p.table if table == "device" else p.host
        stack_col = t.stack  # empty: no row has a stack
        if not stack_col or max(stack_col) < 0:
            # Sites alone: one id per site, mapped column-wise (site -1 reads the last: -1).
            by_site = [self._id((site,)) for site in p.sites] + [-1]
            return array("q", map(by_site.__getitem__, t.site))
        known: dict[tuple[int, int], int] = {}
        out = array("q")
        for i, (stack, site) in enumerate(zip(stack_col, t.site)):
            sid = known.get((stack, site))
            if sid is None:
                frames = frames_of(p, table, i)
                sid = known[(stack, site)] = self._id(frames) if frames else -1
            out.append(sid)
        return out

    def _id(self, frames: Stack) -> int:
        sid = self._ids.get(frames)
        if sid is None:
            sid = self._ids[frames] = len(self.stacks)
            self.stacks.append([self.frames(f) for f in frames])
        return sid


def _write_profile(
    ev: _Events,
    p: ProfileData,
    label: str | None,
    shift: int,
    ids: list[int],
    flow_base: int,
    stack_ids: tuple[array[int], array[int]],
) -> None:
    """Emit one profile's processes, tracks and events; ``ids``: the next pid and tid;
    ``stack_ids``: each device and host row's stack id in the file (``Stacks.rows``)."""
    tl = Timeline(p)
    t, h = p.table, p.host
    dumps = json.dumps
    details = p.details
    jnames = [dumps(n) for n in p.names]
    tlabels = [dumps(x) for x in tl.thread_labels]
    qlabels = [dumps(q.label) for q in p.queues]
    clocks = {k: c.describe() for k, c in p.clocks.items()}
    buf = ev.buf
    # The columns as locals: the loop below runs once per event.
    ls_, le_, st_, du_, fl_ = t.launch_start, t.launch_end, t.start, t.duration, t.flags
    tn_, tk_, tq_, tt_, nb_ = t.name, t.kind, t.queue, t.thread, t.nbytes
    hs_, he_, hn_ = h.start, h.end, h.name
    tsite_, hsite_ = stack_ids

    def meta(kind: str, pid_: int, args: dict[str, Any], tid: int | None = None) -> None:
        tid_part = "" if tid is None else f',"tid":{tid}'
        buf.append(f'{{"ph":"M","name":"{kind}","pid":{pid_}{tid_part},"args":{dumps(args)}}}')

    # A launch names its queue in full ("OpenCL dev, queue 1"); a kernel, on its queue's track,
    # only the queue's label.
    qrows = [dumps(f"{device_title(q)}, {q.label}") for q in p.queues]
    kinds = [dumps(KIND_NAMES[k]) for k in sorted(KIND_NAMES)]
    host_ident = [f"host {p.meta.get('host', '?')}", f"pid {p.meta.get('pid', '?')}"]
    if p.meta.get("rank") is not None:
        host_ident.append(f"rank {p.meta['rank']}")

    bins, busy = busy_tracks(tl)
    for pi, proc in enumerate(tl.processes):
        pid = ids[0]
        ids[0] += 1
        if proc.kind == "host":
            pname = host_name(p, label)
            plabels = ", ".join(host_ident)
        else:
            pname = f"{label}: {proc.name}" if label else proc.name
            clock = clocks.get(proc.device_key or "")
            plabels = f"clock: {clock}" if clock else ""
        meta("process_name", pid, {"name": pname})
        meta("process_sort_index", pid, {"sort_index": pid})
        if plabels:
            meta("process_labels", pid, {"labels": plabels})
        for sort_index, track in enumerate(proc.tracks, 1):
            tid = ids[1]
            ids[1] += 1
            tname = track.name
            if track.kind == "thread":
                tname = thread_title(p.threads[track.thread], track.name)
                if track.lane:
                    tname += f" (overlap {track.lane})"
            meta("thread_name", pid, {"name": tname}, tid)
            meta("thread_sort_index", pid, {"sort_index": sort_index}, tid)
            where = f'"pid":{pid},"tid":{tid}'
            for item in track.items:
                i, tag = item >> 2, item & 3
                if tag == LAUNCH:
                    s = ls_[i]
                    d = max(0, le_[i] - s)
                    ts = f"{(s + shift) / 1000:.3f}"
                    flags = fl_[i]
                    extra = f',"stack":{tsite_[i]}' if tsite_[i] >= 0 else ""
                    if flags & UNRESOLVED:
                        extra += f',"unresolved":{dumps(p.errors.get(i, "unresolved"))}'
                    buf.append(
                        f'{{"ph":"X","cat":"launch","name":{jnames[tn_[i]]},{where},'
                        f'"ts":{ts},"dur":{d / 1000:.3f},"args":{{"kind":{kinds[tk_[i]]},'
                        f'"queue":{qrows[tq_[i]]}{extra}}}}}'
                    )
                    if not flags & UNRESOLVED:
                        buf.append(
                            f'{{"ph":"s","cat":"launch","name":"launch",'
                            f'"id":{flow_base + i + 1},{where},"ts":{ts}}}'
                        )
                elif tag == DEVICE:
                    s = st_[i]
                    ts = f"{(s + shift) / 1000:.3f}"
                    k = tk_[i]
                    nb = nb_[i]
                    extra = f',"bytes":{nb}' if nb >= 0 else ""
                    if fl_[i] & HOST_TIMED:
                        extra += ',"host_timed":true'
                    elif fl_[i] & APPROXIMATE:
                        extra += ',"approximate":true'
                    if i in details:
                        extra += f',"detail":{dumps(details[i])}'
                    buf.append(
                        f'{{"ph":"X","cat":{kinds[k]},"name":{jnames[tn_[i]]},{where},'
                        f'"ts":{ts},"dur":{max(0, du_[i]) / 1000:.3f},"args":{{'
                        f'"kind":{kinds[k]},"queue":{qlabels[tq_[i]]},'
                        f'"thread":{tlabels[tt_[i]]}{extra}}}}}'
                    )
                    if k != RANGE:
                        buf.append(
                            f'{{"ph":"f","bp":"e","cat":"launch","name":"launch",'
                            f'"id":{flow_base + i + 1},{where},"ts":{ts}}}'
                        )
                elif tag == HOST_RANGE:
                    s = hs_[i]
                    extra = f',"stack":{hsite_[i]}' if hsite_[i] >= 0 else ""
                    buf.append(
                        f'{{"ph":"X","cat":"range","name":{jnames[hn_[i]]},{where},'
                        f'"ts":{(s + shift) / 1000:.3f},"dur":{max(0, he_[i] - s) / 1000:.3f},'
                        f'"args":{{"kind":"range"'
                        f"{extra}}}}}"
                    )
                elif tag == MARK:
                    extra = f',"stack":{hsite_[i]}' if hsite_[i] >= 0 else ""
                    buf.append(
                        f'{{"ph":"i","s":"t","cat":"marker","name":{jnames[hn_[i]]},'
                        f'{where},"ts":{(hs_[i] + shift) / 1000:.3f},"args":{{"kind":"marker"'
                        f"{extra}}}}}"
                    )
                if len(buf) >= FLUSH_EVERY:
                    ev.flush()
        if bins is not None and pi in busy:
            times = [f"{(x + shift) / 1000:.3f}" for x in bins.edges()]
            for counter in busy[pi]:
                head = f'{{"ph":"C","cat":"busy","name":{dumps(counter.name)},"pid":{pid},"ts":'
                values = [*bins.percent(counter.busy), 0.0]
                buf.extend(
                    f'{head}{ts},"args":{{"percent":{v!r}}}}}' for ts, v in zip(times, values)
                )
                if len(buf) >= FLUSH_EVERY:
                    ev.flush()
    _write_memory(ev, p, label, shift, ids, meta)
    ev.flush()


def _write_memory(
    ev: _Events, p: ProfileData, label: str | None, shift: int, ids: list[int], meta: Any
) -> None:
    """Live bytes per device as counter (``C``) events, in a process of their own."""
    m = p.memory
    if not m:
        return
    pid = ids[0]
    ids[0] += 1
    meta("process_name", pid, {"name": f"{label}: device memory" if label else "device memory"})
    meta("process_sort_index", pid, {"sort_index": pid})
    names = [json.dumps(f"live bytes, {x}") for x in m.labels]
    t = m.table
    for s, d, live in zip(t.time, t.device, m.live_after):
        ev.buf.append(
            f'{{"ph":"C","cat":"memory","name":{names[d]},"pid":{pid},'
            f'"ts":{(s + shift) / 1000:.3f},"args":{{"bytes":{live}}}}}'
        )
        if len(ev.buf) >= FLUSH_EVERY:
            ev.flush()


def export_chrome_trace(p: ProfileData, path: str | os.PathLike[str] | IO[str]) -> None:
    """``Profile.export_chrome_trace``: one profile, unlabelled."""
    write_chrome_trace(path, [p])
