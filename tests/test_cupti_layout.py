"""The CUPTI readers' shared formats are defined once (``kprof_cuda/cupti_layout.py``): the
compiled reader's header is generated from it and current, a build from another layout is
refused, and both readers' column lists are that one; the compiled reader's time columns
without a timestamp callback (relative to a base, which the alignment adds back)."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from kprof_cuda import cupti_abi, cupti_join, cupti_layout, cupti_native, gen_cupti_header
from kprof_cuda.cupti_layout import OFFSETS, ROW_COLUMNS, SIGNATURE

#: The compiled reader's units and headers.
C_SOURCES = sorted(Path(cupti_native.__file__).with_name("_cupti_src").glob("*.[ch]"))


def test_the_committed_header_is_current() -> None:
    assert gen_cupti_header.HEADER.read_text(encoding="utf-8") == cupti_layout.c_header(), (
        "kprof_cuda/_cupti_layout.h is out of date: "
        "run python -m kprof_cuda.gen_cupti_header and rebuild"
    )
    assert gen_cupti_header.main(["--check"]) == 0


def test_check_fails_on_a_stale_header(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stale = tmp_path / "_cupti_layout.h"
    stale.write_text(cupti_layout.c_header().replace("R_SCOPE = 0", "R_SCOPE = 1"))
    monkeypatch.setattr(gen_cupti_header, "HEADER", stale)
    assert gen_cupti_header.main(["--check"]) == 1
    assert "out of date" in capsys.readouterr().out
    assert gen_cupti_header.main([]) == 0  # rewrites it
    assert stale.read_text() == cupti_layout.c_header()


def test_the_header_enumerates_every_column_and_offset_in_order() -> None:
    text = gen_cupti_header.HEADER.read_text(encoding="utf-8")
    rows = re.findall(r"^\s+R_(\w+) = (\d+),$", text, re.M)
    assert [(c.lower(), int(i)) for c, i in rows] == [(c, i) for i, c in enumerate(ROW_COLUMNS)]
    offs = re.findall(r"^\s+(O_\w+) = (\d+),$", text, re.M)
    assert [(n, int(i)) for n, i in offs] == [
        (cupti_layout.c_name(r, f), i) for i, (r, f) in enumerate(OFFSETS)
    ]
    assert f"N_COLS = {len(ROW_COLUMNS)}" in text and f"N_OFFSETS = {len(OFFSETS)}" in text


def test_the_c_reader_restates_neither_format() -> None:
    """Each unit or header of the compiled reader that names a column or an offset includes the
    generated header itself, and none defines an R_/O_ enumerator."""
    assert C_SOURCES, "no kprof_cuda/_cupti_src/ beside cupti_native.py"
    users = []
    for path in C_SOURCES:
        src = path.read_text(encoding="utf-8")
        if re.search(r"\b(R|O)_[A-Z]\w*|\bN_(COLS|OFFSETS)\b", src):
            users.append(path.name)
            assert '#include "../_cupti_layout.h"' in src, path.name
        assert not re.search(r"\b(R|O)_[A-Z_]+\s*=", src), path.name
        assert not re.search(r"enum\s*\{\s*R_", src), path.name
        assert not re.search(r"enum\s*\{\s*(KS|O_)", src), path.name
    assert "decode.c" in users and "rows.h" in users


def test_layout_is_the_offsets_of_cupti_abi_in_the_readers_order() -> None:
    tables = {"KERNEL": cupti_abi.KERNEL, "MEMCPY": cupti_abi.MEMCPY, "MEMSET": cupti_abi.MEMSET}
    tables |= {"API": cupti_abi.API, "EXT": cupti_abi.EXT, "MEMORY": cupti_abi.MEMORY}
    tables |= {"CALLBACK": cupti_abi.CALLBACK}
    got = cupti_abi.layout()
    assert len(got) == len(OFFSETS)
    assert got[OFFSETS.index(("KERNEL", "correlationId"))] == 92
    assert got[OFFSETS.index(("EXT", "externalId"))] == 8
    assert got[OFFSETS.index(("MEMORY", "address"))] == 16
    assert all(got[i] == tables[r][f] for i, (r, f) in enumerate(OFFSETS))


def test_the_pure_join_columns_derive_from_the_row_columns() -> None:
    raw = set(cupti_join.RAW_COLUMNS)
    joined = {"scope", "queue", "launch_begin", "launch_end", "site"}
    assert raw == set(ROW_COLUMNS) - joined | {"context"}


def test_the_built_reader_has_this_layout() -> None:
    mod = pytest.importorskip("kprof_cuda._cupti", reason="the compiled reader is not built here")
    assert mod.LAYOUT == SIGNATURE, "rebuild: pip install -e ."


def test_a_reader_built_from_another_layout_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    def load(stamp: str | None) -> object:
        fake = SimpleNamespace() if stamp is None else SimpleNamespace(LAYOUT=stamp)
        monkeypatch.setattr(cupti_native.kp, "load_plugin_part", lambda package, name: fake)
        return fake

    fake = load(SIGNATURE)
    assert cupti_native.compiled_reader() is fake
    load(SIGNATURE.replace("scope,kind", "kind,scope"))
    assert cupti_native.compiled_reader() is None  # the pure-Python reader runs
    load(None)  # built before the layout was stamped
    assert cupti_native.compiled_reader() is None
    monkeypatch.setattr(cupti_native.kp, "load_plugin_part", lambda package, name: None)
    assert cupti_native.compiled_reader() is None


def test_a_compiled_reader_without_timestamp_callback_hands_times_from_a_base() -> None:
    """A CUPTI without cuptiActivityRegisterTimestampCallback keeps its default clock
    (CLOCK_REALTIME, ~1.8e18 ns: beyond kprof's ±2**59 ns): the compiled reader's times are
    handed relative to CUPTI's clock when the profile started, unknown launch times stay 0,
    and the alignment adds the base back."""
    from array import array

    from kprof_cuda import cupti_clock

    wall = 1_796_406_750_845_814_298
    now = [wall]

    class FakeCupti:
        api_version = 28

        def address(self, name: str) -> int:
            return 1

        def check(self, code: int, what: str) -> None:
            assert code == 0, what

        def timestamp(self) -> int:
            return now[0]

    row = {c: 0 for c in ROW_COLUMNS} | {"begin": wall + 5_000, "end": wall + 15_000}
    row |= {"launch_begin": wall + 1_000, "launch_end": wall + 3_000}
    lost = dict(row, launch_begin=0, launch_end=0)  # its API record was lost
    cols = tuple(array("q", [row[c], lost[c]]).tobytes() for c in ROW_COLUMNS)
    mod = SimpleNamespace(
        configure=lambda *a: None,
        register=lambda: 0,
        register_timestamp=lambda: -1,  # this CUPTI has no timestamp callback
        set_limits=lambda *a: None,
        take=lambda final, release: (cols, [], []),
    )
    reader = cupti_native.NativeReader(mod, FakeCupti())  # type: ignore[arg-type]
    reader.register()
    assert not reader.timestamp_callback and reader.time_base == wall
    got = reader.take()
    assert got is not None
    t = {c: array("q", got[c]).tolist() for c in ("begin", "end", "launch_begin", "launch_end")}
    assert t == {
        "begin": [5_000, 5_000],
        "end": [15_000, 15_000],
        "launch_begin": [1_000, 0],
        "launch_end": [3_000, 0],
    }
    clock = cupti_clock.Clock()
    clock.offset = (-wall + 42, 0)  # perf_counter_ns = CUPTI's clock - wall + 42
    a = clock.align(reader, 5_000, None)
    assert a.host_ns == 5_042, a


def test_the_compiled_reader_refuses_scopes_that_are_not_ints() -> None:
    """A scope list holding something else is a TypeError, nothing kept (it was a SystemError:
    the reader went on with the error set); its counts are read whole."""
    mod = pytest.importorskip("kprof_cuda._cupti", reason="the compiled reader is not built here")
    for call in (mod.waiting, mod.graph_devices, mod.forget):
        with pytest.raises(TypeError):
            call((1, "x"))
    assert mod.waiting((1, 2)) == 0
    assert {"buffers", "records", "launches", "rows"} <= set(mod.stats())
