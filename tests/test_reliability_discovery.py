"""Discovery cannot be taken down by a plugin: one that hangs (in its import or in
``describe_backend``) is listed as ``error: did not answer in N s`` within a bounded time, one
that raises ``SystemExit`` is isolated, a wrongly typed ``BackendInfo`` is the plugin's error,
and a plugin registering a built-in's name never replaces it silently."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from test_reliability_plugins import KPROF, caught_warnings, naming, run

import kprof
from kprof_core.host.discovery import discovery_timeout

HANGS_ON_IMPORT = "import threading\nthreading.Event().wait()\n"

DESCRIBE_HANGS = """
import threading, kprof

@kprof.plugin.hookimpl
def describe_backend(backend):
    threading.Event().wait()
"""

EXITS_ON_IMPORT = "raise SystemExit(3)\n"

DESCRIBE_EXITS = """
import kprof

@kprof.plugin.hookimpl
def describe_backend(backend):
    raise SystemExit(4)
"""

WRONG_INFO = """
import kprof

@kprof.plugin.hookimpl
def describe_backend(backend):
    return kprof.plugin.BackendInfo(devices=[0, 1], library=3)
"""

IMPOSTOR = """
import kprof
IMPORTED = True

@kprof.plugin.hookimpl
def describe_backend(backend):
    return kprof.plugin.BackendInfo(detail="the impostor")
"""

PROFILE_ONE_KERNEL = """
import kprof
from kprof_testbackend import device
q = device.Queue()
with kprof.profile() as p, q:
    q.launch("k", 10)
