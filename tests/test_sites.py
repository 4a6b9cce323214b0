"""Launch sites on real PyOpenCL launches (PoCL's CPU device): each record keeps the line of
the user's code behind it, on both recorder paths, through nesting and ``.kprof`` files."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hostile import with_column

import kprof
import kprof_core
from kprof_core.data.sites import Site
from kprof_core.io import storage
from kprof_core.low_level import native
from kprof_core.low_level.layout import ENTRY_FIELDS, SITE
from kprof_core.recording import sites as site_mod
from kprof_core.result import loads

cl = pytest.importorskip("pyopencl")
cla = pytest.importorskip("pyopencl.array")

import kprof_opencl  # noqa: E402

HERE = str(Path(__file__))
SOURCE = "__kernel void bump(__global float *x) { x[get_global_id(0)] += 1.0f; }"


@pytest.fixture(scope="module")
def ocl() -> tuple[Any, Any, Any]:
    dev = kprof_opencl.default_device()
    if dev is None:
        pytest.skip("OpenCL finds no device here (pip install pocl-binary-distribution)")
    q = kprof_opencl.profiling_queue(dev)
    bump = cl.Kernel(cl.Program(q.context, SOURCE).build(), "bump")
    buf = cl.Buffer(q.context, cl.mem_flags.READ_WRITE, 4 * 64)
    bump(q, (64,), None, buf)  # the first launch compiles: not in any test
    q.finish()
    return q, bump, buf


@pytest.fixture(params=["compiled", "pure"])
def path(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "compiled" and native.compiled() is None:
        pytest.skip("the compiled recorder is not built here")
    native.use_compiled(request.param == "compiled")
    try:
        yield request.param
    finally:
        native.use_compiled(True)


def line_of(fn: Any, text: str) -> int:
    """The line of ``fn``'s source holding ``text`` (so edits above do not break tests)."""
    import inspect

    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, s in enumerate(lines) if text in s)


def user_step(q: Any, kernel: Any, buf: Any) -> None:
    kernel(q, (64,), None, buf)  # the kernel's site
    cl.enqueue_copy(q, np.empty(64, np.float32), buf)  # the copy's site


def kernel_sites(p: kprof.Profile) -> list[Site | None]:
    return [r.site for r in p.kernels]


def test_the_entry_format_carries_the_site() -> None:
    assert ENTRY_FIELDS[SITE] == "site"


def test_a_pyopencl_launch_is_the_users_line_not_pyopencls(path: str, ocl: Any) -> None:
    q, kernel, buf = ocl
    with kprof.profile(sites=True) as p:
        for _ in range(3):
            user_step(q, kernel, buf)
    q.finish()
    k_line = line_of(user_step, "the kernel's site")
    c_line = line_of(user_step, "the copy's site")
    want_k, want_c = Site(HERE, k_line, "user_step"), Site(HERE, c_line, "user_step")
    # Two distinct lines, each interned once, however many launches and f_lasti there were.
    assert p.sites == sorted([want_k, want_c])
    assert kernel_sites(p) == [want_k, want_c] * 3
    assert [r.kind for r in p.kernels] == ["kernel", "copy"] * 3
    # Not a frame of PyOpenCL's or kprof's own packages (by their directories: the checkout
    # itself may sit in a folder named kprof, as `git clone` makes it).
    libraries = [f"{Path(m.__file__).parent}/" for m in (cl, kprof, kprof_core, kprof_opencl)]
    assert not [s for s in p.sites if any(s.file.startswith(d) for d in libraries)]


def test_pyopencl_array_operations_are_the_users_line(path: str, ocl: Any) -> None:
    q, _k, _b = ocl
    a = cla.zeros(q, 64, np.float32)
    a + 1  # compiles the elementwise kernel before the profile
    q.finish()
    with kprof.profile(sites=True) as p:
        b = a + 1  # array site
    q.finish()
    assert b.shape == (64,)
    line = line_of(test_pyopencl_array_operations_are_the_users_line, "# array site")
    kernels = [r for r in p.kernels if r.kind == "kernel"]
    assert kernels and {r.site for r in kernels} == {
        Site(HERE, line, "test_pyopencl_array_operations_are_the_users_line")
    }


def _wrapper_module(name: str) -> types.ModuleType:
    """A small "library" of the user's that launches for its caller."""
    mod = types.ModuleType(name)
    mod.__file__ = f"/lib/{name}.py"
    code = compile(
        "def launch(q, kernel, buf):\n    kernel(q, (64,), None, buf)\n", mod.__file__, "exec"
    )
    exec(code, mod.__dict__)
    return mod


def caller(lib: Any, q: Any, kernel: Any, buf: Any) -> None:
    lib.launch(q, kernel, buf)  # calls into the wrapper


