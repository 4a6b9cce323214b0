"""Launch configurations: what plugins hand with each launch (``rec.launch(..., config=)``,
``ActivityColumns(config=)``, ``DeviceRecord.config``), interned per profile, grouped by
``summary(by=("name", "config"))``, and kept through nesting, files, exports and merges; on
both recorder paths, the test backend and PoCL (real OpenCL)."""

from __future__ import annotations

import csv
import io
import threading
from collections.abc import Iterator
from typing import Any

import pytest

import kprof
from kprof_core.data.config_summary import NO_CONFIG
from kprof_core.io import storage
from kprof_core.low_level import native
from kprof_core.low_level.layout import CONFIG, ENTRY_FIELDS
from kprof_core.ranks.combine import combine
from kprof_core.result import load, loads

G4 = "grid 4x1x1 block 256x1x1"
G8 = "grid 8x1x1 block 256x1x1"


@pytest.fixture(params=["compiled", "pure"])
def path(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "compiled" and native.compiled() is None:
        pytest.skip("the compiled recorder is not built here")
    native.use_compiled(request.param == "compiled")
    try:
        yield request.param
    finally:
        native.use_compiled(True)


def launches(q: Any, n: int = 40) -> None:
    for _ in range(n):
        q.launch("k", 1, grid=(4, 1, 1), block=(256, 1, 1))
        q.launch("k", 1, grid=(8, 1, 1), block=(256, 1, 1))
        q.launch("j", 1)


def by_name_config(p: kprof.Profile) -> dict[tuple[str, str | None], int]:
    return {(r.name, r.config): r.calls for r in p.summary(by=("name", "config")).device}


def test_the_entry_format_carries_the_config() -> None:
    assert ENTRY_FIELDS[CONFIG] == "config"


def test_configs_are_interned_and_grouped(path: str, testbackends: Any, tdq: Any) -> None:
    q = tdq()
    with kprof.profile() as p, q:
        launches(q)  # 120 launches: column-wise harvests and one-by-one alike
    assert p.configs == [G4, G8]  # one text per distinct configuration, in order met
    assert [k.config for k in p.kernels[:3]] == [G4, G8, None]
    assert sorted(set(p.table.config)) == [-1, 0, 1]
    assert by_name_config(p) == {("k", G4): 40, ("k", G8): 40, ("j", None): 40}
    assert {r.name: r.calls for r in p.summary(by="config").device} == {
        G4: 40,
        G8: 40,
        NO_CONFIG: 40,
    }
    assert p.summary(by=["name", "config"]) == p.summary(by=("name", "config"))
    # Grouping by name alone is unchanged: k's 80 calls in one row.
    assert p.summary().device_row("k").calls == 80
    text = p.report(by=("name", "config"))
    assert "Device-side activity by name and config:" in text
    header = next(line for line in text.splitlines() if "Config" in line)
    assert header.split()[-2:] == ["Config", "Name"]
    assert any(line.endswith(f"{G8}  k") for line in text.splitlines())
    assert "Config" not in str(p)  # the default report as before
    with pytest.raises(ValueError, match='"config" or \\("name", "config"\\)'):
        p.summary(by="grid")


def test_both_paths_intern_the_same_configs(testbackends: Any, tdq: Any) -> None:
    if native.compiled() is None:
        pytest.skip("the compiled recorder is not built here")
    got = []
    for compiled in (True, False):
        native.use_compiled(compiled)
        try:
            q = tdq()
            with kprof.profile() as p, q:
                launches(q, 10)
        finally:
            native.use_compiled(True)
        got.append((p.configs, list(p.table.config)))
    assert got[0] == got[1]


def test_a_hook_that_fails_leaves_str_and_an_unhashable_config_its_repr(
    testbackends: Any, tdq: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    q = tdq()
    with kprof.profile() as p, q:
        q.launch("k", 1, grid=[2, 1, 1], block=None)  # a list: not hashable
    assert p.configs == [repr(([2, 1, 1], None))]  # kept as text, the hook not asked
    backend = kprof.get_backend("testdev")

    def broken(b: Any, config: Any) -> str:
        raise RuntimeError("no text")

    monkeypatch.setattr(backend, "launch_config", broken)
    with pytest.warns(RuntimeWarning, match="launch_config raised RuntimeError"):
        with kprof.profile() as p2, q:
            q.launch("k", 1, grid=(2, 1, 1), block=(32, 1, 1))
    assert p2.configs == [str(((2, 1, 1), (32, 1, 1)))]
    assert backend.broken is None  # the text falls back; the backend stays in use


def test_nested_profiles_saving_exports_and_merges_keep_configs(
    path: str, testbackends: Any, tdq: Any, tmp_path: Any
) -> None:
    q = tdq()
    with kprof.profile() as outer, q:
        with kprof.profile() as inner:
            q.launch("k", 1, grid=(8, 1, 1), block=(256, 1, 1))
        q.launch("k", 1, grid=(4, 1, 1), block=(256, 1, 1))
        q.launch("j", 1)
    assert inner.configs == [G8]
    assert by_name_config(outer) == {("k", G4): 1, ("k", G8): 1, ("j", None): 1}

    # Files: version 5 with configs, read back the same.
    outer.save(tmp_path / "p.kprof")
    data = (tmp_path / "p.kprof").read_bytes()
    assert storage.peek_version(data) == 5
    back = load(tmp_path / "p.kprof")
    assert back.configs == outer.configs and list(back.table.config) == list(outer.table.config)
    assert by_name_config(back) == by_name_config(outer)
    # A profile without configurations is written as before (version 1 here).
    with kprof.profile() as plain, q:
        q.launch("j", 1)
    assert storage.peek_version(storage.dumps(plain)) == 1
    assert loads(storage.dumps(plain)).table.config.tolist() == [-1]

    # Exports carry the text per device row (None for host rows and rows without one).
    rows = outer.to_json()["device"]  # type: ignore[index]
    assert sorted(str(r["config"]) for r in rows) == sorted([G4, G8, "None"])
    table = list(csv.DictReader(io.StringIO(outer.to_csv() or "")))
    assert sorted(r["config"] for r in table if r["record"] == "device") == ["", G4, G8]

    # Merged: one text per distinct configuration across the profiles.
    both = combine([outer, inner])
    assert both.configs == outer.configs == [G8, G4]  # the inner's, absorbed first
    assert by_name_config(both) == {("k", G4): 1, ("k", G8): 2, ("j", None): 1}


@pytest.fixture
def tracer(fresh_registry: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from kprof_testbackend.tracer import tracer as t

    monkeypatch.setenv("KPROF_PLUGINS", "testtrace")
    t.clock_offset, t.batch, t.columns = 0, 64, False
    yield t
    t.release()
    t.columns = False


def test_activity_rows_carry_configs_both_ways(tracer: Any) -> None:
    """Rows delivered one by one (``DeviceRecord.config``) and column-wise (``config=(format,
    columns)``, formatted once per distinct tuple) get the same configurations."""
    from kprof_testbackend.tracer import Stream

    got = []
    for columns in (False, True):
        tracer.columns = columns
        s = Stream("s")
        with kprof.profile() as p:
            for d in (1000, 500, 1000, 2000, 1000):
                tracer.launch("k", s, d)
        got.append(by_name_config(p))
        assert len(p.configs) == 3
    assert (
        got[0]
        == got[1]
        == {
            ("k", "grid 1000 workgroup 64"): 3,
            ("k", "grid 500 workgroup 64"): 1,
            ("k", "grid 2000 workgroup 64"): 1,
        }
    )


# -- real OpenCL (PoCL) ---------------------------------------------------------------------------

SOURCE = "__kernel void bump(__global float *x) { x[get_global_id(0)] += 1.0f; }"


@pytest.fixture(scope="module")
def ocl() -> tuple[Any, Any, Any]:
    cl = pytest.importorskip("pyopencl")
    import kprof_opencl

    dev = kprof_opencl.default_device()
    if dev is None:
        pytest.skip("OpenCL finds no device here (pip install pocl-binary-distribution)")
    q = kprof_opencl.profiling_queue(dev)
    bump = cl.Kernel(cl.Program(q.context, SOURCE).build(), "bump")
    buf = cl.Buffer(q.context, cl.mem_flags.READ_WRITE, 4 * 4096)
    bump(q, (64,), None, buf)  # the first launch compiles: not in any test
    q.finish()
    return q, bump, buf


def test_opencl_global_and_local_sizes(path: str, ocl: Any) -> None:
    q, bump, buf = ocl
    with kprof.profile(backends=["opencl"]) as p:
        for _ in range(3):
            bump(q, (4096,), (64,), buf)  # tuples: the compiled launcher's case
            bump(q, (1024,), None, buf)  # no local size
            bump(q, [2048], [32], buf)  # lists: the Python wrapper makes tuples of them
            bump(q, (64, 32), (8, 4), buf)
        q.finish()
    assert by_name_config(p) == {
        ("bump", "global 4096 local 64"): 3,
        ("bump", "global 1024"): 3,
        ("bump", "global 2048 local 32"): 3,
        ("bump", "global 64x32 local 8x4"): 3,
    }
    assert p.configs == [
        "global 4096 local 64",
        "global 1024",
        "global 2048 local 32",
        "global 64x32 local 8x4",
    ]


def test_opencl_the_same_size_objects_again_and_others_between(path: str, ocl: Any) -> None:
    # The compiled launcher reuses its last configuration while the size objects are the same
    # ones: a change of either size, or an equal size in a new object, must still be seen.
    # Another thread's launches between the same objects' (the launcher is shared).
    q, bump, buf = ocl
    g, l32, l64 = (4096,), (32,), (64,)

    def other() -> None:
        bump(q, g, l64, buf)
        bump(q, g, l64, buf)

    with kprof.profile(backends=["opencl"]) as p:
        for _ in range(3):
            bump(q, g, l64, buf)
        t = threading.Thread(target=kprof.propagate(other), name="other")
        t.start()
        t.join()
        bump(q, g, l64, buf)
        bump(q, g, l32, buf)  # the same global size object, another local size
        bump(q, g, None, buf)
        bump(q, tuple([4096]), l64, buf)  # equal, not the same object
        bump(q, tuple([2048]), l64, buf)
        bump(q, g, l64, buf)
        q.finish()
    main = threading.current_thread().name
    assert [(r.config, r.thread) for r in p.kernels] == [
        ("global 4096 local 64", main),
        ("global 4096 local 64", main),
        ("global 4096 local 64", main),
        ("global 4096 local 64", "other"),
        ("global 4096 local 64", "other"),
        ("global 4096 local 64", main),
        ("global 4096 local 32", main),
        ("global 4096", main),
        ("global 4096 local 64", main),
        ("global 2048 local 64", main),
        ("global 4096 local 64", main),
    ]


def test_opencl_configs_from_another_thread(path: str, ocl: Any) -> None:
    q, bump, buf = ocl

    def work() -> None:
        for _ in range(5):
            bump(q, (256,), (16,), buf)

    with kprof.profile(backends=["opencl"]) as p:
        t = threading.Thread(target=kprof.propagate(work))
        t.start()
        t.join()
        q.finish()
    assert by_name_config(p) == {("bump", "global 256 local 16"): 5}


def test_a_file_with_configs_and_memory_but_no_sites_reads_back(
    path: str, testbackends: Any, tdq: Any
) -> None:
    """Configurations and memory, no launch sites: the memory table's own site column is not a
    launch site column."""
    from kprof_testbackend import device

    q = tdq()
    with kprof.profile() as p, q:
        q.launch("k", 1, grid=(4, 1, 1), block=(256, 1, 1))
        kept = device.alloc(64)
    data = storage.dumps(p)
    assert storage.peek_version(data) == 5 and not p.sites
    back = loads(data)
    assert back.configs == [G4] and [(e.kind, e.nbytes) for e in back.memory.events] == [
        ("alloc", 64)
    ]
    kept.free()
