"""Every value a plugin hands back is range-checked where it is recorded, identically on every
path (compiled and pure Python; column-wise, one by one, and entry by entry): a profile in
memory always saves, always loads back, and every view works; a bad value makes its record
unresolved with the reason (issue 25, items 6, 7, 8, 9, 17 and 22)."""

from __future__ import annotations

import io
import warnings
from typing import Any

import pytest
from hostile_plugins import EDGE_INTS, HOSTILE_INT, HOSTILE_NAMES
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from kprof_testbackend.instant import InstantClock, InstantQueue
from test_recorder_paths import (
    PATHS,
    AbsolutePlugin,
    BatchPlugin,
    Dev,
    ElapsedPlugin,
    Tok,
    kprof_core_registry,
)

import kprof
from kprof_core.data.records import DeviceTable
from kprof_core.data.values import VALUE_LIMIT
from kprof_core.host.discovery import ENV_DISABLE_AUTOLOAD
from kprof_core.low_level import native
from kprof_core.recording import harvest_columns, harvest_one
from kprof_core.recording import recorder as recorder_module
from kprof_core.recording.recorder import KERNEL, Recorder
from kprof_core.result import Profile, loads

# One launch: (queue, begin, end, host start, host end, nbytes); each a sane value or not.
LAUNCH = st.tuples(
    st.integers(0, 2),
    st.one_of(st.integers(10_000, 20_000), HOSTILE_INT),
    st.one_of(st.integers(20_000, 30_000), HOSTILE_INT),
    st.one_of(st.just(None), HOSTILE_INT),
    st.one_of(st.just(None), HOSTILE_INT),
    st.one_of(st.just(-1), st.integers(0, 4096), HOSTILE_INT),
)


@pytest.fixture
def reg(fresh_registry: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv(ENV_DISABLE_AUTOLOAD, "1")  # only the plugins registered here
    return fresh_registry


class HostileAlign(AbsolutePlugin):
    """Alignments with hostile fields (``align`` set per run)."""

    align: Any = None

    @kprof.plugin.hookimpl
    def align_clock(self, token: Tok, launch_window: tuple[int, int]) -> Any:
        return self.align


def run_hostile(
    plugin: Any, launches: list[tuple[Any, ...]], compiled: bool, bulk: bool, mp: Any
) -> tuple[dict[str, Any], Recorder]:
    name = "hostile"
    backend = kprof_core_registry().register(plugin, name)
    queues = [Dev("devA", "q0"), Dev("devA", "q1"), Dev("devB", "q2")]
    native.use_compiled(compiled)
    try:
        with mp.context() as m, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m.setattr(Recorder, "harvest_every", 4)
            m.setattr(Recorder, "max_pending", 12)
            m.setattr(recorder_module, "now", lambda: 99)
            if not bulk:
                m.setattr(harvest_columns.Columns, "bulk", lambda self, incoming, i, n, dl: 0)
                m.setattr(harvest_one, "one", lambda t, k, entry: False)
            rec = Recorder([backend], timeout=5.0)
            rec.start_ns = 500  # where a launch without host times is put: deterministic
            t = 1000
            for qi, begin, end, h0, h1, nbytes in launches:
                t += 100
                tok = Tok(begin, end)
                rec.launch(
                    backend,
                    KERNEL,
                    "k",
                    queues[qi],
                    t if h0 is None else h0,
                    t + 10 if h1 is None else h1,
                    tok,
                    tok,
                    nbytes,
                )
            rec.finish()
    finally:
        native.use_compiled(True)
        kprof_core_registry().unregister(name)
    got = rec.recording()
    out = {
        "table": [list(c) for c in got.table.columns()],
        "errors": dict(got.errors),
        "clocks": {k: (c.method, c.error_ns, c.shift_ns) for k, c in got.clocks.items()},
        "broken": backend.broken,
    }
    return out, rec


def every_view(p: Profile) -> None:
    """Everything a user does with a profile: none of it may raise."""
    str(p)
    p.report(trace=True)
    p.summary()
    list(p.kernels)
    p.export_chrome_trace(io.StringIO())
    p.export_html(io.StringIO())
    p.to_json()
    p.to_csv()


def saved_and_loaded(rec: Recorder) -> Profile:
    p = Profile(backends=["hostile"])
    p.start_ns, p.end_ns = 0, 10**6
    p._take(rec.recording())
    every_view(p)
    buf = io.BytesIO()
    p.save(buf)
    back = loads(buf.getvalue())
    every_view(back)
    assert len(back.kernels) == len(p.kernels)
    return back


@pytest.mark.parametrize("plugin_kind", ["absolute", "batch", "elapsed"])
@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    phases=[Phase.explicit, Phase.generate],
)
@given(launches=st.lists(LAUNCH, min_size=1, max_size=24))
def test_hostile_values_make_the_same_records_that_save_and_load(
    plugin_kind: str, launches: list[tuple[Any, ...]], reg: Any, monkeypatch: Any
) -> None:
    results = []
    for compiled, bulk in PATHS:
        plugin = {"elapsed": ElapsedPlugin, "batch": BatchPlugin, "absolute": AbsolutePlugin}[
            plugin_kind
        ]()
        out, rec = run_hostile(plugin, launches, compiled, bulk, monkeypatch)
        results.append(out)
        back = saved_and_loaded(rec)
        # Nothing lost; what was kept is within the limits; bad values are unresolved.
        assert len(back.kernels) == len(launches)
        for k in back.kernels:
            assert k.duration_ns >= 0
            assert k.error is not None or 0 <= k.duration_ns < VALUE_LIMIT
    for path, other in zip(PATHS[1:], results[1:]):
        assert other == results[0], path


