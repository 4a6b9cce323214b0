"""Hostile ``.kprof`` files: whatever a file holds, loading it either gives a profile that every
report, export and merge can use, or raises one ``ProfileFileError`` naming the file; loading
never takes memory out of proportion with the file (decompression bombs)."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hostile import bomb, deep, literal, not_files, with_column, with_header
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_storage import fixture_profile

import kprof
from kprof_core.data.records import DeviceTable, HostTable
from kprof_core.io import storage
from kprof_core.io.filecheck import MAX_INFLATION
from kprof_core.io.storage import CorruptProfileError, ProfileFileError, dumps
from kprof_core.ranks.merge import aligned_views, merge_report
from kprof_core.result import loads

KPROF = str(Path(sys.executable).with_name("kprof"))
GOOD = dumps(fixture_profile())
INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)


def use_everything(p: kprof.Profile) -> None:
    """Every consumer of a loaded profile: reports, exports, merging with another profile."""
    p.report(trace=True).encode("utf-8")  # what print(p) does with it
    p.summary()
    p.to_csv()
    json.dumps(p.to_json())
    p.export_chrome_trace(io.StringIO())
    p.export_html(io.StringIO())
    other = fixture_profile()
    other.meta = {"host": "other", "pid": 7}
    for group in ([p, other], [other, p]):
        merge_report(group).encode("utf-8")
        views = aligned_views(group)
        from kprof_core.renderers.chrome import write_chrome_trace
        from kprof_core.renderers.html import write_html

        write_chrome_trace(io.StringIO(), views)
        write_html(io.StringIO(), views)
        try:
            merged = kprof.combine(group)
        except kprof.KprofError as exc:  # clocks that cannot share one timeline: said clearly
            assert "timeline" in str(exc)
            continue
        use_once = loads(dumps(merged))  # a merged profile saves and loads back
        use_once.report(trace=True)


def load_or_refuse(blob: bytes) -> kprof.Profile | None:
    try:
        return loads(blob, name="hostile.kprof")
    except ProfileFileError as exc:
        assert str(exc).startswith("hostile.kprof: ")
        return None


# -- decompression bombs ----------------------------------------------------------------------------

CHILD = textwrap.dedent("""
    import resource, sys
    from kprof_core.io.storage import ProfileFileError
    from kprof_core.result import loads
    data = open(sys.argv[1], "rb").read()
    # A cap, so that a loader without bounds fails here instead of exhausting the machine.
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        loads(data, name="bomb.kprof")
        outcome = "loaded"
    except ProfileFileError as exc:
        outcome = "refused: " + str(exc)
    except MemoryError:
        outcome = "MemoryError"
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    print(grown // 1024, outcome)
""")


def load_in_child(tmp_path: Path, blob: bytes) -> tuple[int, str]:
    """(MB the loader's peak memory grew by, the outcome), loading in a fresh process."""
    path = tmp_path / "bomb.kprof"
    path.write_bytes(blob)
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    mb, outcome = out.stdout.strip().split(" ", 1)
    return int(mb), outcome


@pytest.mark.parametrize(
    ("declared", "says"),
    [
        (None, "holds more than its 0 values"),  # the stream holds more than the header says
        (2**23, "decompression bomb"),  # consistent, but more than the file could honestly hold
    ],
)
def test_a_decompression_bomb_is_refused_in_bounded_memory(
    tmp_path: Path, declared: int | None, says: str
) -> None:
    blob = bomb(1 << 29, declared)  # every column inflates to 512 MB; the file is ~14 MB
    assert len(blob) < 16 << 20
    grown_mb, outcome = load_in_child(tmp_path, blob)
    assert outcome.startswith("refused: bomb.kprof: corrupt kprof file") and says in outcome, (
        outcome
    )
    assert grown_mb < 200


def test_honest_files_inflate_far_less_than_the_bound() -> None:
    """kprof's own files stay well inside MAX_INFLATION (realistic timestamps, and a profile
    whose times barely change)."""
    import random

    rng = random.Random(3)
    p = fixture_profile()
    t = 10**12
    for _ in range(50_000):
        t += rng.randint(500, 900)
        p.table.append(0, 0, 0, 0, t, t + 1, t + 2, 1000, -1, 0)
        p.host.append(3, HostTable.MARK, 0, t, t)
    p.end_ns = t + 10**6
    blob = dumps(p)
    decoded = (len(p.table) * len(DeviceTable.COLUMNS) + len(p.host) * len(HostTable.COLUMNS)) * 8
    assert decoded / len(blob) < MAX_INFLATION / 2
    assert len(loads(blob).table) == len(p.table)


def test_a_column_that_holds_more_than_its_rows_is_refused() -> None:
    five = [1] * 5  # the header says 4 device rows
    with pytest.raises(CorruptProfileError, match="holds more than its 4 values"):
        loads(with_column(GOOD, "device", "duration", five, compress=True))
    with pytest.raises(CorruptProfileError, match="holds 5 values, expected 4"):
        loads(with_column(GOOD, "device", "duration", five, compress=False))


# -- content that passes the checksums --------------------------------------------------------------


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (lambda h: h["meta"].update(deep=deep(100_000)), "nests too deeply"),
        (lambda h: h["meta"].update(deep=deep(200)), "nests deeper than 32 levels"),
        (lambda h: h["meta"].update(host=["a"]), "meta['host'] is not a string"),
        (lambda h: h["meta"].update(pid="12"), "meta['pid'] is not an integer"),
        (lambda h: h["meta"].update(rank=-1), "meta['rank'] is negative"),
        (lambda h: h["meta"].update(clock_offset_ns=2**63), "clock_offset_ns'] is not a time"),
        (lambda h: h["meta"].update(wall_anchor=[1, 2]), "wall_anchor'] is not an object"),
        (lambda h: h["meta"].update(wall_anchor={"wall_ns": 1.5}), "wall_anchor']['wall_ns']"),
        (lambda h: h["meta"].update(clock_reference="yes"), "clock_reference"),
        (lambda h: h["meta"].update(sources=[1, 2]), "meta['sources'][0] is not an object"),
        (
            lambda h: h["meta"].update(
                sources=[{"label": "a", "method": "m", "offset_ns": 0, "meta": {}}],
                queue_source=[0, 5],
                thread_source=[0, 0],
            ),
            "'queue_source'] does not give a source for each of the 2 queues",
        ),
        (
            lambda h: h["meta"].update(
                sources=[{"label": "a", "method": "m", "offset_ns": 0, "meta": {"host": 3}}],
                queue_source=[0, 0],
                thread_source=[0, 0],
            ),
            "['meta']['host'] is not a string",
        ),
        (lambda h: h.update(end_ns=h["start_ns"] - 1), "ends before it starts"),
        (lambda h: h["meta"].update(clock_drift=float("inf")), "Infinity is not a JSON value"),
        (lambda h: h["meta"].update(x=[float("nan")]), "NaN is not a JSON value"),
        # Valid JSON that Python reads as infinity: loaded, it could never be saved again.
        (lambda h: h["meta"].update(clock_drift=literal("1e400")), "1e400 is beyond the range"),
        (lambda h: h["meta"].update(x={"y": literal("-1e400")}), "-1e400 is beyond the range"),
        (lambda h: h.update(start_ns=-(2**62)), "start_ns is not a time"),
        (lambda h: h["clocks"][0].__setitem__(5, 2**62), "a clock's shift is not a time"),
        (lambda h: h["clocks"][0].__setitem__(4, -5), "error bound is negative"),
    ],
)
def test_hostile_headers_are_one_clear_error(edit: Any, says: str) -> None:
    with pytest.raises(CorruptProfileError, match=re.escape(says)):
        loads(with_header(GOOD, edit), name="evil.kprof")


