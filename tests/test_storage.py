"""Saving and loading profiles: exact round trips, and clear errors for bad files."""

from __future__ import annotations

import io
import json
import random
import struct
import zlib
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kprof
from kprof_core.data.memory import ALLOC, FREE, Memory, MemoryTable
from kprof_core.data.records import (
    ALL_FLAGS,
    KIND_NAMES,
    STACK_TYPE,
    DeviceClock,
    DeviceTable,
    HostTable,
    QueueRecord,
    ThreadRecord,
)
from kprof_core.data.sites import Site
from kprof_core.io import storage
from kprof_core.io.read_v1 import read_v1
from kprof_core.io.storage import (
    CorruptProfileError,
    NotAProfileError,
    ProfileFileError,
    UnsupportedVersionError,
    dumps,
)
from kprof_core.result import Profile, loads

DATA = Path(__file__).parent / "data"
INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
#: Times a loaded profile may hold (kprof_core.io.filecheck.TIME_LIMIT).
TIME = st.integers(min_value=-(2**61), max_value=2**61 - 1)


def state(p: kprof.Profile) -> dict[str, Any]:
    """Everything a profile holds, as comparable values."""
    return {
        "trace": p.trace,
        "backends": p.backends,
        "start": p.start_ns,
        "end": p.end_ns,
        "device": {c: list(getattr(p.table, c)) for c in DeviceTable.COLUMNS},
        "host": {c: list(getattr(p.host, c)) for c in HostTable.COLUMNS},
        "names": p.names,
        "sites": p.sites,
        "queues": p.queues,
        "threads": p.threads,
        "errors": p.errors,
        "clocks": p.clocks,
        "meta": p.meta,
    }


def build(
    names: list[str],
    queues: list[QueueRecord],
    threads: list[ThreadRecord],
    device_rows: Sequence[tuple[int, ...]],
    host_rows: Sequence[tuple[int, ...]],
    errors: dict[int, str] | None = None,
    meta: dict[str, Any] | None = None,
    clocks: dict[str, DeviceClock] | None = None,
    start: int = 0,
    end: int = 0,
) -> kprof.Profile:
    p = kprof.Profile(trace=True, backends=["testdev"])
    for r in device_rows:
        p.table.append(*r)
    for r in host_rows:
        p.host.append(*r)
    p.names, p.queues, p.threads = names, queues, threads
    p.errors = errors or {}
    p.clocks = clocks or {}
    p.meta = meta if meta is not None else {"host": "h", "pid": 1}
    p.start_ns, p.end_ns = start, end
    return p


def fixture_profile() -> kprof.Profile:
    """The content of tests/data/v1-*.kprof (written by kprof with format version 1)."""
    q = [
        QueueRecord("testdev", "testdev 0", "queue 1", "testdev:testdev 0"),
        QueueRecord("opencl", "Portable CPU", "queue 0", "opencl:cpu"),
    ]
    th = [ThreadRecord(140001, "MainThread"), ThreadRecord(140002, "worker", "Task-2")]
    names = ["saxpy", "copy h2d", "step", "tick", "ünïcode ∑"]
    base = 1_000_000_000
    dev = [
        (0, 0, 0, 0, base + 10, base + 20, base + 100, 500, -1, 0),
        (1, 1, 1, 1, base + 30, base + 45, base + 600, 250, 4096, 1),
        (4, 0, 0, 0, base + 50, base + 60, base + 50, 0, -1, 2 | 4),
        (2, 2, 0, 0, base + 5, base + 700, base + 90, 800, -1, 0),
    ]
    host = [
        (2, HostTable.RANGE, 0, base + 5, base + 700),
        (3, HostTable.MARK, 1, base + 65, base + 65),
    ]
    clocks = {
        "testdev:testdev 0": DeviceClock("testdev", "testdev 0", "host clock (test device)", 0, 0),
        "opencl:cpu": DeviceClock("opencl", "Portable CPU", "first work at launch", None, 15),
    }
    meta = {
        "host": "node7",
        "pid": 4242,
        "rank": 1,
        "world_size": 2,
        "rank_source": "PMI_RANK",
        "host_clock": "perf_counter_ns",
        "clock_domain": "boot:fixture",
        "wall_anchor": {"wall_ns": 1_700_000_000_000_000_000, "perf_ns": base, "bracket_ns": 90},
    }
    return build(
        names,
        q,
        th,
        dev,
        host,
        {2: "the device did not reach the timestamp"},
        meta,
        clocks,
        start=base,
        end=base + 800,
    )


