# mypy: disable-error-code="arg-type, list-item, type-var"
"""Bad input: wrong types and values raise TypeError/ValueError saying what is allowed; bad
backend names and environment variables are clear errors; ``kprof run`` exits as the script
did, after printing what was recorded."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import kprof

KPROF = str(Path(sys.executable).with_name("kprof"))

pytestmark = pytest.mark.usefixtures("testbackends")


@pytest.mark.parametrize(
    ("call", "error", "says"),
    [
        (
            lambda: kprof.profile(device="yes"),
            TypeError,
            r"profile\(device=...\) must be True or False",
        ),
        (lambda: kprof.profile(trace=1), TypeError, r"profile\(trace=...\) must be True or False"),
        (lambda: kprof.profile(synchronize=None), TypeError, "must be True or False"),
        (lambda: kprof.profile(timeout=-1), ValueError, "positive number of seconds, not -1"),
        (lambda: kprof.profile(timeout=0), ValueError, "positive number of seconds"),
        (lambda: kprof.profile(timeout="5"), TypeError, "number of seconds, not str"),
        (lambda: kprof.profile(backends=[1]), TypeError, r"backend names \(str\), not int 1"),
        (lambda: kprof.range(3), TypeError, "range name must be a str, not int"),
        (lambda: kprof.range(""), ValueError, "range name must not be empty"),
        (lambda: kprof.kernel(None), TypeError, "wraps a callable, not NoneType"),
        (lambda: kprof.kernel(print, name=3), TypeError, "kernel name must be a str"),
        (lambda: kprof.propagate("f"), TypeError, "wraps a callable, not str"),
        (lambda: kprof.profile()(3), TypeError, "decorates a callable, not int"),
        (lambda: kprof.get_backend(3), TypeError, "backend name must be a str, not int"),
        (lambda: kprof.register_backend(object(), ""), ValueError, "non-empty str name"),
        (lambda: kprof.format_time("1"), TypeError, "number of nanoseconds, not str"),
    ],
)
def test_wrong_types_and_values(call: Any, error: type[Exception], says: str) -> None:
    with pytest.raises(error, match=says):
        call()


def test_mark_outside_and_inside_a_profile() -> None:
    kprof.mark(3)  # outside a profile: costs nothing, checks nothing
    with kprof.profile(), pytest.raises(TypeError, match="marker name must be a str"):
        kprof.mark(3)


def test_an_unknown_backend_lists_the_known_ones() -> None:
    with pytest.raises(
        kprof.KprofError, match="unknown backend 'nosuch'; known backends: testdev, testnots"
    ):
        kprof.get_backend("nosuch")
    with pytest.raises(kprof.KprofError, match="known backends: testdev, testnots"):
        with kprof.profile(backends=["testdev", "nosuch"]):
            pass
    assert kprof.capture.active() is None


@pytest.mark.parametrize(
    ("var", "value", "says"),
    [
        ("KPROF_DISABLE_PLUGIN_AUTOLOAD", "maybe", "use 1, true, yes or on"),
        ("KPROF_RESOLVE_TIMEOUT", "soon", "not a number of seconds"),
        ("KPROF_RESOLVE_TIMEOUT", "-3", "must be a positive number of seconds"),
        ("KPROF_PLUGINS", "testdev;testnots", "installed backends"),
    ],
)
def test_a_bad_environment_variable_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, var: str, value: str, says: str
) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(kprof.KprofError) as ei:
        with kprof.profile():
            pass
    assert f"{var}={value!r}" in str(ei.value) and says in str(ei.value)
    # The command line says the same, and exits 2 rather than with a traceback.
    env = {k: v for k, v in os.environ.items() if not k.startswith("KPROF_")}
    env[var] = value
    out = subprocess.run(
        [KPROF, "run", "--no-device", __file__], capture_output=True, text=True, env=env, timeout=60
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.startswith(f"kprof: {var}={value!r}")


# -- kprof run -----------------------------------------------------------------------------------

SCRIPT = """
import sys
from kprof_testbackend import device
q = device.Queue()
with q:
    q.launch("from_script", 10)
{tail}
"""


def kprof_run(tmp_path: Path, tail: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "script.py"
    script.write_text(SCRIPT.format(tail=tail))
    env = {k: v for k, v in os.environ.items() if not k.startswith("KPROF_")}
    env["KPROF_PLUGINS"] = "testdev"
    return subprocess.run(
        [KPROF, "run", str(script)], capture_output=True, text=True, env=env, timeout=60
    )


@pytest.mark.parametrize(
    ("tail", "code", "says"),
    [
        ("", 0, None),
        ("sys.exit(3)", 3, "exited with code 3"),
        ("raise RuntimeError('script failed')", 1, "RuntimeError: script failed"),
    ],
)
def test_kprof_run_exits_as_the_script_did(
    tmp_path: Path, tail: str, code: int, says: str | None
) -> None:
    out = kprof_run(tmp_path, tail)
    assert out.returncode == code, out.stderr
    assert "recording 0 ranges, 1 kernel and 0 copies." in out.stdout  # printed whatever happened
    assert "from_script" in out.stdout
    if says:
        assert says in out.stderr


def test_kprof_run_a_missing_script(tmp_path: Path) -> None:
    out = subprocess.run(
        [KPROF, "run", str(tmp_path / "nope.py")], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 2
    assert "can't open file" in out.stderr and "nope.py" in out.stderr