@pytest.mark.parametrize(
    ("column", "values", "says"),
    [
        ("start", [2**62, 0, 0, 0], "column device.start holds a time beyond"),
        ("duration", [0, -(2**63), 0, 0], "column device.duration holds a time beyond"),
        ("nbytes", [-2, -1, -1, -1], "device.nbytes holds a value outside"),
        ("flags", [16, 0, 0, 0], "device.flags holds an unknown flag"),
        ("flags", [-1, 0, 0, 0], "device.flags holds an unknown flag"),
    ],
)
@pytest.mark.parametrize("compress", [False, True])
def test_hostile_columns_are_one_clear_error(
    column: str, values: list[int], says: str, compress: bool
) -> None:
    with pytest.raises(CorruptProfileError, match=says):
        loads(with_column(GOOD, "device", column, values, compress), name="evil.kprof")


def test_lone_surrogates_in_names_load_and_print(tmp_path: Path) -> None:
    """JSON can hold a lone surrogate (\\ud800); every output writes it escaped."""
    blob = with_header(
        GOOD, lambda h: (h["names"].__setitem__(0, "k\ud800"), h["meta"].update(host="h\udfff"))
    )
    p = loads(blob)
    use_everything(p)
    assert "k\\ud800" in p.report()
    p.export_html(tmp_path / "t.html")
    assert "k\\ud800" in (tmp_path / "t.html").read_text(encoding="utf-8")


