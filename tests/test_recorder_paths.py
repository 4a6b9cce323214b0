"""The launch path and the harvest, compiled and pure Python, column-wise and entry by entry:
every combination makes exactly the same records (tables, errors, clocks) from the same input.

A deterministic plugin stands in for a device here: its tokens carry fixed times, become done
after a set number of questions, and may fail or answer with the wrong type, so that every
branch of the harvest is taken on every path. CI also runs the whole suite on both paths
(``KPROF_PURE_PYTHON=1``).
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import warnings
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kprof
from kprof_core.host.discovery import ENV_DISABLE_AUTOLOAD
from kprof_core.low_level import native
from kprof_core.low_level.layout import WITH_HOST
from kprof_core.recording import harvest_columns, harvest_one
from kprof_core.recording import recorder as recorder_module
from kprof_core.recording.recorder import COPY, KERNEL, RANGE, Recorder
from kprof_core.recording.threads import who

KPROF = str(Path(sys.executable).with_name("kprof"))
COMPILED = native.compiled() is not None


class Tok:
    """A token with fixed device times; done after ``asks`` questions."""

    def __init__(
        self, begin: int, end: int, asks: int = 0, fail: bool = False, bad: bool = False
    ) -> None:
        self.begin, self.end, self.asks, self.fail, self.bad = begin, end, asks, fail, bad

    def done(self) -> bool:
        if self.asks > 0:
            self.asks -= 1
            return False
        return True


class Dev:
    """A queue of a device (``key``)."""

    def __init__(self, key: str, label: str) -> None:
        self.key, self.label = key, label


class AbsolutePlugin:
    """Absolute device clock (``device_times``), optionally with the batch reader."""

    @kprof.plugin.hookimpl
    def timestamp_done(self, token: Tok) -> bool:
        return token.done()

    @kprof.plugin.hookimpl
    def device_times(self, start: Tok, stop: Tok) -> Any:
        if stop.fail:
            raise RuntimeError("the command failed")
        if stop.bad:
            return [start.begin, stop.end]  # not a tuple: a plugin bug
        return start.begin, stop.end

    @kprof.plugin.hookimpl
    def elapsed_time(self, start: Tok, stop: Tok) -> int:
        return stop.end - start.begin

    @kprof.plugin.hookimpl
    def record_timestamp(self) -> Any:
        return None

    @kprof.plugin.hookimpl
    def queue_info(self, queue: Dev) -> kprof.plugin.QueueInfo:
        return kprof.plugin.QueueInfo(device=queue.key, label=queue.label, device_key=queue.key)

    @kprof.plugin.hookimpl
    def align_clock(self, token: Tok, launch_window: tuple[int, int]) -> Any:
        if token.begin % 2:
            return None  # this device cannot be aligned: placed at its first launch
        return kprof.plugin.Alignment(host_ns=launch_window[0] + 7, error_ns=3, method="test")

    @kprof.plugin.hookimpl
    def synchronize(self, queue: Any) -> None:
        return None


class BatchPlugin(AbsolutePlugin):
    """Absolute device clock with the batch reader (as OpenCL)."""

    @kprof.plugin.hookimpl
    def device_times_batch(self, starts: tuple[Tok, ...], stops: tuple[Tok, ...]) -> Any:
        begins, ends = [], []
        for a, b in zip(starts, stops):
            if not b.done() or b.fail or b.bad:
                break
            begins.append(a.begin)
            ends.append(b.end)
        return begins, ends


class ElapsedPlugin(AbsolutePlugin):
    """Elapsed times only (as CUDA and HIP), with pooled tokens given back."""

    def __init__(self) -> None:
        self.released: list[int] = []

    @kprof.plugin.hookimpl
    def elapsed_time(self, start: Tok, stop: Tok) -> Any:
        if stop.fail:
            raise RuntimeError("the command failed")
        if stop.bad:
            return float(stop.end - start.begin)
        return stop.end - start.begin

    @kprof.plugin.hookimpl
    def release_timestamp(self, token: Tok) -> None:
        self.released.append(id(token))

    device_times = None  # type: ignore[assignment]


# An operation: (what, queue, name, asks, fail, bad, nbytes)
OPS = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "kernel",
                "kernel",
                "kernel",
                "copy",
                "host_timed",
                "range",
                "mark",
                "observed",
                "device_range",
            ]
        ),
        st.integers(0, 2),
        st.integers(0, 3),
        st.integers(0, 3),
        st.just(False),
        st.just(False),
        st.integers(-1, 4096),
    ),
    max_size=60,
)
RARE = st.lists(st.tuples(st.integers(0, 59), st.sampled_from(["fail", "bad"])), max_size=2)


def run(
    plugin: Any,
    ops: list[tuple[Any, ...]],
    rare: dict[int, str],
    compiled: bool,
    bulk: bool,
    monkeypatch: pytest.MonkeyPatch,
    every: int = 4,
) -> dict[str, Any]:
    name = "paths"
    backend = kprof_core_registry().register(plugin, name)
    queues = [Dev("devA", "q0"), Dev("devA", "q1"), Dev("devB", "q2")]
    native.use_compiled(compiled)
    try:
        with monkeypatch.context() as m, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the plugin's failures warn (tested elsewhere)
            m.setattr(Recorder, "harvest_every", every)
            m.setattr(Recorder, "max_pending", 3 * every)
            m.setattr(recorder_module, "now", lambda: 99)  # host-timed rows: deterministic
            if not bulk:  # every entry through _take: the reference
                m.setattr(harvest_columns.Columns, "bulk", lambda self, incoming, i, n, dl: 0)
                m.setattr(harvest_one, "one", lambda t, k, entry: False)
            rec = Recorder([backend], timeout=5.0)
            if Recorder.launch is Recorder._launch_py:  # not replaced (see the last test)
                assert (rec._native is not None) == (compiled and COMPILED)
            t = 1000
            for i, (what, qi, ni, asks, _f, _b, nbytes) in enumerate(ops):
                t += 100
                nm = f"k{ni}"
                if what == "range":
                    rec.host_range(nm, t, t + 50)
                elif what == "mark":
                    rec.mark(nm, t)
                elif what == "host_timed":
                    rec.launch(backend, KERNEL, nm, queues[qi], t, t + 10)
                elif what == "device_range":
                    # A kprof.range's device entry carrying its host side (WITH_HOST), as both
                    # range paths make it (test_range_paths): column-wise with the launches.
                    begin = 10_000 + t * 3 + (1 if qi == 2 else 0)
                    a = Tok(begin, begin + 1, 0, rare.get(i) == "fail", rare.get(i) == "bad")
                    b = Tok(begin + 5, begin + 60 + ni, asks, rare.get(i) == "fail")
                    rec._live_queues.setdefault(id(queues[qi]), queues[qi])
                    head = (backend.slot, RANGE, nm, id(queues[qi]), who(), t, t + 70, a, b)
                    rec._append((*head, -1, WITH_HOST, -1, None, -1))
                elif what == "observed" and not isinstance(plugin, ElapsedPlugin):
                    # Host-observed (approximate): always through _take, on every path.
                    rec.launch_observed(
                        backend, KERNEL, nm, queues[qi], t, t + 10, Tok(t + 2, t + 9, asks)
                    )
                else:
                    # Queue 2's device starts at an odd time: it is not aligned (see above).
                    begin = 10_000 + t * 3 + (1 if qi == 2 else 0)
                    tok = Tok(
                        begin, begin + 40 + ni, asks, rare.get(i) == "fail", rare.get(i) == "bad"
                    )
                    kind = KERNEL if what == "kernel" else COPY
                    if i % 3 == 0:  # keyword arguments take the general path
                        rec.launch(
                            backend,
                            kind,
                            nm,
                            queues[qi],
                            t,
                            t + 10,
                            start=tok,
                            stop=tok,
                            nbytes=nbytes,
                        )
                    else:
                        rec.launch(backend, kind, nm, queues[qi], t, t + 10, tok, tok, nbytes)
            rec.finish()
    finally:
        native.use_compiled(True)
        kprof_core_registry().unregister(name)
    got = rec.recording()
    return {
        "table": [list(c) for c in got.table.columns()],
        "host": [list(getattr(got.host, c)) for c in got.host.COLUMNS],
        "names": list(got.names),
        "queues": list(got.queues),
        "threads": [(th.name, th.task) for th in got.threads],
        "errors": dict(got.errors),
        "clocks": {k: (c.method, c.error_ns, c.shift_ns) for k, c in got.clocks.items()},
        "broken": backend.broken,
        "released": len(getattr(plugin, "released", ())),
    }


def kprof_core_registry() -> Any:
    from kprof_core.host.discovery import registry

    return registry


@pytest.fixture
def reg(fresh_registry: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv(ENV_DISABLE_AUTOLOAD, "1")  # only the plugins registered here
    yield fresh_registry


PATHS = [(c, b) for c in (True, False) for b in (True, False)]


@pytest.mark.parametrize("plugin_kind", ["absolute", "batch", "elapsed"])
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=OPS, rare=RARE)
def test_every_path_makes_the_same_records(
    plugin_kind: str,
    ops: list[tuple[Any, ...]],
    rare: list[tuple[int, str]],
    reg: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    results = []
    for compiled, bulk in PATHS:
        plugin = {"elapsed": ElapsedPlugin, "batch": BatchPlugin, "absolute": AbsolutePlugin}[
            plugin_kind
        ]()
        results.append(run(plugin, ops, dict(rare), compiled, bulk, monkeypatch))
    first = results[0]
    for path, other in zip(PATHS[1:], results[1:]):
        assert other == first, path
    # The input is all there: one device or host row per operation, both for a device range.
    n_host = sum(1 for op in ops if op[0] in ("range", "mark"))
    n_both = sum(1 for op in ops if op[0] == "device_range")
    assert len(first["table"][0]) == len(ops) - n_host
    assert len(first["host"][0]) == n_host + n_both


def test_the_column_wise_harvest_is_used_for_runs(
    reg: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs of common launches go column-wise (not entry by entry), on both paths."""
    for compiled in (True, False):
        taken: list[int] = []
        original = harvest_columns.Columns.bulk_rows

        def spy(
            h: Any, *args: Any, original: Any = original, taken: list[int] = taken
        ) -> tuple[int, int]:
            k, run = original(h, *args)
            taken.append(k)
            return k, run

        monkeypatch.setattr(harvest_columns.Columns, "bulk_rows", spy)
        ops = [("kernel", 0, 1, 0, False, False, -1)] * 200
        out = run(BatchPlugin(), ops, {}, compiled, True, monkeypatch, every=64)
        assert len(out["table"][0]) == 200
        # The first launch sets the device's reference (entry by entry); the rest in runs.
        assert sum(taken) == 199 and max(taken) >= 16
        monkeypatch.undo()


