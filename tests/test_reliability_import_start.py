"""A backend started by the program's import of its vendor library (``capture_modules``) is
bounded in time as an eager start is: a ``describe_backend`` or ``install_capture`` that hangs
costs the program's ``import`` at most ``KPROF_DISCOVERY_TIMEOUT``, and the backend is
disabled with the reason; one that imports a module the program is importing at that moment
is disabled at once, saying so; the vendor module itself is importable from the plugin's
thread. Each case runs in a subprocess: a hang must be real, and it outlives the test."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from test_reliability_plugins import KPROF, run

#: The vendor library: a package whose submodule ``sub`` its ``__init__`` does not import.
VENDOR = {"__init__.py": "LOADED = True\n", "sub.py": "import vendorpkg\nSUB = True\n"}

HEAD = """
import threading, kprof

gate = threading.Event()     # the program lets a hung install end
removed = threading.Event()  # remove_capture ran

@kprof.plugin.hookimpl
def capture_modules(backend):
    return ["vendorpkg"]

@kprof.plugin.hookimpl
def remove_capture(backend):
    removed.set()
"""

DESCRIBE_HANGS = (
    HEAD
    + """
@kprof.plugin.hookimpl
def describe_backend(backend):
    threading.Event().wait()
"""
)

INSTALL_HANGS = (
    HEAD
    + """
@kprof.plugin.hookimpl
def install_capture(backend):
    gate.wait()
"""
)

#: Imports the watched module from its thread, as a real plugin does (``import pyopencl``).
IMPORTS_THE_MODULE = (
    HEAD
    + """
@kprof.plugin.hookimpl
def describe_backend(backend):
    import vendorpkg
    return kprof.plugin.BackendInfo(library="vendorpkg", detail=str(vendorpkg.LOADED))

@kprof.plugin.hookimpl
def install_capture(backend):
    import vendorpkg
"""
)

#: Imports the submodule the program's own first import is loading.
IMPORTS_THE_SUBMODULE = (
    HEAD
    + """
@kprof.plugin.hookimpl
def describe_backend(backend):
    import vendorpkg.sub
    return kprof.plugin.BackendInfo()
"""
)

PROGRAM = """
import sys, kprof
with kprof.profile() as p:
    import {module}
    print("imported", flush=True)
    plugin = sys.modules.get("kprof_starter")
    if plugin is not None and {release}:
        plugin.gate.set()
        print("removed", plugin.removed.wait(60), flush=True)
print("backends", sorted(p.backends))
print("status", [b.info().status for b in kprof.backends() if b.name == "starter"][0])
"""

SCRIPT = """
import {module}
print("imported", flush=True)
"""


@pytest.fixture
def starter(plugin_dist: Any, fresh_registry: Any) -> Any:
    def make(source: str) -> Path:
        site = plugin_dist("kprof-starter", {"starter": "kprof_starter"}, {"kprof_starter": source})
        pkg = site / "vendorpkg"
        pkg.mkdir()
        for name, text in VENDOR.items():
            (pkg / name).write_text(text)
        return site

    return make


def env_for(site: Path, timeout: str) -> dict[str, str]:
    return {
        "PYTHONPATH": str(site),
        "KPROF_PLUGINS": "testdev,starter",
        "KPROF_DISCOVERY_TIMEOUT": timeout,
    }


def program(module: str = "vendorpkg", release: bool = False) -> str:
    return textwrap.dedent(PROGRAM.format(module=module, release=release))


@pytest.mark.parametrize("module", ["vendorpkg", "vendorpkg.sub"])
def test_a_describe_that_hangs_costs_the_import_the_bound(starter: Any, module: str) -> None:
    site = starter(DESCRIBE_HANGS)
    out = run(sys.executable, "-c", program(module), env=env_for(site, "0.5"))
    assert out.returncode == 0, out.stderr
    assert "imported" in out.stdout
    assert "backends ['testdev']" in out.stdout
    assert "status error: did not answer in 0.5 s" in out.stdout
    assert "'starter'" in out.stderr and "did not answer in 0.5 s" in out.stderr


def test_an_install_that_hangs_costs_the_import_the_bound_and_is_undone_later(
    starter: Any,
) -> None:
    site = starter(INSTALL_HANGS)
    out = run(sys.executable, "-c", program(release=True), env=env_for(site, "0.5"))
    assert out.returncode == 0, out.stderr
    assert "imported" in out.stdout
    assert "backends ['testdev']" in out.stdout
    assert "status error: install_capture did not answer in 0.5 s" in out.stdout
    # Let go, the install ends on its own thread, and is undone there: nothing stays patched.
    assert "removed True" in out.stdout


def test_an_eager_install_that_hangs_is_bounded_too(starter: Any) -> None:
    source = INSTALL_HANGS.replace('return ["vendorpkg"]', "return None")
    site = starter(source)
    code = textwrap.dedent(
        """
        import kprof
        from kprof_testbackend import device
        q = device.Queue()
        with kprof.profile() as p, q:
            q.launch("k", 10)
        q.close()
        print("backends", sorted(p.backends), [k.name for k in p.kernels])
        import kprof_starter
        kprof_starter.gate.set()
        print("removed", kprof_starter.removed.wait(60))
        """
    )
    out = run(sys.executable, "-c", code, env=env_for(site, "0.5"))
    assert out.returncode == 0, out.stderr
    assert "backends ['testdev'] ['k']" in out.stdout
    assert "removed True" in out.stdout
    assert "install_capture did not answer in 0.5 s" in out.stderr


def test_kprof_run_bounds_the_start_on_import(starter: Any, tmp_path: Path) -> None:
    site = starter(DESCRIBE_HANGS)
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent(SCRIPT.format(module="vendorpkg")))
    out = run(KPROF, "run", str(script), env=env_for(site, "0.5"))
    assert out.returncode == 0, out.stderr
    assert "imported" in out.stdout
    assert "did not answer in 0.5 s" in out.stderr


@pytest.mark.parametrize("module", ["vendorpkg", "vendorpkg.sub"])
def test_the_plugin_imports_the_module_that_started_it(starter: Any, module: str) -> None:
    """The watched module is complete when the plugin's thread imports it, also while the
    program's import of its submodule still holds the package's import lock. A bound of
    300 s makes a wait on that lock fail the test, not pass it."""
    site = starter(IMPORTS_THE_MODULE)
    out = run(sys.executable, "-c", program(module), env=env_for(site, "300"))
    assert out.returncode == 0, out.stderr
    assert "backends ['starter', 'testdev']" in out.stdout
    assert "status available" in out.stdout


def test_a_plugin_importing_what_the_program_imports_is_disabled_at_once(starter: Any) -> None:
    """Its describe_backend imports ``vendorpkg.sub``, whose import by the program started
    it: that import cannot end before the program's. Seen within a poll, not after the
    300 s bound."""
    site = starter(IMPORTS_THE_SUBMODULE)
    out = run(sys.executable, "-c", program("vendorpkg.sub"), env=env_for(site, "300"))
    assert out.returncode == 0, out.stderr
    assert "imported" in out.stdout and "backends ['testdev']" in out.stdout
    assert (
        "status error: describe_backend imports vendorpkg.sub, which the program was importing"
        in out.stdout
    )
    assert "kprof.profile(backends=['starter'])" in out.stdout