def test_a_wrapped_around_duration_is_one_unresolved_record(reg: Any, monkeypatch: Any) -> None:
    """Item 6: a duration of 2**64 corrupted the shared table (one column a row short) and
    every backend's records were lost; now that one record is unresolved, with the reason."""
    launches = [(0, 10_000, 10_050, None, None, -1)] * 3 + [
        (0, 10_000, 10_000 + 2**64, None, None, -1)
    ]
    launches += [(0, 10_000, 10_050, None, None, -1)] * 3
    for compiled, bulk in PATHS:
        out, rec = run_hostile(ElapsedPlugin(), launches, compiled, bulk, monkeypatch)
        assert len({len(c) for c in out["table"]}) == 1  # every column the same length
        assert list(out["errors"]) == [3], (compiled, bulk)
        assert "beyond ±2**59" in out["errors"][3]
        assert out["broken"] is None
        saved_and_loaded(rec)


@pytest.mark.parametrize(
    "begin,end,why",
    [
        (10_000, 10_000 + 2**62, "beyond ±2**59"),  # saved, then refused by the loader
        (10_000 + 10**9, 10_000, "end before the begin"),  # a negative duration
        (2**63 - 1, 2**63 - 1, "beyond ±2**59"),
    ],
)
def test_times_the_file_cannot_hold_or_that_go_backwards_are_unresolved(
    begin: int, end: int, why: str, reg: Any, monkeypatch: Any
) -> None:
    """Items 7 and 8: durations in (2**61, 2**63) were saved and then refused by the loader;
    negative durations and ends before begins were kept as numbers."""
    launches = [(0, 10_000, 10_050, None, None, -1), (0, begin, end, None, None, -1)]
    for compiled, bulk in PATHS:
        for plugin in (AbsolutePlugin(), ElapsedPlugin(), BatchPlugin()):
            out, rec = run_hostile(plugin, launches, compiled, bulk, monkeypatch)
            assert list(out["errors"]) == [1] and why in out["errors"][1]
            back = saved_and_loaded(rec)
            assert [k.error is None for k in back.kernels] == [True, False]


def test_negative_elapsed_times_are_not_kept(testbackends: Any) -> None:
    """Item 8 as reported: ``elapsed_time`` answering -1e9 made five kernels of -1 s."""

    class Backwards(InstantClock):
        @kprof.plugin.hookimpl
        def elapsed_time(self, backend: kprof.plugin.Backend, start: Any, stop: Any) -> Any:
            return -(10**9)

    plugin = Backwards()
    kprof.register_backend(plugin, "backwards")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with kprof.profile(backends=["backwards"]) as p, plugin.using(InstantQueue("q")):
            for _ in range(5):
                with kprof.range("k"):
                    pass
    assert len(p.device_ranges) == 5
    assert all(r.error and "end before the begin" in r.error for r in p.device_ranges)
    assert all(r.duration_ns == 0 for r in p.device_ranges)  # was -1 s each
    every_view(p)