# -- round trips ------------------------------------------------------------------------------------


def test_round_trip_of_a_recorded_profile(tmp_path: Path) -> None:
    from kprof_testbackend import device

    q = device.Queue()
    with kprof.profile() as p:
        with q:
            for _ in range(3):
                q.launch("k", 20)
            with kprof.range("r"):
                q.launch("inner", 10)
            kprof.mark("m")
    q.close()
    path = tmp_path / "p.kprof"
    p.save(path)
    back = kprof.load(path)
    assert state(back) == state(p)
    assert back.report() == p.report()
    assert back.kernels == p.kernels and back.ranges == p.ranges and back.markers == p.markers
    assert path.read_bytes() == dumps(back)  # writing what was read gives the same file
    # Who made it and how to align it travel with it.
    assert (
        back.meta["pid"] > 0
        and back.meta["clock_domain"]
        and back.meta["wall_anchor"]["bracket_ns"] >= 0
    )


profiles = st.builds(
    lambda names, nq, nt, dev, host, data: (names, nq, nt, dev, host, data),
    st.lists(st.text(max_size=8), min_size=1, max_size=5),
    st.integers(1, 3),
    st.integers(1, 3),
    st.lists(
        st.tuples(*[TIME] * 4, st.integers(-1, 2**61), st.integers(0, ALL_FLAGS)), max_size=30
    ),
    st.lists(st.tuples(TIME, TIME), max_size=10),
    st.data(),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(profiles, st.booleans())
def test_round_trip_is_exact_on_random_tables(spec: Any, compress: bool) -> None:
    names, nq, nt, dev, host, data = spec
    text = st.text(max_size=6)
    queues = [
        QueueRecord(data.draw(text), data.draw(text), data.draw(text), f"key{i}") for i in range(nq)
    ]
    threads = [
        ThreadRecord(
            data.draw(st.integers(0, 2**64 - 1)), data.draw(text), data.draw(st.none() | text)
        )
        for _ in range(nt)
    ]
    idx = st.integers(0, len(names) - 1)
    device_rows = [
        (
            data.draw(idx),
            data.draw(st.sampled_from(sorted(KIND_NAMES))),
            data.draw(st.integers(0, nq - 1)),
            data.draw(st.integers(0, nt - 1)),
            *times,
        )
        for times in dev
    ]
    host_rows = [
        (
            data.draw(idx),
            data.draw(st.sampled_from([HostTable.RANGE, HostTable.MARK])),
            data.draw(st.integers(0, nt - 1)),
            a,
            b,
        )
        for a, b in host
    ]
    errors = {i: data.draw(text) for i in range(len(device_rows)) if data.draw(st.booleans())}
    # Keys of the user's own (kprof's keys have types: tests/test_reliability_files.py).
    meta = data.draw(
        st.dictionaries(
            st.text(max_size=5).map("x_".__add__),
            st.recursive(
                st.none()
                | st.booleans()
                | INT64
                | st.floats(allow_nan=False, allow_infinity=False)
                | text,
                lambda inner: (
                    st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3)
                ),
                max_leaves=8,
            ),
            max_size=4,
        )
    )
    clocks = {
        f"key{i}": DeviceClock(
            "b",
            "d",
            data.draw(text),
            data.draw(st.none() | st.integers(0, 2**61 - 1)),
            data.draw(TIME),
        )
        for i in range(data.draw(st.integers(0, nq)))
    }
    start = data.draw(TIME)
    p = build(
        names,
        queues,
        threads,
        device_rows,
        host_rows,
        errors,
        meta,
        clocks,
        start,
        data.draw(st.integers(start, 2**61 - 1)),
    )
    blob = dumps(p, compress=compress)
    assert state(loads(blob)) == state(p)


