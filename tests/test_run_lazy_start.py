"""`kprof run` imports no vendor library the script does not, and starts a backend when the
script imports its library (``kprof_core.host.imports``: a post-import hook)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import kprof
from kprof_core.host import imports

#: Top-level names of the vendor libraries (and what they pull in) the bundled backends use.
VENDOR = ("pyopencl", "cupy", "cupy_backends", "hip", "rocm", "cupti", "cuda", "numpy")


def kprof_run(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("KPROF_")}
    return subprocess.run(
        [sys.executable, "-m", "kprof", "run", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**base, **env},
        cwd=cwd,
    )


# -- the watcher ---------------------------------------------------------------------------------


@pytest.fixture
def pkg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder on sys.path for throwaway modules, forgotten afterwards. The watches kprof
    made at its import (``kprof.on_import``: a vendor library not imported yet) are set
    aside meanwhile, so that the test's are the only ones, whatever ran before it."""
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(imports, "_watches", {})
    had_finder = imports._finder in sys.meta_path
    if had_finder:
        sys.meta_path.remove(imports._finder)
    before = set(sys.modules)
    try:
        yield tmp_path
        assert not imports.watching()
    finally:
        for name in set(sys.modules) - before:
            del sys.modules[name]
        if imports._finder in sys.meta_path:
            sys.meta_path.remove(imports._finder)
        if had_finder:
            sys.meta_path.insert(0, imports._finder)


def test_the_callback_runs_once_after_the_module_ran_to_its_end(pkg: Path) -> None:
    (pkg / "vendor_a").mkdir()
    (pkg / "vendor_a" / "__init__.py").write_text("DONE = True\n")
    (pkg / "vendor_b.py").write_text("")
    seen: list[tuple[str, bool]] = []

    def cb(name: str) -> None:
        seen.append((name, sys.modules[name].DONE))

    imports.watch(["vendor_a", "vendor_b"], cb)
    assert imports.watching()
    import vendor_a  # type: ignore[import-not-found]

    assert seen == [("vendor_a", True)]
    assert not imports.watching()  # one-shot: its other names are forgotten with it
    import vendor_b  # type: ignore[import-not-found]  # noqa: F401

    assert seen == [("vendor_a", True)]
    # Nothing of the watch stays on the module.
    assert type(vendor_a.__loader__).__module__ != imports.__name__
    assert vendor_a.__spec__.loader is vendor_a.__loader__


def test_a_module_already_imported_calls_at_once_and_installs_nothing(pkg: Path) -> None:
    seen: list[str] = []
    imports.watch(["json", "nonexistent_xyz"], seen.append)
    assert seen == ["json"] and not imports.watching()


def test_a_failed_import_does_not_count_and_a_raising_callback_only_warns(pkg: Path) -> None:
    (pkg / "vendor_c.py").write_text("import os\nif os.environ.get('VENDOR_C_FAIL'):\n    1 / 0\n")
    calls: list[str] = []

    def cb(name: str) -> None:
        calls.append(name)
        raise RuntimeError("kprof's own trouble")

    imports.watch(["vendor_c"], cb)
    os.environ["VENDOR_C_FAIL"] = "1"
    try:
        with pytest.raises(ZeroDivisionError):
            import vendor_c  # type: ignore[import-not-found]
    finally:
        del os.environ["VENDOR_C_FAIL"]
    assert calls == [] and imports.watching()
    with pytest.warns(RuntimeWarning, match="imported vendor_c failed: RuntimeError"):
        import vendor_c  # type: ignore[import-not-found]  # noqa: F401
    assert calls == ["vendor_c"] and "vendor_c" in sys.modules


def test_unwatch_takes_the_finder_off_sys_meta_path(pkg: Path) -> None:
    seen: list[str] = []
    imports.watch(["vendor_d"], seen.append)
    imports.unwatch(seen.append)
    assert not imports.watching()
    (pkg / "vendor_d.py").write_text("")
    import vendor_d  # type: ignore[import-not-found]  # noqa: F401

    assert seen == []


# -- kprof run -----------------------------------------------------------------------------------

_REPORT_MODULES = """
import atexit, json, sys
VENDOR = {vendor!r}
def mods():
    return sorted({{m.split('.')[0] for m in sys.modules}} & set(VENDOR))
watched = any(type(f).__module__ == 'kprof_core.host.imports' for f in sys.meta_path)
at_start = mods()
def at_exit():  # after kprof run's report: the whole process
    with open({out!r}, 'w') as f:
        json.dump({{'start': at_start, 'exit': mods(), 'watched': watched}}, f)
atexit.register(at_exit)
"""