@pytest.mark.parametrize(
    "alignment",
    [
        kprof.plugin.Alignment(host_ns=2**63 - 1, error_ns=0, method="m"),
        kprof.plugin.Alignment(host_ns=None, error_ns=0, method="m"),  # type: ignore[arg-type]
        kprof.plugin.Alignment(host_ns=1.5e9, error_ns=0, method="m"),  # type: ignore[arg-type]
        kprof.plugin.Alignment(host_ns=5000, error_ns=-3, method="m"),
        kprof.plugin.Alignment(host_ns=5000, error_ns=0, method=None),  # type: ignore[arg-type]
        kprof.plugin.Alignment(host_ns=2**64, error_ns=0, method="m"),
    ],
)
def test_a_hostile_alignment_falls_back_to_the_launch(
    alignment: Any, reg: Any, monkeypatch: Any
) -> None:
    """Items 7, 8, 9, 17: an Alignment off the clock was kept (export_html raised
    OverflowError; error_ns<0 made a file that does not load; host_ns=None placed kernels
    5,029 s before their launch; a huge host_ns wrapped on one path and raised on the other).
    Now the device is placed as if the plugin had no alignment (its first work at its launch),
    the same on both paths, and no work starts before its launch."""
    launches = [(0, 10_000 + 100 * i, 10_050 + 100 * i, None, None, -1) for i in range(6)]
    results = []
    for compiled, bulk in PATHS:
        plugin = HostileAlign()
        plugin.align = alignment
        out, rec = run_hostile(plugin, launches, compiled, bulk, monkeypatch)
        results.append(out)
        assert not out["errors"]
        [(method, err, _shift)] = out["clocks"].values()
        assert method.startswith("first work on the device assumed") and err is None
        back = saved_and_loaded(rec)
        assert all(k.start_ns >= k.launch_start_ns for k in back.kernels)
    assert all(r == results[0] for r in results)


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_non_str_names_are_kept_by_their_repr(name: Any, testbackends: Any, tdq: Any) -> None:
    """Item 17: a non-str kernel name broke print(p), the trace, HTML and loading."""
    from kprof_testbackend import plugin

    q = tdq()
    b = kprof.get_backend("testdev")
    with kprof.profile() as p, q:
        rec = kprof.plugin.active()
        assert rec is not None
        t0 = kprof.plugin.now()
        start, stop = plugin.record_timestamp(b), plugin.record_timestamp(b)
        rec.launch(b, KERNEL, name, q, t0, kprof.plugin.now(), start, stop)
    expected = (
        name if type(name) is str else str.__str__(name) if isinstance(name, str) else repr(name)
    )
    assert [k.name for k in p.kernels] == [expected]
    every_view(p)
    buf = io.BytesIO()
    p.save(buf)
    every_view(loads(buf.getvalue()))


@pytest.mark.parametrize(
    "info",
    [
        kprof.plugin.QueueInfo(device=None, label=12),  # type: ignore[arg-type]
        kprof.plugin.QueueInfo(device=b"dev", label="q"),  # type: ignore[arg-type]
        kprof.plugin.QueueInfo(device="dev", label="q", device_key=[1]),
    ],
)
def test_a_non_str_queue_info_gets_the_generic_name(info: Any, testbackends: Any) -> None:
    """Item 9: ``QueueInfo(device=None, label=12)`` made report(trace=True) raise
    AttributeError; the README promises a generic queue name when queue_info fails."""

    class OddInfo(InstantClock):
        @kprof.plugin.hookimpl
        def queue_info(self, backend: kprof.plugin.Backend, queue: Any) -> Any:
            return info

    plugin = OddInfo()
    kprof.register_backend(plugin, "oddinfo")
    with pytest.warns(RuntimeWarning, match="queue_info returned"):
        with kprof.profile(backends=["oddinfo"]) as p, plugin.using(InstantQueue("q")):
            with kprof.range("k"):
                pass
    [k] = p.device_ranges
    assert (k.device, k.queue, k.error) == ("oddinfo", "queue", None)
    every_view(p)


def test_activity_records_with_float_times_are_unresolved(testbackends: Any) -> None:
    """Item 17: activity records delivered with float times corrupted the table as item 6."""
    from kprof_core.recording.activity import DeviceRecord
    from kprof_core.recording.harvest import Harvest

    plugin = InstantClock()
    b = kprof.register_backend(plugin, "act")
    h = Harvest([b], 1.0)
    q = InstantQueue("q")
    h.tables.live_queues[id(q)] = q
    from kprof_core.recording.threads import who

    w = who()
    good = DeviceRecord(1, KERNEL, "good", q, 1000, 2000)
    bad = DeviceRecord(1, KERNEL, "bad", q, 1000.5, 2000)  # type: ignore[arg-type]
    backwards = DeviceRecord(1, KERNEL, "back", q, 3000, 2000)
    for r in (good, bad, backwards):
        h.delivered.take_activity((b.slot, 5, r, id(q), w))
    t = h.tables
    assert len({len(c) for c in t.table.columns()}) == 1 and len(t.table) == 3
    assert sorted(t.errors) == [1, 2]
    assert "1000.5" in t.errors[1]


def test_device_table_append_is_all_or_nothing() -> None:
    """Item 22: a non-int ``nbytes`` left a partial row (the columns then differ in length)."""
    t = DeviceTable()
    t.append(0, 0, 0, 0, 1, 2, 3, 4, -1, 0)
    for bad in (1.5, "8", None, 2**64):
        with pytest.raises((TypeError, OverflowError)):
            t.append(0, 0, 0, 0, 1, 2, 3, 4, bad, 0)  # type: ignore[arg-type]
    assert {len(c) for c in t.columns()} == {1}


def test_edge_values_are_documented_limits() -> None:
    assert 2**59 in EDGE_INTS and VALUE_LIMIT == 2**59