def test_compact_for_many_records() -> None:
    """100k realistic launches take well under the 80 bytes a row of raw columns would."""
    rng = random.Random(7)
    t = 10**12
    rows = []
    for i in range(100_000):
        t += rng.randint(2_000, 9_000)
        rows.append(
            (
                i % 7,
                0,
                i % 3,
                0,
                t,
                t + rng.randint(3_000, 6_000),
                t + rng.randint(10_000, 90_000),
                rng.randint(1_000, 50_000),
                -1,
                0,
            )
        )
    p = build(
        [f"k{i}" for i in range(7)],
        [QueueRecord("b", "d", f"q{i}", f"k{i}") for i in range(3)],
        [ThreadRecord(1, "MainThread")],
        rows,
        [],
    )
    compressed, raw = dumps(p), dumps(p, compress=False)
    assert len(raw) > 80 * 100_000
    assert len(compressed) < 12 * 100_000
    assert state(loads(compressed)) == state(p)


def test_file_objects_and_paths(tmp_path: Path) -> None:
    p = fixture_profile()
    buf = io.BytesIO()
    p.save(buf)
    assert state(kprof.load(io.BytesIO(buf.getvalue()))) == state(p)
    storage.save(p, str(tmp_path / "s.kprof"), compress=False)
    assert state(kprof.load(str(tmp_path / "s.kprof"))) == state(p)
    assert [f.name for f in tmp_path.iterdir()] == ["s.kprof"]  # no temporary file left


def test_unsavable_meta_is_a_clear_error(tmp_path: Path) -> None:
    p = fixture_profile()
    p.meta["when"] = object()
    with pytest.raises(kprof.KprofError, match="meta must hold only JSON values"):
        p.save(tmp_path / "x.kprof")
    assert not list(tmp_path.iterdir())


# -- versions ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["v1-raw.kprof", "v1-zlib.kprof"])
def test_version_1_files_stay_readable(name: str) -> None:
    """Files written by format version 1 (kept in tests/data) load to the same records."""
    back = kprof.load(DATA / name)
    assert state(back) == state(fixture_profile())
    assert back.unresolved[0].error == "the device did not reach the timestamp"


def test_version_1_writer_is_unchanged() -> None:
    """A profile with nothing version 1 lacks is written as version 1, exactly what version-1
    readers (kprof 0.1.0) expect."""
    assert dumps(fixture_profile(), compress=False) == (DATA / "v1-raw.kprof").read_bytes()


def fixture_v5() -> kprof.Profile:
    """The content of tests/data/v5-all.kprof: version 1's profile with every part version 5
    adds: memory events, launch sites, stacks, configurations and flops."""
    p = fixture_profile()
    t = MemoryTable()
    base = 1_000_000_000
    for row in [
        (base + 12, 0, ALLOC, 4096, 0x1000, 0),
        (base + 40, 1, ALLOC, 8192, 0x2000, -1),
        (base + 600, 0, FREE, 4096, 0x1000, -1),
    ]:
        for c, v in zip(MemoryTable.COLUMNS, row):
            getattr(t, c).append(v)
    devices = [("testdev", "testdev 0"), ("opencl", "Portable CPU")]
    p.memory = Memory(t, devices, ["train.py:42 step"], p.start_ns)
    p.sites = [Site("/src/train.py", 42, "step"), Site("/src/model.py", 7, "forward")]
    for i, v in enumerate([0, 1, -1, 0]):
        p.table.site[i] = v
    p.host.site[0] = 1
    main, step = Site("/src/train.py", 50, "main"), Site("/src/train.py", 42, "step")
    p.stacks = ((main,), (main, step))
    p.table.stack = array(STACK_TYPE, [1, 0, -1, 1])
    p.host.stack = array(STACK_TYPE, [0] + [-1] * (len(p.host) - 1))
    p.configs = ["global 64", "global 1024 local 64"]
    for i, (cfg, flops) in enumerate([(0, 128), (1, -1), (-1, -1), (0, 128)]):
        p.table.config[i], p.table.flops[i] = cfg, flops
    return p


