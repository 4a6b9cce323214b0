"""Activity records (kprof_core/activity.py) through the third-party test plugin's simulated
tracer (``testtrace``): scopes per profile and thread, delivery from the tool's own thread,
placement by the tool's clock, nesting, late and foreign records, and bounded pending work."""

from __future__ import annotations

import threading
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

import kprof
from kprof import plugin as kp
from kprof_core.data.records import COPY, KERNEL, RANGE
from kprof_core.host.discovery import ENV_PLUGINS
from kprof_core.recording import activity


@pytest.fixture
def tracer(fresh_registry: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from kprof_testbackend.tracer import tracer as t

    monkeypatch.setenv(ENV_PLUGINS, "testtrace")
    t.clock_offset = 0
    t.foreign = 0
    t.batch = 64
    t.delivered_batches = 0
    t.delivery_threads.clear()
    t.columns = False
    t.current = None
    t.mirrored.clear()
    yield t
    t.release()
    t.columns = False
    t.current = None


def _rows(p: kprof.Profile) -> list[tuple[str, str, str]]:
    """(name, thread name, queue label) of every device row, in table order."""
    t = p.table
    return [
        (p.names[t.name[i]], p.threads[t.thread[i]].name, p.queues[t.queue[i]].label)
        for i in range(len(t))
    ]


def test_records_of_the_profile_become_rows(tracer: Any) -> None:
    from kprof_testbackend.tracer import Stream

    s = Stream("stream A")
    with kprof.profile() as p:
        tracer.launch("k1", s, 1000)
        tracer.launch("k2", s, 2000)
        tracer.launch("copy", s, 500, nbytes=4096, kind=COPY)
    ks = p.kernels
    assert [k.name for k in ks] == ["k1", "k2", "copy"]
    assert [k.duration_ns for k in ks] == [1000, 2000, 500]
    t = p.table
    assert [t.kind[i] for i in range(3)] == [KERNEL, KERNEL, COPY]
    assert t.nbytes[2] == 4096
    # In order on the stream, and none before its launch (the tracer's clock is placed exactly).
    assert t.start[1] >= t.start[0] + 1000 and t.start[2] >= t.start[1] + 2000
    assert all(t.start[i] >= t.launch_start[i] for i in range(3))
    assert p.start_ns <= t.launch_start[0] and t.launch_end[2] <= p.end_ns
    assert {c.method for c in p.clocks.values()} == {"simulated tracer clock"}


def test_clock_offset_is_placed_by_activity_align(tracer: Any) -> None:
    from kprof_testbackend.tracer import Stream

    tracer.clock_offset = 5_000_000_000_000  # the device clock is far from the host's
    s = Stream("s")
    with kprof.profile() as p:
        tracer.launch("k", s, 1000)
    t = p.table
    assert p.start_ns <= t.launch_start[0] <= t.start[0] <= p.end_ns
    clock = next(iter(p.clocks.values()))
    assert clock.error_ns == 0 and "simulated tracer clock" in clock.describe()


def test_two_profiles_on_two_threads_each_get_exactly_their_own(tracer: Any) -> None:
    from kprof_testbackend.tracer import Stream

    streams = [Stream("s0"), Stream("s1")]
    profiles: list[Any] = [None, None]
    barrier = threading.Barrier(2)

    def worker(i: int) -> None:
        with kprof.profile() as p:
            barrier.wait()
            for j in range(100):
                tracer.launch(f"t{i}-{j}", streams[i], 100)
            barrier.wait()
        profiles[i] = p

    threads = [threading.Thread(target=worker, args=(i,), name=f"w{i}") for i in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for i, p in enumerate(profiles):
        assert [r[0] for r in _rows(p)] == [f"t{i}-{j}" for j in range(100)]
        assert {r[1] for r in _rows(p)} == {f"w{i}"}


def test_work_outside_every_scope_is_not_recorded(tracer: Any) -> None:
    from kprof_testbackend.tracer import Stream

    s = Stream("s")
    outside = threading.Thread(target=lambda: tracer.launch("other thread", s, 10))
    with kprof.profile() as p:
        tracer.launch("mine", s, 10)
        outside.start()
        outside.join()
    tracer.launch("after", s, 10)
    assert [k.name for k in p.kernels] == ["mine"]
    assert tracer.foreign == 2


def test_propagated_threads_are_attributed_to_their_thread(tracer: Any) -> None:
    from kprof_testbackend.tracer import Stream

    s = Stream("s")
    with kprof.profile() as p:
        th = threading.Thread(
            target=kprof.propagate(lambda: tracer.launch("in thread", s, 10)), name="helper"
        )
        th.start()
        th.join()
        tracer.launch("main", s, 10)
    assert sorted((r[0], r[1]) for r in _rows(p)) == [
        ("in thread", "helper"),
        ("main", threading.current_thread().name),
    ]


def test_a_thread_pool_holds_one_scope_per_worker(tracer: Any) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from kprof_testbackend.tracer import Stream

    s = Stream("s")
    with kprof.profile() as p:
        rec = kprof.plugin.active()
        assert rec is not None
        with ThreadPoolExecutor(2, thread_name_prefix="pool") as ex:
            list(ex.map(kprof.propagate(lambda i: tracer.launch(f"k{i}", s, 10)), range(200)))
        scopes = len(rec.scopes)
    assert scopes <= 3  # the profile's thread and two workers, whatever the number of calls
    assert sorted(k.name for k in p.kernels) == sorted(f"k{i}" for i in range(200))
    assert {r[1].rsplit("_", 1)[0] for r in _rows(p)} == {"pool"}


def test_nested_profiles_behave_as_today(tracer: Any) -> None:
    from kprof_testbackend.tracer import Stream

    s = Stream("s")
    with kprof.profile() as outer:
        tracer.launch("before", s, 10)
        with kprof.profile() as inner:
            tracer.launch("inside", s, 10, detail="inner detail")
        tracer.launch("after", s, 10)
    assert [k.name for k in inner.kernels] == ["inside"]
    assert sorted(k.name for k in outer.kernels) == ["after", "before", "inside"]
    # The outer profile took the inner one's rows with their details.
    assert [outer.names[outer.table.name[i]] for i in outer.details] == ["inside"]


def test_delivery_runs_while_the_profile_runs_from_the_tools_thread(tracer: Any) -> None:
    from kprof_testbackend.tracer import Stream

    tracer.batch = 16
    s = Stream("s")
    delivered_before_end = 0
    with kprof.profile() as p:
        pause = threading.Event()
        for wave in range(5):  # the tool's thread hands over each wave once it completed
            for i in range(80):
                tracer.launch(f"k{i % 4}", s, 10)
            for _ in range(5000):
                if tracer.delivered_batches > wave:
                    break
                pause.wait(0.002)
        delivered_before_end = tracer.delivered_batches
    assert len(p.kernels) == 400
    assert delivered_before_end >= 5
    assert "testtrace-delivery" in tracer.delivery_threads


def test_late_records_are_dropped_counted_and_said(tracer: Any) -> None:
    from kprof_testbackend.tracer import Stream

    s = Stream("held")
    tracer.hold(s)
    before = activity.stats()["late"]
    with pytest.warns(RuntimeWarning, match="had no device record after"):
        with kprof.profile(timeout=0.05) as p:
            tracer.launch("hung", s, 10)
            scopes = tuple(p_scope for p_scope in _active_scopes())
    assert p.kernels == []
    # The tool hands the record over after the profile ended: dropped, counted, said once.
    with pytest.warns(RuntimeWarning, match="arrived after their profile had ended"):
        assert (
            kp.deliver(tracer.backend, [kp.DeviceRecord(scopes[0], KERNEL, "hung", s, 1, 2)]) == 1
        )
    assert activity.stats()["late"] == before + 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once per profile, not per record
        kp.deliver(tracer.backend, [kp.DeviceRecord(scopes[0], KERNEL, "x", s, 1, 2)])


def _active_scopes() -> list[int]:
    rec = kprof.plugin.active()
    assert rec is not None
    return list(rec.scopes)


def test_foreign_records_are_dropped(tracer: Any) -> None:
    from kprof_testbackend.tracer import Stream

    before = activity.stats()["foreign"]
    with kprof.profile():
        b = kprof.get_backend("testtrace")
        assert kp.deliver(b, [kp.DeviceRecord(10**9, KERNEL, "?", Stream("s"), 1, 2)]) == 1
    assert activity.stats()["foreign"] == before + 1


def test_tool_switched_on_only_while_a_profile_runs(tracer: Any) -> None:
    from kprof_testbackend.tracer import Stream

    calls = tracer.enable_calls
    assert not tracer.enabled
    with kprof.profile():
        assert tracer.enabled
        with kprof.profile():
            assert tracer.enable_calls == calls + 1  # switched on once, by the first profile
        assert tracer.enabled
    assert not tracer.enabled
    tracer.launch("after", Stream("s"), 10)
    assert tracer.foreign == 1


def test_ranges_on_a_backend_reporting_its_work_span_that_work(tracer: Any) -> None:
    """A range puts no timestamps on a backend that reports its work itself: its device row
    on each stream spans the work launched inside it there, nested ranges' work included,
    with the bytes and flops the user said; a range without work has none. ``kprof.kernel``
    around such work is a range (no kernel counted twice). The vendor tool is told of every
    range at both ends, balanced."""
    from kprof_testbackend.tracer import Stream

    a, b = Stream("A"), Stream("B")
    tracer.current = a
    with kprof.profile() as p:
        with kprof.range("outer", flops=7, bytes=64):
            tracer.launch("k1", a, 1000)
            with kprof.range("inner"):
                tracer.launch("k2", a, 2000)
                tracer.launch("kb", b, 300)
            tracer.launch("k3", a, 500)
        with kprof.range("empty"):
            pass
        kprof.kernel(lambda: tracer.launch("k4", a, 100), name="wrapped")()
    t = p.table
    row = {(p.names[t.name[i]], p.queues[t.queue[i]].label): i for i in range(len(t))}
    assert sorted(n for n, _q in row) == [
        "inner",
        "inner",
        "k1",
        "k2",
        "k3",
        "k4",
        "kb",
        "outer",
        "outer",
        "wrapped",
    ]
    assert [k.name for k in p.kernels if k.kind != RANGE] == ["k1", "k2", "kb", "k3", "k4"]

    def span(i: int) -> tuple[int, int]:
        return t.start[i], t.start[i] + t.duration[i]

    assert span(row["outer", "A"]) == (span(row["k1", "A"])[0], span(row["k3", "A"])[1])
    assert span(row["inner", "A"]) == span(row["k2", "A"])
    assert span(row["outer", "B"]) == span(row["inner", "B"]) == span(row["kb", "B"])
    assert span(row["wrapped", "A"]) == span(row["k4", "A"])
    o = row["outer", "A"]
    assert (t.kind[o], t.nbytes[o], t.flops[o]) == (RANGE, 64, 7)
    assert t.launch_start[o] <= t.launch_start[row["k1", "A"]]
    assert t.launch_end[o] >= t.launch_end[row["k3", "A"]]
    assert {r.name for r in p.ranges} >= {"outer", "inner", "empty"}
    assert tracer.mirrored == [
        ("push", "outer"), ("push", "inner"), ("pop",), ("pop",),
        ("push", "empty"), ("pop",), ("push", "wrapped"), ("pop",),
    ]  # fmt: skip
    # The summary: a range's device time is its work's, its span the rows'.
    ranges = {r.name: r for r in p.summary().device_ranges}
    assert ranges["inner"].total_ns == 2300 and ranges["outer"].total_ns == 3800
    assert "empty" not in ranges


def test_a_range_open_at_the_end_has_no_device_row(tracer: Any) -> None:
    """A range the profile's end cuts is host time only, as on every backend; the work
    inside it is still recorded."""
    from kprof_testbackend.tracer import Stream

    tracer.current = s = Stream("A")
    r = kprof.range("cut")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with kprof.profile() as p:
            r.__enter__()
            tracer.launch("k", s, 1000)
    r.__exit__(None, None, None)
    assert [k.name for k in p.kernels] == ["k"]
    assert [x.name for x in p.ranges] == ["cut"]
    assert tracer.mirrored == [("push", "cut"), ("pop",)]


def test_a_failing_align_places_records_at_the_profile_start_and_says_so(
    fresh_registry: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kprof_testbackend.tracer import Stream, Tracer

    class NoClock(Tracer):
        @kprof.plugin.hookimpl
        def activity_align(self, backend: kprof.plugin.Backend, queue: Any, device_ns: int) -> Any:
            raise RuntimeError("clock broke")

    monkeypatch.setenv(ENV_PLUGINS, "none")
    monkeypatch.setenv("KPROF_DISABLE_PLUGIN_AUTOLOAD", "1")
    t = NoClock()
    kprof.register_backend(t, "noclock")
    t.clock_offset = 10**12
    s = Stream("s")
    with pytest.warns(RuntimeWarning, match="activity_align raised RuntimeError: clock broke"):
        with kprof.profile() as p:
            t.launch("k", s, 1000)
    [k] = p.kernels
    assert k.duration_ns == 1000 and 0 <= k.start_ns <= p.end_ns - p.start_ns
    [clock] = p.clocks.values()
    assert clock.error_ns is None and clock.method.startswith("no clock correlation")


def test_a_failing_scope_enter_is_said_and_the_profile_goes_on(
    fresh_registry: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kprof_testbackend.tracer import Stream, Tracer

    class NoScope(Tracer):
        @kprof.plugin.hookimpl
        def activity_scope_enter(self, backend: kprof.plugin.Backend, scope: int) -> bool:
            raise RuntimeError("no scopes today")

    monkeypatch.setenv("KPROF_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.delenv(ENV_PLUGINS, raising=False)
    t = NoScope()
    kprof.register_backend(t, "noscope")
    with pytest.warns(RuntimeWarning, match="activity_scope_enter raised RuntimeError"):
        with kprof.profile() as p:
            t.launch("k", Stream("s"), 10)
            kprof.mark("still profiling")
    assert p.kernels == [] and [m.name for m in p.markers] == ["still profiling"]
    assert t.foreign == 1


def test_details_are_kept_saved_and_traced(tracer: Any, tmp_path: Any) -> None:
    import io
    import json

    from kprof_testbackend.tracer import Stream

    from kprof_core import result as kprof_profile
    from kprof_core.io import storage
    from kprof_core.renderers.chrome import write_chrome_trace

    s = Stream("s")
    with kprof.profile() as p:
        tracer.launch("k", s, 10, detail="grid (2, 1, 1) block (64, 1, 1)")
        tracer.launch("plain", s, 10)
    assert p.details == {0: "grid (2, 1, 1) block (64, 1, 1)"}
    back = kprof_profile.loads(storage.dumps(p))
    assert back.details == p.details
    buf = io.StringIO()
    write_chrome_trace(buf, [p])
    events = [
        e
        for e in json.loads(buf.getvalue())["traceEvents"]
        if e.get("ph") == "X" and e.get("cat") == "kernel"
    ]
    assert [(e["name"], e["args"].get("detail")) for e in events] == [
        ("k", "grid (2, 1, 1) block (64, 1, 1)"),
        ("plain", None),
    ]
    # And in the data exports (JSON, CSV, DataFrame share the rows).
    from kprof_core.io.exports import iter_rows

    assert [(r["name"], r["detail"]) for r in iter_rows(p)] == [
        ("k", "grid (2, 1, 1) block (64, 1, 1)"),
        ("plain", None),
    ]


def test_column_wise_delivery_gives_the_same_rows(tracer: Any) -> None:
    """The same work delivered column-wise (``deliver_columns``): same rows, placed the same
    way, details formatted from their columns only when read; two profiles' rows split."""
    from kprof_testbackend.tracer import Stream

    def run(columns: bool) -> tuple[kprof.Profile, kprof.Profile]:
        tracer.columns = columns
        s1, s2 = Stream("stream A"), Stream("stream B")
        out: dict[str, Any] = {}
        barrier = threading.Barrier(2)

        def other() -> None:
            with kprof.profile() as q:
                barrier.wait()
                tracer.launch("theirs", s2, 300)
                barrier.wait()
            out["q"] = q

        th = threading.Thread(target=other, name="other")
        th.start()
        with kprof.profile() as p:
            barrier.wait()
            tracer.launch("k1", s1, 1000)
            tracer.launch("copy", s1, 500, nbytes=4096, kind=COPY)
            tracer.launch("k2", s1, 2000)
            barrier.wait()
        th.join()
        return p, out["q"]

    rows_p, rows_q = run(False)
    assert _rows(rows_q) == [("theirs", "other", "stream B")]
    cols_p, cols_q = run(True)
    assert (
        _rows(cols_p)
        == _rows(rows_p)
        == [
            ("k1", "MainThread", "stream A"),
            ("copy", "MainThread", "stream A"),
            ("k2", "MainThread", "stream A"),
        ]
    )
    assert _rows(cols_q) == [("theirs", "other", "stream B")]
    t = cols_p.table
    assert [t.duration[i] for i in range(3)] == [1000, 500, 2000]
    assert [t.nbytes[i] for i in range(3)] == [-1, 4096, -1]
    assert all(t.start[i] >= t.launch_start[i] for i in range(3))
    assert {c.method for c in cols_p.clocks.values()} == {"simulated tracer clock"}
    # Details: a block of columns, formatted on reading, in row order.
    assert len(cols_p.details) == 3 and 1 in cols_p.details
    assert [cols_p.details[i] for i in range(3)] == [
        f"grid {g} work-items, workgroup 64" for g in (1000, 500, 2000)
    ]
    assert dict(cols_p.details.items())[2] == "grid 2000 work-items, workgroup 64"


def test_column_batches_of_an_ended_profile_are_late(tracer: Any) -> None:
    """A batch for a profile that has ended is dropped, counted as late (per row), and said."""
    from kprof_testbackend.tracer import Stream

    s = Stream("held")
    tracer.hold(s)
    before = activity.stats()["late"]
    with pytest.warns(RuntimeWarning, match="had no device record after"):
        with kprof.profile(timeout=0.05) as p:
            tracer.launch("hung", s, 10)
            scopes = tuple(_active_scopes())
    assert p.kernels == []
    batch = kp.ActivityColumns(
        scope=[scopes[0]] * 2,
        kind=[KERNEL] * 2,
        name=[0, 0],
        names=["hung"],
        queue=[0, 0],
        queues=[s],
        begin=[1, 3],
        end=[2, 4],
    )
    with pytest.warns(RuntimeWarning, match="arrived after their profile had ended"):
        assert kp.deliver_columns(tracer.backend, batch) == 2
    assert activity.stats()["late"] == before + 2


def test_dropped_records_are_kept_per_profile_and_said() -> None:
    """``kp.dropped``: counted on each profile its backend delivers to, with the reason,
    and the end's warning blames the drops, not the device."""
    from kprof_core.recording.recorder import Recorder

    class B:
        name = "t"

    b = B()
    rec = Recorder.__new__(Recorder)
    rec.activity_backends = {b}
    rec.activity_dropped = {}
    with activity._lock:
        activity._scopes[10**12] = (rec, None)
    try:
        kp.dropped(b, 5, "the tool's buffer was full")  # type: ignore[arg-type]
        kp.dropped(b, 2, "the tool's buffer was full")  # type: ignore[arg-type]
    finally:
        with activity._lock:
            del activity._scopes[10**12]
    assert rec.activity_dropped == {"t": (7, "the tool's buffer was full")}
