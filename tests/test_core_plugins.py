"""Plugins: discovery through entry points, environment variables, ``kprof backends``, and
what importing and profiling cost in plugin machinery (no vendor import, no pluggy dispatch)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import kprof
from kprof_core.host.discovery import registry

KPROF = str(Path(sys.executable).with_name("kprof"))
VENDOR_MODULES = ("pyopencl", "cupy", "cupy_backends", "hip", "cuda", "mpi4py", "nvtx")
JSON_KEYS = {"name", "status", "timestamps", "devices", "library", "library_version", "error"}


def run(
    *args: str,
    env: dict[str, str] | None = None,
    cwd: str | Path | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("KPROF_")}
    full_env.update(env or {})
    return subprocess.run(
        list(args), capture_output=True, text=True, env=full_env, cwd=cwd, timeout=timeout
    )


def test_discovers_the_installed_test_distribution(fresh_registry: Any) -> None:
    by_name = {b.name: b for b in kprof.backends()}
    assert {"testdev", "testnots"} <= set(by_name)
    for name in ("testdev", "testnots"):
        b = by_name[name]
        assert (b.distribution, b.version) == ("kprof-testbackend", "1.0.0")
        assert b.info().status == "available"
        assert kprof.get_backend(name) is b
    assert by_name["testdev"].has_timestamps
    assert not by_name["testnots"].has_timestamps
    assert by_name["testdev"].info().timestamps and not by_name["testnots"].info().timestamps


def test_disable_autoload(fresh_registry: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KPROF_DISABLE_PLUGIN_AUTOLOAD", "1")
    assert kprof.backends() == []
    with kprof.profile() as p:
        pass
    assert p.backends == [] and p.kernels == []


def test_plugins_env_picks(fresh_registry: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KPROF_PLUGINS", "testnots")
    assert [b.name for b in kprof.backends()] == ["testnots"]


@pytest.mark.parametrize("value", ["testdev,nosuch", "test dev!"])
def test_plugins_env_errors_list_the_installed_backends(
    fresh_registry: Any, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("KPROF_PLUGINS", value)
    with pytest.raises(kprof.KprofError, match="KPROF_PLUGINS") as ei:
        kprof.backends()
    assert "testdev" in str(ei.value) and "testnots" in str(ei.value)


def test_import_kprof_imports_no_vendor_library_and_no_plugin() -> None:
    code = (
        "import sys, kprof; "
        f"print([m for m in {VENDOR_MODULES!r} + ('kprof_opencl', 'kprof_cuda', 'kprof_hip', "
        "'kprof_testbackend') if m in sys.modules])"
    )
    out = run(sys.executable, "-c", code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_backends_command_lists_every_backend() -> None:
    out = run(KPROF, "backends", env={"KPROF_PLUGINS": "testdev,testnots"})
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["Backend", "Plugin", "Library", "Devices", "Timestamps", "Status"]
    testdev = next(line for line in lines if line.startswith("testdev "))
    testnots = next(line for line in lines if line.startswith("testnots "))
    assert "kprof-testbackend 1.0.0" in testdev and "device" in testdev
    assert testdev.rstrip().endswith("available")
    assert "host fallback" in testnots and testnots.rstrip().endswith("available")


def test_backends_json() -> None:
    out = run(KPROF, "backends", "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert all(JSON_KEYS <= set(r) for r in rows)
    by_name = {r["name"]: r for r in rows}
    assert {"opencl", "cuda", "hip", "testdev", "testnots"} <= set(by_name)
    assert by_name["testdev"]["status"] == "available"
    assert by_name["testdev"]["timestamps"] == "device"
    assert by_name["testdev"]["devices"] == ["testdev 0"]
    assert by_name["testdev"]["library"] == "kprof-testbackend"
    assert by_name["testdev"]["library_version"] == "1.0.0"
    assert by_name["testdev"]["error"] is None
    assert by_name["testnots"]["timestamps"] == "host fallback"


def test_no_pluggy_dispatch_while_profiling(testbackends: Any, tdq: Any) -> None:
    q = tdq()
    kprof.backends()  # load first: loading registers plugins, which is not a hook call
    calls: list[str] = []
    undo = registry.pm.add_hookcall_monitoring(
        lambda name, impls, kwargs: calls.append(name), lambda *args: None
    )
    try:
        with kprof.profile() as p, q:
            for _ in range(1000):
                q.launch("k")
            with kprof.range("r"):
                q.launch("k")
    finally:
        undo()
    assert len(p.kernels) == 1001
    assert calls == []