q.close()
print("backends", sorted(p.backends), "kernels", [k.name for k in p.kernels])
"""


@pytest.fixture
def hung_dist(plugin_dist: Any, fresh_registry: Any) -> Path:
    return plugin_dist(
        "kprof-hung",
        {"hungimp": "kprof_hungimp", "hungdesc": "kprof_hungdesc"},
        {"kprof_hungimp": HANGS_ON_IMPORT, "kprof_hungdesc": DESCRIBE_HANGS},
    )


def test_hung_plugins_are_listed_as_errors_in_bounded_time(hung_dist: Path) -> None:
    env = {
        "PYTHONPATH": str(hung_dist),
        "KPROF_PLUGINS": "testdev,hungimp,hungdesc",
        "KPROF_DISCOVERY_TIMEOUT": "0.5",
    }
    # The bound shows in the statuses (each "did not answer in 0.5 s"); the subprocess's own
    # timeout only guards against a hang: no wall time is asserted (a loaded machine
    # stretches it).
    out = run(KPROF, "backends", "--json", env=env)
    assert out.returncode == 0, out.stderr
    rows = {r["name"]: r for r in json.loads(out.stdout)}
    assert rows["hungimp"]["status"] == "error: did not answer in 0.5 s"
    assert rows["hungdesc"]["status"] == "error: did not answer in 0.5 s"
    assert rows["testdev"]["status"] == "available"
    # kprof.profile() too: the hung backends are not used, the others profile.
    out = run(sys.executable, "-c", PROFILE_ONE_KERNEL, env=env)
    assert out.returncode == 0, out.stderr
    assert "backends ['testdev'] kernels ['k']" in out.stdout
    assert "did not answer in 0.5 s" in out.stderr  # each said once, as a warning


@pytest.fixture
def exiting_dist(plugin_dist: Any, fresh_registry: Any, monkeypatch: pytest.MonkeyPatch) -> Path:
    site = plugin_dist(
        "kprof-exits",
        {"exitimp": "kprof_exitimp", "exitdesc": "kprof_exitdesc", "wronginfo": "kprof_wronginfo"},
        {
            "kprof_exitimp": EXITS_ON_IMPORT,
            "kprof_exitdesc": DESCRIBE_EXITS,
            "kprof_wronginfo": WRONG_INFO,
        },
    )
    monkeypatch.setenv("KPROF_PLUGINS", "testdev,exitimp,exitdesc,wronginfo")
    return site


def test_systemexit_and_wrong_types_from_plugins_are_isolated(exiting_dist: Path, tdq: Any) -> None:
    with caught_warnings() as caught:
        infos = {b.name: b.info() for b in kprof.backends()}
    assert infos["exitimp"].status == "error: SystemExit: 3"
    assert infos["exitdesc"].status == "error: describe_backend SystemExit: 4"
    assert infos["wronginfo"].status.startswith(
        "error: TypeError: BackendInfo.devices must be a list of str"
    )
    assert naming(caught, "exitimp") and naming(caught, "exitdesc") and naming(caught, "wronginfo")
    q = tdq()
    with kprof.profile() as p, q:
        q.launch("k")
    assert p.backends == ["testdev"] and [k.name for k in p.kernels] == ["k"]


def test_backends_command_survives_plugins_that_exit(exiting_dist: Path) -> None:
    env = {"PYTHONPATH": str(exiting_dist), "KPROF_PLUGINS": "testdev,exitimp,exitdesc,wronginfo"}
    out = run(KPROF, "backends", env=env)
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    lines = {ln.split()[0]: ln for ln in out.stdout.splitlines()[2:]}
    assert "error: SystemExit: 3" in lines["exitimp"]
    assert "error: TypeError: BackendInfo.devices" in lines["wronginfo"]


def test_a_plugin_named_like_a_builtin_does_not_replace_it(
    plugin_dist: Any, fresh_registry: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("pyopencl")
    plugin_dist(
        "evil-opencl", {"opencl": "kprof_impostor"}, {"kprof_impostor": IMPOSTOR}, version="6.6"
    )
    monkeypatch.setenv("KPROF_PLUGINS", "opencl")
    with caught_warnings() as caught:
        [b] = kprof.backends()
    assert b.distribution == "kprof" and b.plugin.__name__ == "kprof_opencl.plugin"
    assert "kprof_impostor" not in sys.modules  # never even imported
    [msg] = naming(caught, "opencl")
    assert "two plugins register the backend 'opencl'" in msg
    assert "kprof 0.1.0 (kprof_opencl.plugin)" in msg and "evil-opencl 6.6 (kprof_impostor)" in msg
    assert "kprof's own backends win" in msg


def test_two_third_parties_with_one_name_resolve_the_same_way_each_time(
    plugin_dist: Any, fresh_registry: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Created in both orders: the choice must not follow the file system's listing order.
    plugin_dist("zeta-x", {"samename": "kprof_zeta"}, {"kprof_zeta": IMPOSTOR})
    plugin_dist("alpha-x", {"samename": "kprof_alpha"}, {"kprof_alpha": IMPOSTOR})
    monkeypatch.setenv("KPROF_PLUGINS", "samename")
    with caught_warnings() as caught:
        [b] = kprof.backends()
    assert b.distribution == "alpha-x"
    [msg] = naming(caught, "samename")
    assert "alpha-x 0.1 (kprof_alpha)" in msg and "zeta-x 0.1 (kprof_zeta)" in msg


@pytest.mark.parametrize(("raw", "value"), [("", 20.0), ("2.5", 2.5), ("0", None)])
def test_the_discovery_timeout_variable(
    monkeypatch: pytest.MonkeyPatch, raw: str, value: float | None
) -> None:
    monkeypatch.setenv("KPROF_DISCOVERY_TIMEOUT", raw)
    assert discovery_timeout() == value


@pytest.mark.parametrize("raw", ["-1", "soon", "inf", "nan", "1e10"])
def test_a_bad_discovery_timeout_is_warned_about_and_the_default_used(
    monkeypatch: pytest.MonkeyPatch, raw: str
) -> None:
    """The same rules as KPROF_RESOLVE_TIMEOUT (1e10 was accepted and overflowed the wait)."""
    monkeypatch.setenv("KPROF_DISCOVERY_TIMEOUT", raw)
    with pytest.warns(RuntimeWarning) as caught:
        assert discovery_timeout() == 20.0
    assert [str(w.message) for w in caught] == [
        f"kprof: KPROF_DISCOVERY_TIMEOUT={raw!r} is not a number of seconds above 0 and at "
        "most 604800, or 0 to wait for plugins without a bound; using the default (20 s)"
    ]