def test_a_version_5_file_stays_readable() -> None:
    """A file of format version 5, committed when it came: a reader change that breaks it
    fails here, not at a user's."""
    blob = (DATA / "v5-all.kprof").read_bytes()
    assert struct.unpack("<I", blob[8:12])[0] == 5
    back, want = kprof.load(DATA / "v5-all.kprof"), fixture_v5()
    assert state(back) == state(want)
    assert list(back.memory.table.nbytes) == list(want.memory.table.nbytes)
    assert back.memory.peak == want.memory.peak
    assert [r.site for r in back.kernels] == [r.site for r in want.kernels]
    assert back.stacks == want.stacks and list(back.table.stack) == list(want.table.stack)
    assert list(back.host.stack) == list(want.host.stack)
    assert back.configs == want.configs and list(back.table.config) == [0, 1, -1, 0]
    assert list(back.table.flops) == [128, -1, -1, 128]


def test_the_version_5_writer_is_unchanged() -> None:
    assert dumps(fixture_v5(), compress=False) == (DATA / "v5-all.kprof").read_bytes()


@pytest.mark.parametrize("version", [2, 3, 4])
def test_development_versions_are_refused_saying_so(version: int) -> None:
    """Versions 2 to 4 were written only before version 5 folded them into one; a file of one
    is not damaged, and not from a newer kprof: it says what it is."""
    blob = bytearray(dumps(fixture_v5()))
    struct.pack_into("<I", blob, 8, version)
    with pytest.raises(
        UnsupportedVersionError,
        match=rf"x\.kprof: written by a development version of kprof \(format version "
        rf"{version}, which no release reads; this kprof reads versions 1 and 5\)",
    ):
        loads(bytes(blob), name="x.kprof")


def test_newer_version_is_refused_with_upgrade_advice() -> None:
    blob = bytearray(dumps(fixture_profile()))
    struct.pack_into("<I", blob, 8, storage.FORMAT_VERSION + 1)
    with pytest.raises(
        UnsupportedVersionError, match=r"x\.kprof: written by a newer kprof .*upgrade kprof"
    ):
        loads(bytes(blob), name="x.kprof")
    struct.pack_into("<I", blob, 8, 0)
    with pytest.raises(UnsupportedVersionError, match="unknown kprof format version 0"):
        loads(bytes(blob))


def test_each_version_has_its_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    """The version field picks the reader: a (hypothetical) version 99 whose header is
    zlib-compressed loads next to version 1 files."""

    def read_v99(data: bytes, pos: int, name: str, cls: type[Profile]) -> Profile:
        (hlen,) = struct.unpack_from("<I", data, pos)
        header = zlib.decompress(data[pos + 4 : pos + 4 + hlen])
        v1 = (
            data[:pos]
            + struct.pack("<II", len(header), zlib.crc32(header))
            + header
            + data[pos + 4 + hlen :]
        )
        return read_v1(v1, pos, name, cls)

    v1 = dumps(fixture_profile())
    hlen, _crc = struct.unpack_from("<II", v1, 12)
    packed = zlib.compress(v1[20 : 20 + hlen])
    v99 = storage.MAGIC + struct.pack("<II", 99, len(packed)) + packed + v1[20 + hlen :]
    with pytest.raises(UnsupportedVersionError):
        loads(v99)
    monkeypatch.setitem(storage.READERS, 99, read_v99)
    assert state(loads(v99)) == state(loads(v1)) == state(fixture_profile())


