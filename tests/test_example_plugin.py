"""examples/plugin, the plugin the docs' tutorial builds up: it passes the conformance kit as
its author would run it, and it works installed through its entry point. The tutorial's
steps and the page itself: tests/test_plugin_tutorial.py."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import kprof

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "plugin"


def test_the_example_passes_the_conformance_kit_as_its_author_runs_it() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KPROF_")}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", str(EXAMPLE)],
        cwd=EXAMPLE,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert re.search(r"\b11 passed\b", out) and "skipped" not in out, out


@pytest.fixture
def installed(
    plugin_dist: Callable[..., Path], fresh_registry: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Any]:
    """The example installed as a distribution with its entry point (discovery is real)."""
    monkeypatch.syspath_prepend(str(EXAMPLE))
    plugin_dist("kprof-workqueue", {"workqueue": "kprof_workqueue"}, {}, version="1.0")
    import workqueue

    yield workqueue
    for mod in ("workqueue", "kprof_workqueue"):
        sys.modules.pop(mod, None)


def test_the_installed_example_times_launches_and_ranges_on_its_device(installed: Any) -> None:
    workqueue = installed
    b = kprof.get_backend("workqueue")
    assert b.distribution == "kprof-workqueue" and b.has_timestamps
    assert "elapsed_time" not in b.implemented  # device_times alone is enough
    info = b.info()
    assert (info.status, info.library, info.timestamps) == ("available", "workqueue", True)
    q = workqueue.Queue("q1")

    def kernel_a() -> None:
        pass

    def kernel_b() -> None:
        pass

    with kprof.profile(backends=["workqueue"]) as p, q:
        for _ in range(3):
            with kprof.range("step"):
                q.launch(kernel_a)
                q.launch(kernel_b)
    assert [k.name for k in p.kernels] == ["kernel_a", "kernel_b"] * 3
    assert [r.name for r in p.device_ranges] == ["step"] * 3
    for k in p.kernels + p.device_ranges:
        assert not k.host_timed and k.error is None
        assert (k.device, k.queue) == ("workqueue worker", "q1")
        assert k.launch_start_ns <= k.start_ns
    for r, (a, c) in zip(p.device_ranges, zip(p.kernels[::2], p.kernels[1::2])):
        assert r.start_ns <= a.start_ns and c.end_ns <= r.end_ns
    [clock] = p.clocks.values()
    assert clock.method == "device_clock read between two host readings"
    # Outside a profile the library's own function is back.
    assert workqueue.Queue.launch.__module__ == "workqueue"