def test_a_script_importing_nothing_loads_no_vendor_module(tmp_path: Path) -> None:
    out = tmp_path / "mods.json"
    script = tmp_path / "plain.py"
    script.write_text(_REPORT_MODULES.format(vendor=VENDOR, out=str(out)))
    r = kprof_run(str(script), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    got = json.loads(out.read_text())
    assert got == {"start": [], "exit": [], "watched": True}, got


_LATE_OPENCL = """
import kprof
with kprof.range("before any GPU library"):
    pass
import pyopencl as cl  # the backend starts here
import kprof_opencl
ctx = cl.Context([kprof_opencl.default_device()])
q = cl.CommandQueue(ctx)
prg = cl.Program(ctx, "__kernel void late(__global float *x){{ x[get_global_id(0)] += 1.0f; }}").build()
buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 256)
for _ in range({n}):
    prg.late(q, (64,), None, buf)
with kprof.range("after"):
    prg.late(q, (64,), None, buf)
q.finish()
"""


@pytest.fixture(scope="module")
def opencl_device() -> None:
    pytest.importorskip("pyopencl")
    import kprof_opencl

    if kprof_opencl.default_device() is None:
        pytest.skip("OpenCL finds no device here (pip install pocl-binary-distribution)")


@pytest.mark.parametrize("pure", ["0", "1"])
def test_a_script_importing_pyopencl_later_gets_its_launches_profiled(
    opencl_device: None, tmp_path: Path, pure: str
) -> None:
    script = tmp_path / "late.py"
    script.write_text(_LATE_OPENCL.format(n=7))
    saved = tmp_path / "late.kprof"
    r = kprof_run("-o", str(saved), str(script), cwd=tmp_path, KPROF_PURE_PYTHON=pure)
    assert r.returncode == 0, r.stderr
    p = kprof.load(saved)
    assert "opencl" in p.backends
    late = [k for k in p.kernels if k.name == "late"]
    assert len(late) == 8, late
    assert all(k.error is None and not k.host_timed and not k.approximate for k in late)
    assert [r.name for r in p.ranges if r.kind == "range"] == ["before any GPU library", "after"]
    # The range after the import has its device time too (the backend is the profile's now).
    [after] = [d for d in p.device_ranges if d.name == "after"]
    assert after.backend == "opencl" and after.error is None


def test_a_backend_wanting_the_programs_start_is_said_and_named_starts_it(
    opencl_device: None, tmp_path: Path
) -> None:
    from kprof_opencl import hook

    if hook.module() is None or hook.preload_library() is None:
        pytest.skip("kprof's interposer (_clpreload) is not built")
    script = tmp_path / "late.py"
    script.write_text(_LATE_OPENCL.format(n=1))
    # KPROF_OPENCL_HOOK=preload refuses the table hook: the interposer must be preloaded.
    env = {hook.ENV_HOOK: "preload", "LD_PRELOAD": "", "PYTHONWARNINGS": "ignore"}
    lazy = kprof_run(str(script), cwd=tmp_path, **env)
    assert lazy.returncode == 0, lazy.stderr
    assert "kprof run started backend 'opencl' when the program imported pyopencl" in lazy.stdout
    assert "`kprof run --backends opencl ...` starts it with the program" in lazy.stdout
    named = kprof_run("--backends", "opencl", str(script), cwd=tmp_path, **env)
    assert named.returncode == 0, named.stderr
    assert "kprof run started backend" not in named.stdout


# -- kprof.profile() in a program: the same rule -------------------------------------------------

PROFILE_IN_A_PROGRAM = """
import json, sys
VENDOR = {vendor!r}
import kprof
with kprof.profile(backends=["testdev"]) as named:
    pass
after_named = sorted(m for m in VENDOR if m in sys.modules)
with kprof.profile() as p:
    before_import = sorted(m for m in VENDOR if m in sys.modules)
    started_before = sorted(p.backends)
    import pyopencl as cl
    import kprof_opencl
    q = kprof_opencl.profiling_queue(kprof_opencl.default_device())
    prg = cl.Program(q.context, "__kernel void k(__global float *a) {{ a[0] = 1; }}").build()
    buf = cl.Buffer(q.context, cl.mem_flags.READ_WRITE, 4)
    prg.k(q, (1,), None, buf)
    q.finish()
print(json.dumps({{
    "after_named": after_named,
    "before_import": before_import,
    "started_before": started_before,
    "started": sorted(p.backends),
    "kernels": [k.name for k in p.kernels if k.backend == "opencl"],
    "watching": __import__("kprof_core.host.imports", fromlist=["x"]).watching(),
}}))
"""


@pytest.mark.parametrize("pure", [False, True])
def test_profile_imports_no_vendor_library_and_starts_one_at_its_import(
    tmp_path: Path, pure: bool
) -> None:
    pytest.importorskip("pyopencl")
    base = {k: v for k, v in os.environ.items() if not k.startswith("KPROF_")}
    if pure:
        base["KPROF_PURE_PYTHON"] = "1"
    r = subprocess.run(
        [sys.executable, "-c", PROFILE_IN_A_PROGRAM.format(vendor=VENDOR)],
        capture_output=True,
        text=True,
        timeout=300,
        env=base,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    # A named backend describes that backend only; the default describes none whose library
    # the program has not imported (before: hip-python, cupy_backends and PyOpenCL).
    assert out["after_named"] == [] and out["before_import"] == []
    assert "opencl" not in out["started_before"] and "hip" not in out["started_before"]
    # The import inside the profile started OpenCL: its kernel after the import is recorded.
    assert "opencl" in out["started"] and out["kernels"] == ["k"]
    assert not out["watching"]  # the profile's end left no finder on sys.meta_path