@pytest.mark.parametrize("skip", [False, True])
def test_custom_prefixes_skip_a_wrapper_library(
    path: str, ocl: Any, skip: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    q, kernel, buf = ocl
    lib = _wrapper_module("mywrap.gpu")
    monkeypatch.setitem(sys.modules, "mywrap.gpu", lib)
    with kprof.profile(sites=True, site_skip=["mywrap"] if skip else []) as p:
        caller(lib, q, kernel, buf)
    q.finish()
    if skip:  # its frames are not the user's: the line that called into it is the site
        want = Site(HERE, line_of(caller, "calls into the wrapper"), "caller")
    else:
        want = Site("/lib/mywrap.gpu.py", 2, "launch")
    assert kernel_sites(p) == [want]


def through_each(libs: Any, q: Any, kernel: Any, buf: Any) -> None:
    for lib in libs:
        lib.launch(q, kernel, buf)  # one call, two libraries


def test_the_same_call_through_other_frames_is_walked_again(
    path: str, ocl: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The same running frame, the same instruction, the same depth, one frame between it
    # and kprof a skipped library's or the user's: the catcher's kept walk must not answer
    # for the other.
    q, kernel, buf = ocl
    skipped, mine = _wrapper_module("mywrap.gpu"), _wrapper_module("mine.gpu")
    monkeypatch.setitem(sys.modules, "mywrap.gpu", skipped)
    monkeypatch.setitem(sys.modules, "mine.gpu", mine)
    with kprof.profile(sites=True, site_skip=["mywrap"]) as p:
        through_each([skipped, mine, mine, skipped, skipped, mine], q, kernel, buf)
    q.finish()
    loop = Site(HERE, line_of(through_each, "one call, two libraries"), "through_each")
    theirs = Site("/lib/mine.gpu.py", 2, "launch")
    assert kernel_sites(p) == [loop, theirs, theirs, loop, loop, theirs]


def launch_from_a(q: Any, kernel: Any, buf: Any, n: int) -> None:
    for _ in range(n):
        kernel(q, (64,), None, buf)


def launch_from_b(q: Any, kernel: Any, buf: Any, n: int) -> None:
    for _ in range(n):
        kernel(q, (64,), None, buf)


def test_threads_launching_from_two_lines_each_keep_their_own(path: str, ocl: Any) -> None:
    import threading

    q, kernel, buf = ocl
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible, mid-walk too
    try:
        with kprof.profile(sites=True) as p:
            threads = [
                threading.Thread(target=kprof.propagate(fn), args=(q, kernel, buf, 300), name=name)
                for name, fn in (("A", launch_from_a), ("B", launch_from_b))
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        q.finish()
    finally:
        sys.setswitchinterval(old)
    got = [(r.thread, r.site.function if r.site else None) for r in p.kernels]
    assert len(got) == 600
    assert set(got) == {("A", "launch_from_a"), ("B", "launch_from_b")}


def test_prefixes_match_whole_module_names() -> None:
    skip = site_mod.Skipper(["mywrap"])

    def frame_of(module: str) -> Any:
        return types.SimpleNamespace(
            f_globals={"__name__": module}, f_code=types.SimpleNamespace(co_filename="x.py")
        )

    assert skip(frame_of("mywrap")) and skip(frame_of("mywrap.gpu"))
    assert not skip(frame_of("mywrapper")) and not skip(frame_of("__main__"))
    assert skip(frame_of("pyopencl.array")) and skip(frame_of("json.decoder"))
    assert skip(frame_of("kprof_core.recording.recorder"))


def test_ranges_and_kprof_kernel_keep_their_sites(path: str, ocl: Any) -> None:
    q, kernel, buf = ocl

    mine = kprof.kernel(lambda: None, "mine")

    def body() -> None:
        with kprof.range("outer"):  # range site
            kernel(q, (64,), None, buf)  # inner kernel
        mine()  # kprof.kernel site

    with kprof.profile(sites=True) as p:
        body()
    q.finish()
    site = {
        t: Site(
            HERE, line_of(body, t), "test_ranges_and_kprof_kernel_keep_their_sites.<locals>.body"
        )
        for t in ("range site", "inner kernel", "kprof.kernel site")
    }
    assert [(r.name, r.site) for r in p.ranges] == [("outer", site["range site"])]
    dev = {(r.name, r.kind): r.site for r in p.device_ranges + p.kernels}
    assert dev[("outer", "range")] == site["range site"]
    assert dev[("bump", "kernel")] == site["inner kernel"]
    assert dev[("mine", "kernel")] == site["kprof.kernel site"]


def test_sites_off_records_none(path: str, ocl: Any) -> None:
    q, kernel, buf = ocl
    with kprof.profile(sites=False) as p:
        user_step(q, kernel, buf)
    q.finish()
    assert p.sites == [] and kernel_sites(p) == [None, None]
    assert set(p.table.site) == {-1}


def test_both_paths_record_the_same_sites(ocl: Any) -> None:
    if native.compiled() is None:
        pytest.skip("the compiled recorder is not built here")
    q, kernel, buf = ocl
    got = []
    for compiled in (True, False):
        native.use_compiled(compiled)
        try:
            with kprof.profile(sites=True) as p:
                for _ in range(2):
                    user_step(q, kernel, buf)
            q.finish()
        finally:
            native.use_compiled(True)
        got.append((p.sites, list(p.table.site)))
    assert got[0] == got[1]


def test_a_nested_profile_hands_its_sites_to_the_outer_one(path: str, ocl: Any) -> None:
    q, kernel, buf = ocl
    with kprof.profile(sites=True) as outer:
        with kprof.profile(sites=True) as inner:
            user_step(q, kernel, buf)
        kernel(q, (64,), None, buf)  # outer only
    q.finish()
    outer_line = line_of(test_a_nested_profile_hands_its_sites_to_the_outer_one, "# outer only")
    fn = "test_a_nested_profile_hands_its_sites_to_the_outer_one"
    assert kernel_sites(inner) == [
        Site(HERE, line_of(user_step, "the kernel's site"), "user_step"),
        Site(HERE, line_of(user_step, "the copy's site"), "user_step"),
    ]
    assert sorted(map(str, kernel_sites(outer))) == sorted(
        map(str, [*kernel_sites(inner), Site(HERE, outer_line, fn)])
    )


def test_sites_survive_a_save_and_load(path: str, ocl: Any, tmp_path: Path) -> None:
    q, kernel, buf = ocl
    with kprof.profile(sites=True) as p:
        user_step(q, kernel, buf)
        with kprof.range("r"):
            pass
    q.finish()
    p.save(tmp_path / "s.kprof")
    assert storage.peek_version((tmp_path / "s.kprof").read_bytes()) == 5
    back = kprof.load(tmp_path / "s.kprof")
    assert back.sites == p.sites and len(p.sites) == 3
    assert list(back.table.site) == list(p.table.site)
    assert list(back.host.site) == list(p.host.site)
    assert kernel_sites(back) == kernel_sites(p)
    assert [r.site for r in back.ranges] == [r.site for r in p.ranges]


def test_a_profile_without_sites_loads_back_without_sites(path: str, ocl: Any) -> None:
    q, kernel, buf = ocl
    with kprof.profile(sites=False) as p:
        user_step(q, kernel, buf)
    q.finish()
    data = storage.dumps(p)
    # Version 5 for the kernel's launch configuration: its site columns say "none" (-1).
    assert storage.peek_version(data) == 5
    back = loads(data)
    assert back.sites == [] and set(back.table.site) == {-1}
    assert back.configs == p.configs == ["global 64"]


def test_a_damaged_site_column_is_refused(built_file: bytes) -> None:
    bad = with_column(built_file, "device", "site", [0, 1, 5, -1])
    with pytest.raises(kprof.ProfileFileError, match=r"device\.site holds a value outside -1\.\.1"):
        loads(bad)


@pytest.fixture
def built_file() -> bytes:
    data = storage.dumps(built())
    assert storage.peek_version(data) == 5
    assert kernel_sites(loads(data)) == kernel_sites(built())
    return data


def test_version_1_files_load_without_sites() -> None:
    back = kprof.load(Path(__file__).parent / "data" / "v1-zlib.kprof")
    assert back.sites == [] and set(back.table.site) == {-1} and set(back.host.site) == {-1}
    assert all(r.site is None for r in back.kernels)


def built() -> kprof.Profile:
    """A profile with known sites and durations (no device needed)."""
    from kprof_core.data.records import KERNEL, PLACED, QueueRecord, ThreadRecord

    p = kprof.Profile(backends=["testdev"])
    p.names = ["a", "b"]
    p.queues = [QueueRecord("testdev", "dev", "queue 1", "testdev:0")]
    p.threads = [ThreadRecord(1, "MainThread")]
    p.sites = [Site("/src/x.py", 1, "f"), Site("/src/y.py", 2, "g")]
    t0 = 1_000_000
    for k, (name, dur, site) in enumerate([(0, 100, 0), (1, 300, 1), (0, 50, 1), (0, 7, -1)]):
        s = t0 + 1000 * k
        p.table.append(name, KERNEL, 0, 0, s, s + 10, s + 20, dur, -1, PLACED, site)
    p.host.append(0, 0, 0, t0, t0 + 5000, 1)  # a host range ended at y.py:2
    p.start_ns, p.end_ns = t0, t0 + 10_000
    return p


def test_summary_by_line_sums_device_time_per_site() -> None:
    rows = built().summary(by="line")
    assert [(r.stats.name, r.stats.calls, r.stats.total_ns) for r in rows] == [
        ("y.py:2 g", 2, 350),
        ("x.py:1 f", 1, 100),
        ("(site unknown)", 1, 7),
    ]
    assert [r.site for r in rows] == [Site("/src/y.py", 2, "g"), Site("/src/x.py", 1, "f"), None]
    assert [(k.name, k.total_ns) for k in rows[0].kernels] == [("b", 300), ("a", 50)]
    assert rows[0].stats.percent == pytest.approx(3.5)  # of the 10 µs span
    # The same device time as the per-name summary, split another way.
    assert sum(r.stats.total_ns for r in rows) == sum(r.total_ns for r in built().summary().device)
    with pytest.raises(ValueError, match='"name", "line", "stack"'):
        built().summary(by="file")  # type: ignore[call-overload]


def test_the_report_shows_device_time_by_line() -> None:
    text = built().report()
    section = text[text.index("Device time by line:") :].splitlines()
    assert section[3].endswith("y.py:2 g  (b, a)") and "350 ns" in section[3]
    assert section[4].endswith("x.py:1 f  (a)")
    assert section[5].endswith("(site unknown)  (a)")
    assert "Device time by line" not in kprof.Profile().report()


def test_exports_carry_the_site(tmp_path: Path) -> None:
    import csv
    import json

    p = built()
    text = p.to_csv()
    assert text is not None
    rows = list(csv.DictReader(text.splitlines()))
    dev = [r for r in rows if r["record"] == "device"]
    assert [(r["file"], r["line"], r["function"]) for r in dev] == [
        ("/src/x.py", "1", "f"),
        ("/src/y.py", "2", "g"),
        ("/src/y.py", "2", "g"),
        ("", "", ""),
    ]
    data = p.to_json()
    assert data is not None
    assert [d["line"] for d in data["device"]] == [1, 2, 2, None]
    assert [(h["file"], h["line"]) for h in data["host"]] == [("/src/y.py", 2)]
    p.export_chrome_trace(tmp_path / "t.json")
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    trace = json.loads((tmp_path / "t.json").read_text())["otherData"]

    def site(sid: int | None) -> str | None:  # the last frame of stack ``sid``: its site
        return None if sid is None else trace["frames"][trace["stacks"][sid][-1]]["name"]

    launches = [e for e in events if e.get("cat") == "launch" and e["ph"] == "X"]
    assert [site(e["args"].get("stack")) for e in launches] == [
        "x.py:1 f", "y.py:2 g", "y.py:2 g", None
    ]  # fmt: skip
    assert [site(e["args"]["stack"]) for e in events if e.get("cat") == "range"] == ["y.py:2 g"]


def test_sites_are_off_by_default_and_on_with_the_environment(
    ocl: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    q, kernel, buf = ocl
    monkeypatch.delenv("KPROF_SITES", raising=False)
    with kprof.profile() as off:
        user_step(q, kernel, buf)
    monkeypatch.setenv("KPROF_SITES", "1")
    with kprof.profile() as on:
        user_step(q, kernel, buf)
    q.finish()
    assert kernel_sites(off) == [None, None]
    assert [s.function for s in kernel_sites(on) if s] == ["user_step", "user_step"]
    with pytest.raises(TypeError, match="module prefixes"):
        kprof.profile(site_skip=[""])


def test_every_summary_prints_as_a_table(path: str, ocl: Any) -> None:
    q, kernel, buf = ocl
    with kprof.profile(sites=True) as p:
        for _ in range(3):
            user_step(q, kernel, buf)
    q.finish()
    k_line = line_of(user_step, "the kernel's site")
    by_line = p.summary(by="line")
    text = str(by_line)
    assert text.splitlines()[0] == "Device time by line:"
    assert f"test_sites.py:{k_line} user_step  (bump)" in text
    assert repr(by_line) == "<SiteSummary: 2 rows; print it for the table>"
    assert by_line[0].stats.calls == 3  # still the list of SiteRow it was
    assert "<pre>" in by_line._repr_html_()
    by_config = str(p.summary(by="config")).splitlines()
    assert by_config[0] == "Host-side activity:"
    assert "Device-side activity by config:" in by_config
    assert any(line.endswith("  global 64") for line in by_config)
    assert str(p.summary()).splitlines()[0] == "Host-side activity:"
    assert "dataclass" not in text and "SummaryRow(" not in str(p.summary(by="config"))