# -- bad files --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"hello",
        b'{"traceEvents": []}\n' * 3,
        bytes(range(256)),
        b"\x89PNG\r\n\x1a\n" + bytes(40),
    ],
)
def test_not_a_profile(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "notes.kprof"
    path.write_bytes(content)
    with pytest.raises(NotAProfileError, match=r"notes\.kprof: not a kprof profile"):
        kprof.load(path)


def test_every_truncation_is_detected() -> None:
    blob = dumps(fixture_profile())
    for n in range(4, len(blob)):
        with pytest.raises(CorruptProfileError, match="truncated"):
            loads(blob[:n], name="cut.kprof")


def test_every_flipped_byte_is_detected() -> None:
    """CRC-32 catches any one damaged byte; damage never surfaces as another exception."""
    blob = dumps(fixture_profile())
    for i in range(len(blob)):
        bad = bytearray(blob)
        bad[i] ^= 0x5A
        with pytest.raises(ProfileFileError) as info:
            loads(bytes(bad), name="bad.kprof")
        assert str(info.value).startswith("bad.kprof: ")
        if i < len(storage.MAGIC):
            assert isinstance(info.value, NotAProfileError)


def test_trailing_bytes_are_corruption() -> None:
    with pytest.raises(CorruptProfileError, match="unexpected bytes after the last column"):
        loads(dumps(fixture_profile()) + b"\0")


def _with_header(blob: bytes, edit: Any) -> bytes:
    """Rewrite a file's header (keeping checksums valid), as a buggy or hostile writer would."""
    hlen, _ = struct.unpack_from("<II", blob, 12)
    header = json.loads(blob[20 : 20 + hlen])
    edit(header)
    h = json.dumps(header).encode()
    return blob[:12] + struct.pack("<II", len(h), zlib.crc32(h)) + h + blob[20 + hlen :]


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda h: h["names"].pop(), "kernel name index is out of range"),
        (lambda h: h["queues"].pop(), "queue index is out of range"),
        (lambda h: h["counts"].update(device=3), "holds 4 values, expected 3"),
        (lambda h: h.pop("meta"), "'meta' is missing"),
        (lambda h: h["columns"].pop(), "does not list exactly the record columns"),
        (lambda h: h["threads"].append([1, 2, 3]), "'threads' has a malformed entry"),
        (lambda h: h["errors"].append([99, "x"]), "error refers to a row that does not exist"),
        (lambda h: h["columns"][0].update(encoding="lz4"), "unknown encoding 'lz4'"),
    ],
)
def test_consistent_checksums_but_bad_content(edit: Any, message: str) -> None:
    blob = _with_header(dumps(fixture_profile(), compress=False), edit)
    with pytest.raises(CorruptProfileError, match=message):
        loads(blob, name="evil.kprof")


def test_bad_kind_values_are_corruption() -> None:
    p = fixture_profile()
    p.table.kind[0] = 99
    with pytest.raises(CorruptProfileError, match="unknown kind of device record"):
        loads(dumps(p))


def test_file_errors_are_kprof_errors_and_value_errors() -> None:
    assert issubclass(ProfileFileError, kprof.KprofError) and issubclass(
        ProfileFileError, ValueError
    )
    with pytest.raises(TypeError, match="takes bytes"):
        loads("text")  # type: ignore[arg-type]


def write_fixtures() -> None:  # pragma: no cover - run by hand once, when version 1 was made
    DATA.mkdir(exist_ok=True)
    (DATA / "v1-raw.kprof").write_bytes(dumps(fixture_profile(), compress=False))
    (DATA / "v1-zlib.kprof").write_bytes(dumps(fixture_profile(), compress=True))
    (DATA / "v5-all.kprof").write_bytes(dumps(fixture_v5(), compress=False))  # when it came