def test_ranges_between_launches_stay_in_the_column_wise_run(
    reg: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A range's one entry (device and host side, WITH_HOST) does not break the run of the
    launches around it: the range's timestamps are read in the same batch call as theirs, and
    its host row is made beside its device row; on both paths."""
    for compiled in (True, False):
        taken: list[int] = []
        batches: list[int] = []
        original = harvest_columns.Columns.bulk_rows

        def spy(
            h: Any, *args: Any, original: Any = original, taken: list[int] = taken
        ) -> tuple[int, int]:
            k, run = original(h, *args)
            taken.append(k)
            return k, run

        class Counted(BatchPlugin):
            def __init__(self, batches: list[int]) -> None:
                self.batches = batches

            @kprof.plugin.hookimpl
            def device_times_batch(self, starts: Any, stops: Any) -> Any:
                self.batches.append(len(starts))
                return super().device_times_batch(starts, stops)

        monkeypatch.setattr(harvest_columns.Columns, "bulk_rows", spy)
        ops = [("kernel", 0, 1, 0, False, False, -1), ("device_range", 0, 2, 0, False, False, -1)]
        out = run(Counted(batches), ops * 100, {}, compiled, True, monkeypatch, every=400)
        table, host = out["table"], out["host"]
        # Every row in long runs but two: the first launch (the device's reference) and the
        # first range (a name not interned yet) go entry by entry.
        assert len(table[0]) == 200 and sum(taken) == 198 and max(taken) >= 64
        assert batches == [k for k in taken if k]  # one batch read per run, ranges included
        # The host rows: one per range, in order, each the device row's host interval.
        names = out["names"]
        assert [names[n] for n in host[0]] == ["k2"] * 100
        kinds = table[1]
        ranges = [i for i, k in enumerate(kinds) if k == RANGE]
        assert host[3] == [table[4][i] for i in ranges] and host[4] == [table[5][i] for i in ranges]
        assert set(host[1]) == {0}  # HostTable.RANGE
        monkeypatch.undo()


def test_device_errors_are_unresolved_records_on_every_path(
    reg: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ops = [("kernel", 0, 0, 0, False, False, -1)] * 6
    for compiled, bulk in PATHS:
        out = run(BatchPlugin(), ops, {3: "fail"}, compiled, bulk, monkeypatch)
        assert list(out["errors"]) == [3]
        assert "the command failed" in out["errors"][3]
        assert out["broken"] is None  # a device error costs the record, not the backend


def test_a_wrong_return_type_disables_the_backend_on_every_path(
    reg: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ops = [("kernel", 0, 0, 0, False, False, -1)] * 6
    for compiled, bulk in PATHS:
        out = run(ElapsedPlugin(), ops, {2: "bad"}, compiled, bulk, monkeypatch)
        assert out["broken"] is not None and "elapsed_time returned float" in out["broken"]
        assert sorted(out["errors"]) == [2, 3, 4, 5]
        assert len(out["table"][0]) == 6
        assert out["released"] == 6  # every token given back, disabled or not


# -- the compiled parts: loading, falling back, saying which ---------------------------------


def backends_json(env: dict[str, str]) -> list[dict[str, Any]]:
    out = subprocess.run(
        [KPROF, "backends", "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def test_kprof_backends_says_which_recorder_is_in_use() -> None:
    forced = backends_json({"KPROF_PURE_PYTHON": "1"})
    assert forced and {r["recorder"] for r in forced} == {"pure Python"}
    assert "KPROF_PURE_PYTHON=1 is set" in forced[0]["recorder_detail"]
    default = backends_json({"KPROF_PURE_PYTHON": ""})
    expected = "compiled" if COMPILED else "pure Python"
    if os.environ.get("KPROF_PURE_PYTHON", "") in ("", "0"):
        assert {r["recorder"] for r in default} == {expected}
    text = subprocess.run(
        [KPROF, "backends"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "KPROF_PURE_PYTHON": "1"},
    ).stdout
    assert "Recorder: pure Python (KPROF_PURE_PYTHON=1 is set)" in text


def test_a_missing_or_broken_extension_falls_back_to_pure_python(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("KPROF_PURE_PYTHON", raising=False)
    monkeypatch.setitem(
        sys.modules, "kprof_core.low_level._crecorder", None
    )  # import raises ImportError
    monkeypatch.setattr(native, "_module", None)
    native._load()
    assert native.compiled() is None
    assert native.describe().startswith("pure Python (the compiled recorder is not built")
    rec = Recorder([])
    assert rec._native is None and "launch" not in vars(rec)
    monkeypatch.undo()
    native._load()
    assert (native.compiled() is not None) == COMPILED


def test_free_threaded_python_runs_the_pure_python_recorder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sysconfig

    get = sysconfig.get_config_var
    monkeypatch.delenv("KPROF_PURE_PYTHON", raising=False)
    monkeypatch.setattr(
        sysconfig, "get_config_var", lambda name: 1 if name == "Py_GIL_DISABLED" else get(name)
    )
    monkeypatch.setattr(native, "_module", None)
    native._load()
    assert native.compiled() is None and "free-threaded CPython" in native.describe()
    assert native.load_plugin_part("kprof_opencl", "_clnative") is None
    monkeypatch.undo()
    native._load()
    assert (native.compiled() is not None) == COMPILED


@pytest.mark.skipif(not COMPILED, reason="the compiled recorder is not built here")
def test_a_recorder_with_the_compiled_launch_path_is_freed(reg: Any) -> None:
    """The LaunchPath holds bound methods of its Recorder (a cycle): the collector frees it."""
    rec = Recorder([])
    assert rec._native is not None
    ref = weakref.ref(rec)
    del rec
    gc.collect()
    assert ref() is None


@pytest.mark.skipif(not COMPILED, reason="the compiled recorder is not built here")
def test_the_compiled_launch_path_propagates_errors_of_its_inputs(reg: Any) -> None:
    rec = Recorder([])
    with pytest.raises(AttributeError):  # not a Backend: no slot (as the Python path)
        rec.launch(object(), KERNEL, "k", None, 0, 1, object(), object())
    with pytest.raises(TypeError):
        native.compiled().launch_path([], {}, frozenset(), None, None, None, None, None, "x")  # type: ignore[union-attr]


# -- placement: column-wise and row by row agree -------------------------------------------


class AlignPlugin:
    def __init__(self, base: int | None) -> None:
        self.base = base

    def align_clock(self, backend: Any, token: Any, window: tuple[int, int]) -> Any:
        return None if self.base is None else kprof.plugin.Alignment(self.base, 1, "test")


ROWS = st.lists(
    st.tuples(
        st.integers(0, 3), st.integers(0, 10**6), st.integers(-(10**6), 10**6), st.booleans()
    ),
    min_size=1,
    max_size=40,
)


@pytest.mark.parametrize("compiled", [True, False])
@settings(max_examples=200, deadline=None)
@given(
    rows=ROWS, bases=st.lists(st.one_of(st.none(), st.integers(0, 10**6)), min_size=3, max_size=3)
)
def test_column_wise_placement_matches_row_by_row(
    compiled: bool, rows: list[tuple[int, int, int, bool]], bases: list[int | None]
) -> None:
    from kprof_core.data.records import PLACED, DeviceTable, QueueRecord
    from kprof_core.recording.placement import _place_each, place

    # Queues 0 and 1 share a device; 2 and 3 are two more devices.
    queues = [QueueRecord("b", dev, f"q{i}", dev) for i, dev in enumerate(["d0", "d0", "d1", "d2"])]
    backends = {
        dev: kprof.plugin.Backend("b", AlignPlugin(base))
        for dev, base in zip(["d0", "d1", "d2"], bases)
    }
    for b in backends.values():
        b.align_clock = b.plugin.align_clock  # type: ignore[attr-defined]
    refs = {dev: (b, object(), 100 + i, 200 + i) for i, (dev, b) in enumerate(backends.items())}
    tables = []
    for _ in range(2):
        t = DeviceTable()
        for q, launch, start, placed in rows:
            t.append(0, 0, q, 0, launch, launch + 5, start, 10, -1, PLACED if placed else 0)
        tables.append(t)
    native.use_compiled(compiled)
    try:
        clocks = place(tables[0], queues, refs, lambda *a, **k: "")
    finally:
        native.use_compiled(True)
    expected = _place_each(tables[1], queues, refs, lambda *a, **k: "")
    assert [list(c) for c in tables[0].columns()] == [list(c) for c in tables[1].columns()]
    assert clocks == expected


# -- the summary: column-wise and by a loop agree ------------------------------------------

DEVICE_ROWS = st.lists(
    st.tuples(
        st.integers(0, 4),
        st.sampled_from([0, 1, 2]),
        st.integers(0, 15),
        st.integers(0, 10**6),
        st.integers(-1, 10**4),
        st.integers(0, 10**4),
    ),
    max_size=40,
)
HOST_ROWS = st.lists(
    st.tuples(st.integers(0, 4), st.sampled_from([0, 1, 2]), st.integers(0, 10**6)), max_size=20
)


@settings(max_examples=200, deadline=None)
@given(drows=DEVICE_ROWS, hrows=HOST_ROWS, most=st.sampled_from([8, 2]))
def test_the_column_wise_summary_equals_the_loop(
    drows: list[tuple[int, ...]], hrows: list[tuple[int, int, int]], most: int
) -> None:
    from kprof_core.data import profile_data as session
    from kprof_core.data.records import QueueRecord, ThreadRecord

    p = session.ProfileData(backends=["b"])
    p.names = [f"n{i}" for i in range(5)]
    p.queues = [QueueRecord("b", "d", "q", "b:d")]
    p.threads = [ThreadRecord(1, "main")]
    p.start_ns, p.end_ns = 0, 10**7
    for nid, kind, flags, dur, nbytes, launch in drows:
        row = p.table.append(nid, kind, 0, 0, launch, launch + nbytes % 97, 5, dur, nbytes, flags)
        if flags & 2:
            p.errors[row] = "why"
    for nid, kind, dur in hrows:
        p.host.append(nid, kind, 0, 100, 100 + (0 if kind == 1 else dur))
    split = session._split
    try:
        session._split = lambda keys, values, most=most: split(keys, values, most)  # type: ignore[assignment]
        columns = p.summary()
        session._split = lambda keys, values, most=8: None  # type: ignore[assignment]
        loop = p.summary()
    finally:
        session._split = split  # type: ignore[assignment]
    assert columns == loop


@settings(max_examples=100, deadline=None)
@given(
    counts=st.lists(
        st.tuples(st.integers(-(2**27), 2**27), st.integers(1, 3000)), min_size=1, max_size=12
    ),
    seed=st.integers(0, 2**32),
)
def test_statistics_by_counting_equal_sorting(counts: list[tuple[int, int]], seed: int) -> None:
    import math
    import operator
    import random

    from kprof_core.data.summary import _stats

    durs = [v for v, c in counts for _ in range(c)]
    durs += [counts[0][0]] * max(0, 4097 - len(durs))  # long enough to be counted
    random.Random(seed).shuffle(durs)
    ordered = sorted(durs)
    n = len(durs)
    median = float(ordered[n // 2]) if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2
    assert _stats(durs, n) == (
        sum(durs),
        math.fsum(map(operator.mul, durs, durs)),
        ordered[0],
        ordered[-1],
        median,
    )


def test_a_replaced_recorder_launch_is_called_on_every_path(
    monkeypatch: pytest.MonkeyPatch, reg: Any
) -> None:
    """Tools that watch launches by replacing Recorder.launch (the conformance kit) see every
    launch, also where the compiled launch path would otherwise be bound."""
    seen: list[str] = []
    original = Recorder.launch

    def watching(
        self: Recorder, backend: Any, kind: int, name: str, *args: Any, **kwargs: Any
    ) -> None:
        seen.append(name)
        original(self, backend, kind, name, *args, **kwargs)

    monkeypatch.setattr(Recorder, "launch", watching)
    ops = [("kernel", 0, 1, 0, False, False, -1)] * 3
    for compiled in (True, False):
        seen.clear()
        out = run(BatchPlugin(), ops, {}, compiled, True, monkeypatch)
        assert seen == ["k1"] * 3 and len(out["table"][0]) == 3
