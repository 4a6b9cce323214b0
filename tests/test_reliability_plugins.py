"""Broken plugins are isolated: one warning naming the plugin and its error, the other backends
still profile, ``kprof backends`` shows the error. Plugins load only from installed
distributions: nothing is imported from the working directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from kprof_testbackend.instant import InstantClock, InstantQueue

import kprof

KPROF = str(Path(sys.executable).with_name("kprof"))

RAISES_ON_IMPORT = "raise ImportError('libfoo.so.1: cannot open shared object file')\n"

DESCRIBE_RAISES = """
import kprof

@kprof.plugin.hookimpl
def describe_backend(backend):
    raise OSError("driver version mismatch")
"""

RECORD_RAISES = """
import kprof

QUEUE = object()

@kprof.plugin.hookimpl
def current_queue(backend):
    return QUEUE

@kprof.plugin.hookimpl
def record_timestamp(backend):
    raise RuntimeError("device lost")

@kprof.plugin.hookimpl
def elapsed_time(backend, start, stop):
    return 0
"""


@contextmanager
def caught_warnings() -> Iterator[list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught


def naming(caught: list[warnings.WarningMessage], name: str) -> list[str]:
    return [str(w.message) for w in caught if f"'{name}'" in str(w.message)]


def run(
    *args: str, env: dict[str, str], cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("KPROF_")}
    full.update(env)
    return subprocess.run(list(args), capture_output=True, text=True, env=full, cwd=cwd, timeout=60)


@pytest.fixture
def broken_dist(plugin_dist: Any, fresh_registry: Any, monkeypatch: pytest.MonkeyPatch) -> Path:
    site = plugin_dist(
        "kprof-broken",
        {
            "brokenimp": "kprof_brokenimp",
            "brokendesc": "kprof_brokendesc",
            "brokenrec": "kprof_brokenrec",
        },
        {
            "kprof_brokenimp": RAISES_ON_IMPORT,
            "kprof_brokendesc": DESCRIBE_RAISES,
            "kprof_brokenrec": RECORD_RAISES,
        },
        version="2.0",
    )
    monkeypatch.setenv("KPROF_PLUGINS", "testdev,brokenimp,brokendesc,brokenrec")
    return site


def test_a_plugin_that_fails_to_import_is_isolated(broken_dist: Path, tdq: Any) -> None:
    with caught_warnings() as caught:
        by_name = {b.name: b for b in kprof.backends()}
    [msg] = naming(caught, "brokenimp")
    assert "kprof-broken 2.0" in msg
    assert "ImportError: libfoo.so.1: cannot open shared object file" in msg
    info = by_name["brokenimp"].info()
    assert info.status == "error: ImportError: libfoo.so.1: cannot open shared object file"
    q = tdq()
    with caught_warnings() as caught, kprof.profile() as p, q:
        q.launch("k")
    assert "brokenimp" not in p.backends and "testdev" in p.backends
    assert [k.name for k in p.kernels] == ["k"]
    assert naming(caught, "brokenimp") == []  # warned once, not again


def test_a_plugin_whose_describe_raises_is_isolated(broken_dist: Path) -> None:
    with caught_warnings() as caught:
        infos = {b.name: b.info() for b in kprof.backends()}
        infos = {b.name: b.info() for b in kprof.backends()}  # cached: no second warning
    [msg] = naming(caught, "brokendesc")
    assert "OSError: driver version mismatch" in msg
    assert infos["brokendesc"].status == "error: OSError: driver version mismatch"
    with kprof.profile() as p:
        pass
    assert "brokendesc" not in p.backends


def test_a_hook_raising_on_the_launch_path_is_isolated(broken_dist: Path, tdq: Any) -> None:
    q = tdq()
    calls = []
    step = kprof.kernel(lambda: calls.append(1), name="step")
    with caught_warnings() as caught, kprof.profile() as p, q:
        for _ in range(3):
            step()  # the user's code runs every time
            q.launch("k")
    assert len(calls) == 3
    [msg] = naming(caught, "brokenrec")
    assert "record_timestamp raised RuntimeError: device lost" in msg
    broken = kprof.get_backend("brokenrec")
    assert broken.info().status == "error: record_timestamp raised RuntimeError: device lost"
    # The other backend still profiles everything, the wrapped calls included.
    assert [(k.name, k.backend) for k in p.kernels] == [("step", "testdev"), ("k", "testdev")] * 3


def test_backends_command_shows_the_errors(broken_dist: Path) -> None:
    env = {"PYTHONPATH": str(broken_dist), "KPROF_PLUGINS": "testdev,brokenimp,brokendesc"}
    out = run(KPROF, "backends", "--json", env=env)
    assert out.returncode == 0, out.stderr
    rows = {r["name"]: r for r in json.loads(out.stdout)}
    assert rows["brokenimp"]["status"].startswith("error: ImportError: libfoo.so.1")
    assert rows["brokenimp"]["error"] == "ImportError: libfoo.so.1: cannot open shared object file"
    assert rows["brokendesc"]["error"] == "OSError: driver version mismatch"
    assert rows["testdev"]["status"] == "available"
    out = run(KPROF, "backends", env=env)
    assert out.returncode == 0
    line = next(x for x in out.stdout.splitlines() if x.startswith("brokenimp "))
    assert "error: ImportError: libfoo.so.1" in line and "kprof-broken 2.0" in line
    assert "brokenimp" in out.stderr  # and the warning, once
    assert out.stderr.count("'brokenimp'") == 1


# -- wrong return types and raising hooks, on an in-process backend --------------------------------


class ElapsedStr(InstantClock):
    @kprof.plugin.hookimpl
    def elapsed_time(self, backend: kprof.plugin.Backend, start: Any, stop: Any) -> Any:
        return "12"


class DescribeDict(InstantClock):
    @kprof.plugin.hookimpl
    def describe_backend(self, backend: kprof.plugin.Backend) -> Any:
        return {"status": "available"}


class QueueInfoStr(InstantClock):
    @kprof.plugin.hookimpl
    def queue_info(self, backend: kprof.plugin.Backend, queue: Any) -> Any:
        return "queue 1"


class AlignTuple(InstantClock):
    @kprof.plugin.hookimpl
    def align_clock(self, backend: kprof.plugin.Backend, token: Any, launch_window: Any) -> Any:
        return (token.t, 0)


class DoneRaises(InstantClock):
    @kprof.plugin.hookimpl
    def timestamp_done(self, backend: kprof.plugin.Backend, token: Any) -> Any:
        raise RuntimeError("ECC error")


def profile_with(plugin: InstantClock, testbackends: Any, tdq: Any) -> tuple[Any, list[str]]:
    kprof.register_backend(plugin, "odd")
    q = tdq()
    with caught_warnings() as caught, kprof.profile(backends=["testdev", "odd"]) as p:
        with q, plugin.using(InstantQueue("oq")):
            for _ in range(3):
                kprof.kernel(lambda: q.launch("k"), name="w")()
    return p, naming(caught, "odd")


def test_elapsed_time_of_the_wrong_type(testbackends: Any, tdq: Any) -> None:
    plugin = ElapsedStr()
    p, [msg] = profile_with(plugin, testbackends, tdq)
    assert "elapsed_time returned str '12', expected int nanoseconds" in msg
    odd = [k for k in p.device_ranges + p.kernels if k.backend == "odd"]
    assert len(odd) == 3 and all(k.error for k in odd)
    assert "elapsed_time returned str" in odd[0].error
    assert len([k for k in p.kernels if k.backend == "testdev" and k.error is None]) == 6
    assert "3 device records could not be resolved" in str(p)
    assert not plugin.live


def test_describe_of_the_wrong_type(testbackends: Any) -> None:
    kprof.register_backend(DescribeDict(), "odd")
    with caught_warnings() as caught:
        info = kprof.get_backend("odd").info()
        with kprof.profile() as p:
            pass
    [msg] = naming(caught, "odd")
    assert "describe_backend returned dict, expected kprof.plugin.BackendInfo" in msg
    assert info.status.startswith("error: TypeError: describe_backend returned dict")
    assert "odd" not in p.backends and "testdev" in p.backends


def test_queue_info_of_the_wrong_type(testbackends: Any, tdq: Any) -> None:
    plugin = QueueInfoStr()
    p, [msg] = profile_with(plugin, testbackends, tdq)
    assert "queue_info returned str, expected kprof.plugin.QueueInfo" in msg
    odd = [k for k in p.kernels if k.backend == "odd"]
    assert len(odd) == 3 and all(k.error is None for k in odd)  # still timed
    assert not plugin.live


def test_align_clock_of_the_wrong_type(testbackends: Any, tdq: Any) -> None:
    plugin = AlignTuple()
    p, [msg] = profile_with(plugin, testbackends, tdq)
    assert "align_clock returned tuple, expected kprof.plugin.Alignment" in msg
    clock = next(c for c in p.clocks.values() if c.backend == "odd")
    assert clock.method == "first work on the device assumed to start at its launch"
    odd = [k for k in p.kernels if k.backend == "odd"]
    assert len(odd) == 3 and all(k.start_ns >= k.launch_start_ns for k in odd)


def test_timestamp_done_raising(testbackends: Any, tdq: Any) -> None:
    plugin = DoneRaises()
    p, [msg] = profile_with(plugin, testbackends, tdq)
    assert "timestamp_done raised RuntimeError: ECC error" in msg
    odd = [k for k in p.kernels if k.backend == "odd"]
    assert [k.error is not None for k in odd] == [True, True, True]
    assert "ECC error" in (odd[0].error or "")
    assert not plugin.live  # released even so
    assert len([k for k in p.kernels if k.backend == "testdev" and k.error is None]) == 6


# -- the working directory ---------------------------------------------------------------------------

HIJACK = """
import pathlib
pathlib.Path({marker!r}).write_text("imported from the working directory")
"""


def test_nothing_is_imported_from_the_working_directory(tmp_path: Path) -> None:
    marker = tmp_path / "IMPORTED"
    for mod in ("kprof_opencl", "kprof_testbackend"):
        pkg = tmp_path / mod
        pkg.mkdir()
        (pkg / "__init__.py").write_text(HIJACK.format(marker=str(marker)))
        for sub in ("plugin", "nots"):
            (pkg / f"{sub}.py").write_text(HIJACK.format(marker=str(marker)))
    (tmp_path / "script.py").write_text("print('script ran')\n")
    for cmd in (
        [sys.executable, "-m", "kprof", "backends", "--json"],
        [KPROF, "backends", "--json"],
    ):
        out = run(*cmd, env={}, cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        assert not marker.exists(), f"{cmd} imported a module from the working directory"
        rows = {r["name"]: r for r in json.loads(out.stdout)}
        assert rows["testdev"]["status"] == "available"
    # kprof run: the script's directory goes on sys.path for the script, after plugins load.
    out = run(KPROF, "run", "script.py", env={"KPROF_PLUGINS": "testdev,opencl"}, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "script ran" in out.stdout
    assert not marker.exists()


def test_a_non_str_name_is_kept_by_its_repr(testbackends: Any, tdq: Any) -> None:
    """A plugin's bug (a name that is not a str) costs no record: it is kept under the name's
    repr, which every view, the file and the loader handle as any other name (issue 25
    item 17: it used to be dropped, or to break ``print(p)`` and the saved file)."""
    from kprof_testbackend import plugin

    q = tdq()
    b = kprof.get_backend("testdev")
    with caught_warnings() as caught, kprof.profile() as p, q:
        rec = kprof.plugin.active()
        assert rec is not None
        for _ in range(2):  # a plugin's bug: a name that is not a str
            t0 = kprof.plugin.now()
            start, stop = plugin.record_timestamp(b), plugin.record_timestamp(b)
            rec.launch(
                b,
                kprof.plugin.KERNEL,
                ["not", "a", "name"],
                q,
                t0,  # type: ignore[arg-type]
                kprof.plugin.now(),
                start,
                stop,
            )
        q.launch("fine")
    assert not [w for w in caught if "dropped" in str(w.message)]
    assert [k.name for k in p.kernels] == ["['not', 'a', 'name']"] * 2 + ["fine"]
    assert not p.unresolved and rec.dropped_bad == 0
    assert not plugin.live
