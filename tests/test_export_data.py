"""Records as data: ``to_json``, ``to_csv`` and ``to_dataframe``."""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tracecheck import synthetic

import kprof
from kprof_core.io.exports import COLUMNS, FORMAT, ExportError


@pytest.fixture
def profile(testbackends: Any, tdq: Callable[..., Any]) -> kprof.Profile:
    q, plain = tdq(), tdq(plain=True)
    with kprof.profile() as p:
        with q, kprof.range("step"):
            q.launch("k1", 30)
            q.launch("k2", 30)
            kprof.mark("m")
        with plain:
            plain.launch("slow", 10)
    return p


def test_to_json_holds_records_summary_and_meta(profile: kprof.Profile) -> None:
    d = profile.to_json()
    assert json.loads(json.dumps(d)) == d, "plain JSON data"
    assert d["format"] == FORMAT
    assert d["meta"]["pid"] == profile.meta["pid"]
    assert d["span_ns"] == profile.span_ns
    assert [c["method"] for c in d["clocks"]] == ["host clock (test device)"]
    kernels = {k.name: k for k in profile.kernels}
    device = [r for r in d["device"] if r["kind"] == "kernel"]
    assert sorted(r["name"] for r in device) == ["k1", "k2", "slow"]
    for r in device:
        k = kernels[r["name"]]
        assert (
            r["start_ns"],
            r["duration_ns"],
            r["launch_start_ns"],
            r["queue"],
            r["host_timed"],
        ) == (k.start_ns, k.duration_ns, k.launch_start_ns, k.queue, k.host_timed)
    assert [r["name"] for r in d["device"] if r["kind"] == "range"] == ["step"]
    assert sorted((r["kind"], r["name"]) for r in d["host"]) == [("marker", "m"), ("range", "step")]
    assert [r["name"] for r in d["summary"]["device"]] == [r.name for r in profile.summary().device]
    assert d["summary"]["markers"] == [{"name": "m", "count": 1}]


def test_to_json_with_a_path_streams_the_same_data(profile: kprof.Profile, tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    assert profile.to_json(path) is None
    assert json.loads(path.read_text()) == json.loads(json.dumps(profile.to_json()))
    f = io.StringIO()
    profile.to_json(f)
    assert json.loads(f.getvalue()) == json.loads(path.read_text())


def test_to_csv_has_every_record_by_start_time(profile: kprof.Profile, tmp_path: Path) -> None:
    text = profile.to_csv()
    assert isinstance(text, str)
    rows = list(csv.DictReader(io.StringIO(text)))
    assert tuple(rows[0]) == COLUMNS
    assert len(rows) == len(profile.table) + len(profile.host)
    starts = [int(r["start_ns"]) for r in rows]
    assert starts == sorted(starts)
    slow = next(r for r in rows if r["name"] == "slow")
    assert slow["host_timed"] == "True" and slow["record"] == "device"
    mark = next(r for r in rows if r["kind"] == "marker")
    assert mark["record"] == "host" and mark["duration_ns"] == "0" and mark["queue"] == ""
    path = tmp_path / "p.csv"
    assert profile.to_csv(path) is None
    assert path.read_text() == text


def test_unresolved_records_carry_their_error_in_every_format() -> None:
    p = synthetic(14, threads=1, unresolved_every=7)
    rows = list(csv.DictReader(io.StringIO(p.to_csv() or "")))
    errors = [r["error"] for r in rows if r["error"]]
    assert errors == ["synthetic: the device never answered"] * 2
    assert [r["error"] for r in p.to_json()["device"] if r["error"]] == errors


def test_unwritable_paths_raise_export_errors(profile: kprof.Profile, tmp_path: Path) -> None:
    missing = tmp_path / "missing" / "x"
    with pytest.raises(ExportError, match="could not write the CSV export"):
        profile.to_csv(missing)
    with pytest.raises(ExportError, match="could not write the JSON export"):
        profile.to_json(missing)
    assert not list(tmp_path.iterdir())


def test_to_dataframe_without_pandas_says_how_to_get_it(
    profile: kprof.Profile, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas now raises ImportError
    with pytest.raises(ImportError, match="pip install pandas"):
        profile.to_dataframe()


def test_to_dataframe_with_pandas(profile: kprof.Profile) -> None:
    pytest.importorskip("pandas")
    df = profile.to_dataframe()
    assert list(df.columns) == list(COLUMNS)
    assert len(df) == len(profile.table) + len(profile.host)
    assert sorted(df[df["kind"] == "kernel"]["name"]) == ["k1", "k2", "slow"]
    assert str(df["nbytes"].dtype) == "Int64" and df["nbytes"].isna().all()
    assert df["start_ns"].is_monotonic_increasing
