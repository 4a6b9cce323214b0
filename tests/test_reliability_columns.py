"""Hostile values in activity rows delivered column-wise (``kprof.plugin.deliver_columns``;
issue 25, items 6, 8 and 17 for the batched route): a batch of the wrong shape (columns of
different lengths, floats, NaN, big-endian or 2-D buffers, values beyond 64 bits, a detail
format a view cannot apply) is refused with a clear error and nothing of it is delivered; a row
whose values are wrong (times beyond ±2**59 ns or going backwards, a byte count below -1, an
index past ``names`` or ``queues``) is kept unresolved, with the reason, exactly as the same
values in a ``DeviceRecord`` delivered one by one; the batch's other rows are kept, and the
profile saves, loads back and shows in every view. On both recorder paths."""

from __future__ import annotations

import io
import math
from array import array
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from test_reliability_values import every_view

import kprof
from kprof import plugin as kp
from kprof_core.data.records import COPY, KERNEL
from kprof_core.host.discovery import ENV_PLUGINS
from kprof_core.low_level import native
from kprof_core.result import loads

BIG = 2**62  # an int64, beyond what kprof keeps (±2**59 ns)


@pytest.fixture(params=[True, False], ids=["compiled", "pure"])
def tracer(request: Any, fresh_registry: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The simulated tracer (``testtrace``), on each recorder path."""
    from kprof_testbackend.tracer import tracer as t

    monkeypatch.setenv(ENV_PLUGINS, "testtrace")
    t.clock_offset = 0
    t.columns = False
    native.use_compiled(request.param)
    try:
        yield t
    finally:
        native.use_compiled(True)
        t.release()


def _scope() -> int:
    rec = kp.active()
    assert rec is not None
    return rec.scopes[0]


def _batch(rows: list[dict[str, Any]], names: list[Any], queues: list[Any]) -> kp.ActivityColumns:
    def col(key: str, default: int) -> list[int]:
        return [r.get(key, default) for r in rows]

    return kp.ActivityColumns(
        scope=[_scope()] * len(rows),
        kind=col("kind", KERNEL),
        name=col("name", 0),
        names=names,
        queue=col("queue", 0),
        queues=queues,
        begin=col("begin", 0),
        end=col("end", 0),
        nbytes=col("nbytes", -1),
        launch_begin=col("launch_begin", 0),
        launch_end=col("launch_end", 0),
        detail=("{0} items", [col("items", 1)]),
    )


def _outcome(p: kprof.Profile) -> list[tuple[Any, ...]]:
    """Per device row, in table order: name, kind, queue label, duration, bytes, error."""
    t = p.table
    return [
        (
            p.names[t.name[i]],
            t.kind[i],
            p.queues[t.queue[i]].label,
            t.duration[i],
            t.nbytes[i],
            p.errors.get(i),
        )
        for i in range(len(t))
    ]


def _saves_loads_and_shows(p: kprof.Profile) -> None:
    assert len({len(c) for c in p.table.columns()}) == 1  # every column the same length
    every_view(p)
    buf = io.BytesIO()
    p.save(buf)
    back = loads(buf.getvalue())
    every_view(back)
    assert _outcome(back) == _outcome(p)


# One hostile row, as (field: value) over a sane one; each also a DeviceRecord's fields.
HOSTILE_ROWS = {
    "end before begin": {"begin": 5_000, "end": 4_000},
    "end beyond the limit": {"end": BIG},
    "begin beyond the limit": {"begin": -(2**63), "end": 1_000},
    "wrapped-around end (uint64 2**64-1)": {"end": -1},
    "launch time beyond the limit": {"launch_begin": 2**63 - 1},
    "negative launch end beyond the limit": {"launch_end": -BIG},
    "byte count below -1": {"nbytes": -5},
    "byte count beyond the limit": {"nbytes": BIG},
}


def _sane(t0: int, i: int) -> dict[str, Any]:
    return {"begin": t0 + 1_000 * i, "end": t0 + 1_000 * i + 100 * (i + 1), "name": i, "items": i}


@pytest.mark.parametrize("case", list(HOSTILE_ROWS))
def test_a_hostile_row_is_unresolved_like_a_delivered_record(case: str, tracer: Any) -> None:
    """The same three rows (sane, hostile, sane) delivered column-wise and one by one give the
    same rows: the hostile one unresolved with the same reason, its neighbours kept. Was:
    column-wise, a negative duration was kept as a number, and a value beyond ±2**59 made a
    profile that does not load (or an OverflowError that dropped the whole batch)."""
    from kprof_testbackend.tracer import Stream

    s = Stream("s")
    outcomes = []
    t0 = tracer.clock()  # the same values both ways (the reasons quote them)
    for columns in (True, False):
        with kprof.profile() as p:
            rows = [_sane(t0, 0), {**_sane(t0, 1), **HOSTILE_ROWS[case]}, _sane(t0, 2)]
            if columns:
                kp.deliver_columns(tracer.backend, _batch(rows, ["k0", "k1", "k2"], [s]))
            else:
                kp.deliver(
                    tracer.backend,
                    [
                        kp.DeviceRecord(
                            _scope(),
                            KERNEL,
                            f"k{i}",
                            s,
                            r["begin"],
                            r["end"],
                            r.get("nbytes", -1),
                            r.get("launch_begin", 0),
                            r.get("launch_end", 0),
                            None,
                        )
                        for i, r in enumerate(rows)
                    ],
                )
        _saves_loads_and_shows(p)
        outcomes.append(_outcome(p))
        assert [k.name for k in p.unresolved] == ["k1"]
    assert outcomes[0] == outcomes[1]
    (_n0, _k0, _q0, d0, _b0, e0), (_n1, _k1, _q1, d1, _b1, e1), (*_, d2, _b2, e2) = outcomes[0]
    assert (d0, e0, d2, e2) == (100, None, 300, None)
    assert d1 == 0 and e1 is not None and "not int nanoseconds within ±2**59" in e1


@pytest.mark.parametrize(
    "field,index",
    [("name", 3), ("name", -1), ("queue", 1), ("queue", -1), ("name", 2**62)],
)
def test_an_index_past_names_or_queues_is_an_unresolved_row(
    field: str, index: int, tracer: Any
) -> None:
    """An index past ``names``/``queues`` (or negative: Python would have read the last entry
    silently) made the harvest raise, and the whole batch was dropped; now that row is
    unresolved, on a generic queue and named ``?``, and the others are kept."""
    from kprof_testbackend.tracer import Stream

    s = Stream("s")
    with kprof.profile() as p:
        t0 = tracer.clock()
        rows = [_sane(t0, 0), {**_sane(t0, 1), field: index}, _sane(t0, 2)]
        kp.deliver_columns(tracer.backend, _batch(rows, ["k0", "k1", "k2"], [s]))
    _saves_loads_and_shows(p)
    out = _outcome(p)
    assert [(o[0], o[3], o[5]) for o in (out[0], out[2])] == [("k0", 100, None), ("k2", 300, None)]
    name, _kind, queue, duration, _b, error = out[1]
    assert duration == 0 and error is not None
    assert f"a {field} index {index} for a batch of" in error
    assert (name, queue) == (("?", "s") if field == "name" else ("k1", "queue"))
    assert [k.name for k in p.unresolved] == [name]
    assert [p.details[i] for i in (0, 2)] == ["0 items", "2 items"]


def test_unknown_kinds_and_non_str_names_are_kept_as_delivered_records_are(tracer: Any) -> None:
    """A kind that is neither KERNEL nor COPY is a kernel, a non-str name is kept by its repr:
    the rule for a ``DeviceRecord``. Was: a name of bytes went into the table as bytes (the
    report and loading failed)."""
    from kprof_testbackend.tracer import Stream

    s = Stream("s")
    with kprof.profile() as p:
        t0 = tracer.clock()
        rows = [
            {**_sane(t0, 0), "kind": 7},
            {**_sane(t0, 1), "kind": COPY, "nbytes": 64},
        ]
        kp.deliver_columns(tracer.backend, _batch(rows, [b"k\xff", "copy"], [s]))
    _saves_loads_and_shows(p)
    assert [(o[0], o[1], o[3], o[4], o[5]) for o in _outcome(p)] == [
        ("b'k\\xff'", KERNEL, 100, -1, None),
        ("copy", COPY, 200, 64, None),
    ]


def test_a_clock_offset_placing_rows_beyond_the_limit_is_per_row(tracer: Any) -> None:
    """Device times within the limit that the device's clock offset places beyond it: those
    rows unresolved (the rule per row), not an OverflowError for the batch."""
    from kprof_testbackend.tracer import Stream

    s = Stream("s")
    tracer.clock_offset = -(2**59) + 10**12  # host = device + 2**59 - 1e12
    with kprof.profile() as p:
        t0 = tracer.clock()
        far = {"begin": 2**59 - 10**6, "end": 2**59 - 10**5, "name": 1}
        rows = [_sane(t0, 0), far, _sane(t0, 2)]
        kp.deliver_columns(tracer.backend, _batch(rows, ["k0", "k1", "k2"], [s]))
    _saves_loads_and_shows(p)
    errors = [o[5] for o in _outcome(p)]
    assert errors[0] is None and errors[2] is None
    assert errors[1] is not None and "placed at" in errors[1]


def _good(n: int = 2) -> dict[str, Any]:
    return {
        "scope": [1] * n,
        "kind": [KERNEL] * n,
        "name": [0] * n,
        "names": ["k"],
        "queue": [0] * n,
        "queues": [object()],
        "begin": list(range(10, 10 + n)),
        "end": list(range(20, 20 + n)),
    }


MALFORMED = {
    "float64 buffer": ({"begin": np.array([10.0, 11.0])}, TypeError, "'begin' holds 'd'"),
    "NaN in a list": ({"end": [20, math.nan]}, TypeError, "'end' row 1 is nan"),
    "None in a list": ({"launch_begin": [None, 1]}, TypeError, "'launch_begin' row 0 is None"),
    "a str column": ({"kind": "00"}, TypeError, "'kind' is a str"),
    "big-endian int64": ({"end": np.array([20, 21], dtype=">i8")}, TypeError, "'>q'"),
    "2-D buffer": ({"name": np.zeros((2, 1), dtype=np.int64)}, TypeError, "2 dimensions"),
    "beyond 64 bits": (
        {"begin": [10, 2**70]},
        TypeError,
        "'begin' row 1 is 1180591620717411303424",
    ),
    "short column": ({"end": [20]}, ValueError, "'end' has 1 rows, 'scope' 2"),
    "short launch_begin": ({"launch_begin": [1]}, ValueError, "'launch_begin' has 1 rows"),
    "long launch_end": ({"launch_end": [1, 2, 3]}, ValueError, "'launch_end' has 3 rows"),
    "short correlation": ({"correlation": [1]}, ValueError, "'correlation' has 1 rows"),
    "short detail column": ({"detail": ("{0}", [[1]])}, ValueError, "detail[0] has 1 rows"),
    "bytes not of 8": ({"nbytes": b"\x00" * 12}, ValueError, "12 bytes"),
    "detail field past columns": ({"detail": ("{1}", [[1, 2]])}, ValueError, "{1}"),
    "detail attribute": ({"detail": ("{0.real}", [[1, 2]])}, ValueError, "{0.real}"),
    "detail huge width": ({"detail": ("{0:>999999999}", [[1, 2]])}, ValueError, "999999999"),
    "detail not a str": ({"detail": (b"{0}", [[1, 2]])}, TypeError, "bytes, not a str"),
    "detail not a pair": ({"detail": "{0}"}, TypeError, "(format, columns)"),
    "names not a sequence": ({"names": 5}, TypeError, "names is a int"),
    "clock not a str": ({"clock": 5}, TypeError, "clock is a int"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_batch_of_the_wrong_shape_is_refused_naming_the_column(case: str) -> None:
    """Was: a float64 (or big-endian) column's bits were read as integers (times off by
    years), columns of different lengths other than the first six were accepted and made
    columns of different lengths in the table, a detail format broke every view; other
    mistakes raised an unexplained ``TypeError``/``OverflowError`` from ``array``."""
    change, exc, words = MALFORMED[case]
    with pytest.raises(exc, match="ActivityColumns") as info:
        kp.ActivityColumns(**{**_good(), **change})
    assert words in str(info.value)


def test_accepted_buffers_keep_their_values() -> None:
    """What is accepted: int64/uint64 numpy (unsigned ids keep their bits), narrower ints,
    strided buffers, ``array('q')``, raw bytes."""
    cols = kp.ActivityColumns(
        **{
            **_good(3),
            "scope": np.array([2**64 - 1, 1, 2], dtype=np.uint64),
            "begin": np.array([10, 11, 12], dtype=np.int32),
            "end": np.arange(40, dtype=np.int64)[::10][1:],
            "nbytes": array("q", [-1, 0, 8]).tobytes(),
            "detail": ("{0:>4} {1:x}", [np.array([1, 2, 3], dtype=np.uint8), [255, 16, 1]]),
        }
    )
    assert list(cols.scope) == [-1, 1, 2]
    assert list(cols.begin) == [10, 11, 12]
    assert list(cols.end) == [10, 20, 30]
    assert list(cols.nbytes) == [-1, 0, 8]
    assert cols.detail is not None and list(cols.detail[1][0]) == [1, 2, 3]


def test_a_column_changed_after_construction_is_refused_at_delivery(tracer: Any) -> None:
    """``deliver_columns`` checks the batch again: a column replaced (a float list) or made
    shorter after construction raises there, nothing of it is delivered, and the profile's
    other rows are intact. Was: the harvest raised halfway through a batch and left the
    table's columns of different lengths."""
    from kprof_testbackend.tracer import Stream

    s = Stream("s")
    with kprof.profile() as p:
        t0 = tracer.clock()
        kp.deliver_columns(tracer.backend, _batch([_sane(t0, 0)], ["k0"], [s]))
        bad = _batch([_sane(t0, 0), _sane(t0, 1)], ["k1", "k2"], [s])
        bad.begin = [1.5, 2.5]  # type: ignore[assignment]
        with pytest.raises(TypeError, match=r"'begin' row 0 is 1\.5"):
            kp.deliver_columns(tracer.backend, bad)
        short = _batch([_sane(t0, 0), _sane(t0, 1)], ["k1", "k2"], [s])
        short.launch_end = array("q", [0])
        with pytest.raises(ValueError, match="'launch_end' has 1 rows"):
            kp.deliver_columns(tracer.backend, short)
        with pytest.raises(TypeError, match=r"takes a kprof\.plugin\.ActivityColumns"):
            kp.deliver_columns(tracer.backend, [kp.DeviceRecord(_scope(), 0, "k", s, 1, 2)])  # type: ignore[arg-type]
    _saves_loads_and_shows(p)
    assert [(o[0], o[3], o[5]) for o in _outcome(p)] == [("k0", 100, None)]