def test_a_name_from_a_non_utf8_path_shows_in_a_notebook() -> None:
    """os.fsdecode(b"kern_\\xff") holds the lone surrogate \\udcff: the notebook's display
    (which the front end encodes as UTF-8) shows it escaped, like every other view."""
    name = os.fsdecode(b"kern_\xff")
    p = loads(with_header(GOOD, lambda h: h["names"].__setitem__(0, name)))
    out = p._repr_html_()
    assert out is not None
    out.encode("utf-8")  # what a notebook front end does with it
    assert "kern_\\udcff" in out


# -- fuzzing ----------------------------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | INT64 | st.floats() | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
TIME = st.integers(-(2**61), 2**61 - 1)
WIDE = st.sampled_from([2**61 - 1, 2**61, -(2**61), -(2**61) - 1, 2**62, 2**63 - 1]) | INT64
OWNERS = st.lists(st.integers(-1, 2), min_size=2, max_size=2) | st.lists(
    st.integers(0, 1), max_size=3
)


def meta_of(depth: int) -> Any:
    """kprof's meta keys, each well typed or near the edge more often than not, else any JSON."""
    valid: dict[str, Any] = {
        "host": st.text(max_size=4),
        "pid": TIME,
        "rank": st.none() | st.integers(-2, 4) | WIDE,
        "world_size": st.none() | st.integers(-1, 4),
        "rank_source": st.text(max_size=3),
        "clock_domain": st.sampled_from(["boot:a", "boot:b"]),
        "host_clock": st.text(max_size=3),
        "clock_offset_ns": TIME | TIME | WIDE,
        "clock_error_ns": st.none() | TIME,
        "clock_drift": st.floats() | st.integers(),
        "clock_reference": st.booleans(),
        "wall_anchor": st.fixed_dictionaries(
            {}, optional={k: TIME | WIDE | JSON for k in ("wall_ns", "perf_ns", "bracket_ns")}
        ),
    }
    if depth:
        source = st.fixed_dictionaries(
            {
                "label": st.text(max_size=3),
                "method": st.text(max_size=3),
                "offset_ns": TIME | WIDE,
                "meta": meta_of(depth - 1),
            },
            optional={"error_ns": st.none() | TIME | WIDE},
        )
        valid.update(
            sources=st.lists(source, min_size=1, max_size=2) | JSON,
            queue_source=OWNERS,
            thread_source=OWNERS,
        )
    return st.fixed_dictionaries(
        {}, optional={k: st.one_of(v, v, v, v, v, JSON) for k, v in valid.items()}
    )


META = meta_of(1)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(META)
def test_fuzzed_meta_loads_to_a_usable_profile_or_one_clear_error(meta: dict[str, Any]) -> None:
    p = load_or_refuse(with_header(GOOD, lambda h: h["meta"].update(meta)))
    if p is not None:
        use_everything(p)


