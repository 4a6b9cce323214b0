"""Shared fixtures: a fresh plugin registry, the test backends, temporary plugin distributions,
the C library that launches OpenCL work from C (tests/opencl_clib)."""

from __future__ import annotations

import importlib
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fakeclock import FakeClock

from kprof_core.host.discovery import ENV_DISABLE_AUTOLOAD, ENV_PLUGINS, registry
from kprof_core.host.settings import ENV_TIMEOUT

pytest_plugins = ["pytester"]  # the pytest plugin's tests run pytest inside pytest


@pytest.fixture
def fresh_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """No kprof environment variables; plugins are rediscovered on first use, forgotten after."""
    for var in (ENV_PLUGINS, ENV_DISABLE_AUTOLOAD, ENV_TIMEOUT):
        monkeypatch.delenv(var, raising=False)
    registry.reset()
    yield registry
    registry.reset()


@pytest.fixture
def testbackends(fresh_registry: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Only the installed test distribution's backends, ``testdev`` and ``testnots``."""
    monkeypatch.setenv(ENV_PLUGINS, "testdev,testnots")
    return fresh_registry


@pytest.fixture
def tdq() -> Iterator[Callable[..., Any]]:
    """Make test-device queues (``tdq()``, ``tdq(plain=True)``); their workers stop after."""
    from kprof_testbackend import device

    made: list[Any] = []

    def make(plain: bool = False) -> Any:
        q = device.PlainQueue() if plain else device.Queue()
        made.append(q)
        return q

    yield make
    for q in made:
        q.hang.set()
        q.close()


@pytest.fixture
def plugin_dist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Path]]:
    """Install a plugin distribution for one test: a ``*.dist-info`` folder with
    ``entry_points.txt`` and its modules in a folder on ``sys.path``, so that discovery is real.

    ``plugin_dist("kprof-x", {"x": "kprof_x_mod"}, {"kprof_x_mod": source})`` returns the
    folder (for ``PYTHONPATH`` in subprocesses).
    """
    site = tmp_path / "site"
    site.mkdir()
    modules: list[str] = []
    monkeypatch.syspath_prepend(str(site))

    def make(
        dist: str, entry_points: dict[str, str], sources: dict[str, str], version: str = "0.1"
    ) -> Path:
        info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
        (info / "entry_points.txt").write_text(
            "[kprof.backends]\n" + "".join(f"{k} = {v}\n" for k, v in entry_points.items())
        )
        for mod, src in sources.items():
            (site / f"{mod}.py").write_text(textwrap.dedent(src))
            modules.append(mod)
        importlib.invalidate_caches()
        return site

    yield make
    for mod in modules:
        sys.modules.pop(mod, None)


@pytest.fixture
def fake_clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    from kprof_core import _clock

    clock = FakeClock()
    monkeypatch.setattr(_clock, "monotonic", clock.monotonic)
    monkeypatch.setattr(_clock, "sleep", clock.sleep)
    return clock


@pytest.fixture(scope="module")
def clib(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """tests/opencl_clib/clib.c built and opened through the system's OpenCL loader."""
    pytest.importorskip("pyopencl")
    sys.path.insert(0, str(Path(__file__).with_name("opencl_clib")))
    from clib import CLib, build, loader

    so = build(tmp_path_factory.mktemp("clib"))
    if so is None:
        pytest.skip("no C compiler to build tests/opencl_clib/clib.c")
    return CLib(so, loader())