def test_a_batch_changed_while_queued_is_dropped_and_counted(tracer: Any) -> None:
    """A batch whose columns change after delivery, before its harvest (a racing plugin), is
    dropped whole at the harvest, counted per row, with one warning, never half-appended."""
    from kprof_testbackend.tracer import Stream

    from kprof_core.recording.recorder import Recorder

    s = Stream("s")
    with pytest.warns(RuntimeWarning, match="a batch of 2 activity rows from backend"):
        with kprof.profile() as p:
            rec = kp.active()
            assert isinstance(rec, Recorder)
            t0 = tracer.clock()
            batch = _batch([_sane(t0, 0), _sane(t0, 1)], ["k0", "k1"], [s])
            with pytest.MonkeyPatch.context() as m:
                m.setattr(rec, "harvest", lambda wait=False, limit=None: 0)  # not yet
                kp.deliver_columns(tracer.backend, batch)
            batch.end.pop()  # changed while queued
            kp.deliver_columns(tracer.backend, _batch([{**_sane(t0, 2), "name": 0}], ["k2"], [s]))
    _saves_loads_and_shows(p)
    assert [(o[0], o[5]) for o in _outcome(p)] == [("k2", None)]
    assert rec.dropped_bad == 2


@pytest.mark.parametrize(
    "values,counts,kinds",
    [
        ([-1, 0, 5, 2**59 - 1], True, False),
        ([0, 1, 1, 0], True, True),
        ([-2], False, False),
        ([2**59], False, False),
        ([-1, -256], False, False),
        ([-(2**56)], False, False),
        ([-1, -1, -1, -2], False, False),
        ([2], True, False),
        ([256], True, False),
        ([1 + 2**40], True, False),
        ([], True, True),
    ],
)
def test_the_column_checks_on_bytes(values: list[int], counts: bool, kinds: bool) -> None:
    """The byte-level checks the batched route uses agree with the rule per value."""
    from kprof_core.data.values import byte_counts, small_values

    col = array("q", values)
    assert byte_counts(col) is counts is all(v == -1 or 0 <= v < 2**59 for v in values)
    assert small_values(col, bytes((KERNEL, COPY))) is kinds is all(v in (0, 1) for v in values)