TIME_COLUMNS = [
    ("device", c) for c in ("launch_start", "launch_end", "start", "duration", "nbytes", "flags")
] + [("host", "start"), ("host", "end")]
EDGE = st.sampled_from([0, -1, 1, 2**61 - 1, -(2**61), 2**61, 2**62, 2**63 - 1, -(2**63)]) | INT64


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(TIME_COLUMNS), st.data(), st.booleans(), st.integers(-(2**62), 2**62))
def test_fuzzed_int64_columns_load_to_a_usable_profile_or_one_clear_error(
    column: tuple[str, str], data: Any, compress: bool, start: int
) -> None:
    table, name = column
    rows = 4 if table == "device" else 2
    values = data.draw(st.lists(EDGE, min_size=rows, max_size=rows))
    blob = with_column(GOOD, table, name, values, compress)
    blob = with_header(blob, lambda h: h.update(start_ns=start, end_ns=max(start, h["end_ns"])))
    p = load_or_refuse(blob)
    if p is not None:
        use_everything(p)


# -- the commands never print a traceback -----------------------------------------------------------


@pytest.mark.parametrize(
    "blob",
    [
        with_header(GOOD, lambda h: h["meta"].update(deep=deep(100_000))),
        with_header(GOOD, lambda h: h["meta"].update(sources=[1])),
        with_column(GOOD, "device", "start", [2**63 - 1] * 4),
        with_header(GOOD, lambda h: h.update(end_ns=0)),
    ],
    ids=["deep", "sources", "int64-max", "end-before-start"],
)
@pytest.mark.parametrize("command", ["merge", "show", "diff"])
def test_commands_refuse_a_hostile_file_in_one_line(
    tmp_path: Path, blob: bytes, command: str
) -> None:
    """kprof merge, show and diff read files through the one loader: one line, exit code 2."""
    (tmp_path / "a.kprof").write_bytes(GOOD)
    (tmp_path / "b.kprof").write_bytes(blob)
    files = (
        [str(tmp_path / "b.kprof")]
        if command == "show"
        else [str(tmp_path / "a.kprof"), str(tmp_path / "b.kprof")]
    )
    out = subprocess.run([KPROF, command, *files], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert out.stderr.startswith(f"kprof {command}: {tmp_path / 'b.kprof'}: corrupt kprof file (")
    assert out.stderr.count("\n") == 1


def test_merge_save_with_far_apart_clocks_is_a_clear_error(tmp_path: Path) -> None:
    a, b = fixture_profile(), fixture_profile()
    a.meta = {"host": "a", "pid": 1, "clock_offset_ns": 2**61 - 1, "clock_domain": "boot:a"}
    b.meta = {"host": "b", "pid": 2, "clock_offset_ns": -(2**61), "clock_domain": "boot:b"}
    a.save(tmp_path / "a.kprof")
    b.save(tmp_path / "b.kprof")
    out = subprocess.run(
        [
            KPROF,
            "merge",
            str(tmp_path / "a.kprof"),
            str(tmp_path / "b.kprof"),
            "--save",
            str(tmp_path / "m.kprof"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in out.stderr
    assert out.returncode == 2 and "one timeline" in out.stderr


def test_a_recorded_profile_still_loads_exactly() -> None:
    assert storage.dumps(loads(GOOD)) == GOOD


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (lambda p: p.meta.update(host=["x"]), "cannot save: meta['host'] is not a string"),
        (
            lambda p: p.meta.update(deep=json.loads("[" * 40 + "]" * 40)),
            "cannot save: meta nests deeper",
        ),
        (
            lambda p: setattr(p, "end_ns", p.start_ns - 1),
            "cannot save: the profile ends before it starts",
        ),
    ],
)
def test_what_cannot_load_back_cannot_be_saved(tmp_path: Path, edit: Any, says: str) -> None:
    p = fixture_profile()
    edit(p)
    with pytest.raises(kprof.KprofError, match=re.escape(says)):
        p.save(tmp_path / "x.kprof")
    assert not list(tmp_path.iterdir())


def test_every_flag_kprof_writes_loads() -> None:
    from kprof_core.data.records import ALL_FLAGS

    bits = [1 << k for k in range(ALL_FLAGS.bit_length()) if ALL_FLAGS & 1 << k]
    p = loads(with_column(GOOD, "device", "flags", [*bits, ALL_FLAGS][:4]))
    use_everything(p)


# -- files that are not files, names that are not plain ---------------------------------------------

LOAD_CHILD = textwrap.dedent("""
    import resource, sys
    import kprof
    # A cap: a loader that reads /dev/zero to the end fails here, not the machine.
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
    try:
        kprof.load(sys.argv[1])
    except kprof.KprofError as exc:
        print(type(exc).__name__, exc)
""")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs and /dev/zero are POSIX")
def test_only_regular_files_are_read(tmp_path: Path) -> None:
    """A FIFO would block the loader forever and /dev/zero would fill memory: refused before
    a byte is read, in a fresh process with a memory cap (and a timeout, for the FIFO)."""
    for path, what in not_files(tmp_path).values():
        out = subprocess.run(
            [sys.executable, "-c", LOAD_CHILD, str(path)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout == (
            f"NotAProfileError {path}: {what}, not a kprof profile (kprof reads regular files)\n"
        )
    # A symlink to a regular profile is a regular file.
    (tmp_path / "good.kprof").write_bytes(GOOD)
    os.symlink(tmp_path / "good.kprof", tmp_path / "link.kprof")
    assert kprof.load(tmp_path / "link.kprof").counts == loads(GOOD).counts


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs and /dev/zero are POSIX")
@pytest.mark.parametrize("kind", ["fifo", "zero", "dir"])
@pytest.mark.parametrize("command", ["merge", "show", "diff"])
def test_commands_refuse_what_is_not_a_file_in_one_line(
    tmp_path: Path, kind: str, command: str
) -> None:
    path, what = not_files(tmp_path)[kind]
    (tmp_path / "a.kprof").write_bytes(GOOD)
    files = [str(path)] if command == "show" else [str(tmp_path / "a.kprof"), str(path)]
    out = subprocess.run([KPROF, command, *files], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stderr
    assert (
        out.stderr
        == f"kprof {command}: {path}: {what}, not a kprof profile (kprof reads regular files)\n"
    )


@pytest.mark.parametrize("command", ["merge", "show", "diff"])
def test_file_names_in_one_line_errors_are_escaped(tmp_path: Path, command: str) -> None:
    from hostile import EVIL_NAME

    (tmp_path / "a.kprof").write_bytes(GOOD)
    evil = str(tmp_path / f"{EVIL_NAME}.kprof")  # not there: "no such file"
    files = [evil] if command == "show" else [str(tmp_path / "a.kprof"), evil]
    out = subprocess.run([KPROF, command, *files], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert out.stderr == (
        f"kprof {command}: {tmp_path}/k\\x1b]0;pwned\\x07\\x1b[2J\\x0d\\x0a1 failed, 0 passed"
        "\\u202e.kprof: no such file (cannot read it)\n"
    )


def test_a_long_valid_file_name_saves(tmp_path: Path) -> None:
    """The temporary file of the atomic save must not push a valid name past NAME_MAX."""
    name = "p" * 245 + ".kprof"  # 251 bytes: within the usual limit of 255
    fixture_profile().save(tmp_path / name)
    assert [f.name for f in tmp_path.iterdir()] == [name]
    assert storage.dumps(kprof.load(tmp_path / name)) == GOOD


def test_merge_warns_of_two_files_of_one_rank(tmp_path: Path) -> None:
    a, b = fixture_profile(), fixture_profile()
    b.meta = {**b.meta, "pid": 4243}  # another run's rank 1
    a.save(tmp_path / "a.kprof")
    b.save(tmp_path / "b.kprof")
    out = subprocess.run(
        [KPROF, "merge", str(tmp_path / "a.kprof"), str(tmp_path / "b.kprof")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stderr == (
        f"kprof merge: warning: {tmp_path / 'b.kprof'} and {tmp_path / 'a.kprof'} are both "
        "rank 1; each is merged as a process of its own (give each rank's file once)\n"
    )
    assert "Merged 2 processes" in out.stdout
