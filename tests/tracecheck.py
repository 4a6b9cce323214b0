"""Helpers for the timeline tests: a strict Chrome-trace validator and synthetic profiles.

``validate(doc)`` checks what Perfetto needs and what kprof promises: every event well formed
for its phase, every track named, X events on one track nesting strictly, every flow closed
(one ``s`` bound to a launch slice, one ``f`` bound to the start of a device slice) and no
device slice starting before its launch. It returns the events grouped for further checks.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

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
from kprof_core.result import Profile

REQUIRED = {
    "X": {"name", "cat", "ph", "ts", "dur", "pid", "tid"},
    "i": {"name", "ph", "ts", "pid", "tid", "s"},
    "s": {"name", "cat", "ph", "ts", "pid", "tid", "id"},
    "f": {"name", "cat", "ph", "ts", "pid", "tid", "id", "bp"},
    "M": {"name", "ph", "pid", "args"},
    "C": {"name", "ph", "ts", "pid", "args"},
}
METADATA = {
    "process_name",
    "process_labels",
    "process_sort_index",
    "thread_name",
    "thread_sort_index",
}


def ns(us: float) -> int:
    """A ``ts``/``dur`` (µs, three decimals) back to integer nanoseconds."""
    return round(us * 1000)


@dataclass
class Checked:
    processes: dict[int, str] = field(default_factory=dict)
    threads: dict[tuple[int, int], str] = field(default_factory=dict)
    slices: dict[tuple[int, int], list[dict[str, Any]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    instants: list[dict[str, Any]] = field(default_factory=list)
    flows: dict[int, dict[str, dict[str, Any]]] = field(default_factory=lambda: defaultdict(dict))
    counters: dict[tuple[int, str], list[dict[str, Any]]] = field(
        default_factory=lambda: defaultdict(list)
    )

    def track_of(self, name: str, cat: str | None = None) -> set[tuple[int, int]]:
        return {
            k
            for k, evs in self.slices.items()
            for e in evs
            if e["name"] == name and (cat is None or e["cat"] == cat)
        }

    def named(self, key: tuple[int, int]) -> str:
        return f"{self.processes[key[0]]} / {self.threads[key]}"

    def all_slices(self, cat: str | None = None) -> list[dict[str, Any]]:
        return [e for evs in self.slices.values() for e in evs if cat is None or e["cat"] == cat]


#: Top-level keys every Perfetto version reads; older ones stop at any other key, so those must
#: come after ``traceEvents``.
PERFETTO_KEYS = {"traceEvents", "displayTimeUnit", "otherData", "systemTraceEvents", "metadata"}


def validate_text(text: str) -> Checked:
    """``validate``, plus what only the text shows: nothing after the closing brace (Perfetto
    refuses data after the end of the trace)."""
    assert text.endswith("}"), "nothing may follow the trace's closing brace"
    return validate(json.loads(text))


def validate(doc: Any) -> Checked:
    assert isinstance(doc, dict), "a trace is an object with traceEvents"
    assert isinstance(doc.get("baseTimeNanoseconds"), int), "baseTimeNanoseconds must be an int"
    keys = list(doc)
    before = keys[: keys.index("traceEvents")]
    assert set(before) <= PERFETTO_KEYS, f"keys before traceEvents that Perfetto stops at: {before}"
    assert doc.get("displayTimeUnit", "ns") in ("ms", "ns")
    events = doc["traceEvents"]
    assert isinstance(events, list)
    c = Checked()
    for e in events:
        ph = e.get("ph")
        assert ph in REQUIRED, f"unexpected phase {ph!r} in {e}"
        missing = REQUIRED[ph] - e.keys()
        assert not missing, f"{ph} event without {missing}: {e}"
        assert type(e["pid"]) is int, e
        if ph == "M":
            assert e["name"] in METADATA, e
            if e["name"] == "process_name":
                assert isinstance(e["args"]["name"], str) and e["args"]["name"]
                assert e["pid"] not in c.processes, f"pid {e['pid']} named twice"
                c.processes[e["pid"]] = e["args"]["name"]
            elif e["name"] == "thread_name":
                assert type(e["tid"]) is int
                c.threads[(e["pid"], e["tid"])] = e["args"]["name"]
            continue
        if ph == "C":  # a counter: numbers by series name, per process
            # Device memory in whole bytes; device time as a busy percentage (a float).
            number = float if e.get("cat") == "busy" else int
            assert e["args"] and all(
                isinstance(v, number) and not isinstance(v, bool) for v in e["args"].values()
            ), e
            assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0, e
            c.counters[(e["pid"], e["name"])].append(e)
            continue
        assert type(e["tid"]) is int, e
        assert isinstance(e["name"], str) and e["name"], e
        ts = e["ts"]
        assert isinstance(ts, (int, float)) and not isinstance(ts, bool) and ts >= 0, e
        if ph == "X":
            dur = e["dur"]
            assert isinstance(dur, (int, float)) and not isinstance(dur, bool) and dur >= 0, e
            assert isinstance(e.get("args", {}), dict)
            c.slices[(e["pid"], e["tid"])].append(e)
        elif ph == "i":
            assert e["s"] in ("t", "p", "g")
            c.instants.append(e)
        else:
            assert type(e["id"]) is int
            if ph == "f":
                assert e["bp"] == "e", e
            assert ph not in c.flows[e["id"]], f"flow {e['id']} has two {ph!r} events"
            c.flows[e["id"]][ph] = e
    # A tid belongs to one process and is nobody's pid (Perfetto would take it for the main
    # thread of that process).
    owners: dict[int, set[int]] = defaultdict(set)
    for pid, tid in list(c.slices) + [(e["pid"], e["tid"]) for e in c.instants] + list(c.threads):
        owners[tid].add(pid)
    assert all(len(v) == 1 for v in owners.values()), "a tid shared by two processes"
    assert not set(owners) & set(c.processes), "a tid equal to a pid"
    # Every track that has events is named, and so is its process.
    for key in list(c.slices) + [(e["pid"], e["tid"]) for e in c.instants]:
        assert key[0] in c.processes, f"pid {key[0]} has events but no process_name"
        assert key in c.threads, f"track {key} has events but no thread_name"
    # Strict nesting on every track.
    for key, evs in c.slices.items():
        stack: list[tuple[int, str]] = []
        for e in sorted(evs, key=lambda e: (ns(e["ts"]), -ns(e["dur"]))):
            s, end = ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])
            while stack and stack[-1][0] <= s:
                stack.pop()
            assert not stack or end <= stack[-1][0], (
                f"on {c.named(key)}, {e['name']} [{s}, {end}] overlaps {stack[-1][1]} "
                f"(ends {stack[-1][0]}) without nesting"
            )
            stack.append((end, e["name"]))
    # Flows: closed, bound, and never backwards in time.
    starts = {k: {ns(e["ts"]) for e in evs} for k, evs in c.slices.items()}
    launches = {
        k: {ns(e["ts"]) for e in evs if e["cat"] == "launch"} for k, evs in c.slices.items()
    }
    for fid, pair in c.flows.items():
        assert set(pair) == {"s", "f"}, f"flow {fid} is not closed: {pair}"
        s, f = pair["s"], pair["f"]
        skey, fkey = (s["pid"], s["tid"]), (f["pid"], f["tid"])
        assert ns(s["ts"]) in launches.get(skey, set()), f"flow {fid} starts where no launch does"
        assert ns(f["ts"]) in starts.get(fkey, set()), f"flow {fid} ends where no slice starts"
        assert ns(f["ts"]) >= ns(s["ts"]), f"flow {fid}: the kernel starts before its launch"
    return c


# -- synthetic profiles ------------------------------------------------------------------------------


def synthetic(
    n: int,
    threads: int = 2,
    queues_per_thread: int = 1,
    seed: int = 0,
    host_timed_every: int = 0,
    unresolved_every: int = 0,
) -> Profile:
    """A finished profile with ``n`` launches, built directly in the tables (as the recorder
    leaves them): each thread runs ``step`` ranges of a few launches, each launch's kernel
    runs on the thread's queue, in order, after its launch."""
    rng = random.Random(seed)
    p = Profile()
    p.meta = {"host": "synth", "pid": 4242}
    names = ["step", "kernel_a", "kernel_b", "[copy host to device]", "tick"]
    p.names = list(names)
    p.threads = [ThreadRecord(1000 + i, f"worker-{i}") for i in range(threads)]
    p.queues = [
        QueueRecord("testdev", "synth 0", f"queue {k + 1}", "testdev:synth 0")
        for k in range(threads * queues_per_thread)
    ]
    t0 = 1_000_000_000
    p.start_ns = t0
    end = t0
    per_thread = [n // threads + (1 if i < n % threads else 0) for i in range(threads)]
    row = 0
    for th, count in enumerate(per_thread):
        now = t0 + rng.randrange(1000)
        qfree = [0] * queues_per_thread
        done = 0
        while done < count:
            batch = min(count - done, rng.randrange(1, 6))
            r0 = now
            now += rng.randrange(100, 2000)
            for _ in range(batch):
                qk = rng.randrange(queues_per_thread)
                qid = th * queues_per_thread + qk
                ls = now
                le = ls + rng.randrange(200, 5000)
                now = le + rng.randrange(0, 500)
                start = max(ls + rng.randrange(0, 20000), qfree[qk])
                dur = rng.randrange(0, 30000)
                qfree[qk] = start + dur
                row += 1
                kind = COPY if row % 8 == 0 else KERNEL
                flags = PLACED
                if host_timed_every and row % host_timed_every == 0:
                    flags |= HOST_TIMED
                    start, dur = ls, le - ls + rng.randrange(0, 1000)
                if unresolved_every and row % unresolved_every == 0:
                    flags |= UNRESOLVED
                    start, dur = ls, 0
                    p.errors[len(p.table)] = "synthetic: the device never answered"
                p.table.append(
                    3 if kind == COPY else rng.randrange(1, 3),
                    kind,
                    qid,
                    th,
                    ls,
                    le,
                    start,
                    dur,
                    rng.randrange(1, 1 << 20) if kind == COPY else -1,
                    flags,
                )
                end = max(end, start + dur, le)
                done += 1
            if rng.random() < 0.3:
                p.host.append(4, HostTable.MARK, th, now, now)
            now += rng.randrange(100, 1000)
            p.host.append(0, HostTable.RANGE, th, r0, now)
            end = max(end, now)
    p.end_ns = end
    p._finished = True
    return p


def add_device_range(p: Profile, name: str, queue: int, thread: int, start: int, end: int) -> None:
    """A device range record (the device time of a ``kprof.range``)."""
    if name not in p.names:
        p.names.append(name)
    p.table.append(
        p.names.index(name), RANGE, queue, thread, start, end, start, end - start, -1, PLACED
    )
