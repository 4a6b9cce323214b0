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
        (lambda: kprof.profile(timeout=-1), ValueError, "at most 604800, not -1"),
        (lambda: kprof.profile(timeout=float("inf")), ValueError, "at most 604800, not inf"),
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
    assert kprof.plugin.active() is None


@pytest.mark.parametrize(
    ("var", "value", "says"),
    [
        ("KPROF_DISABLE_PLUGIN_AUTOLOAD", "maybe", "use 1, true, yes or on"),
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


@pytest.mark.parametrize("value", ["soon", "-3", "0", "inf", "-inf", "nan", "1e10", "604801"])
def test_a_malformed_resolve_timeout_is_warned_about_and_the_default_used(
    monkeypatch: pytest.MonkeyPatch, tdq: Any, value: str
) -> None:
    """KPROF_RESOLVE_TIMEOUT=inf (or 1e10) was accepted and overflowed the waits: every
    record ended unresolved, blamed on the plugin. Now: one warning, the default (60 s)."""
    monkeypatch.setenv("KPROF_PLUGINS", "testdev")
    monkeypatch.setenv("KPROF_RESOLVE_TIMEOUT", value)
    q = tdq()
    with pytest.warns(RuntimeWarning) as caught:
        with kprof.profile() as p, q:
            q.launch("k", 10)
    [w] = caught
    assert str(w.message) == (
        f"kprof: KPROF_RESOLVE_TIMEOUT={value!r} is not a number of seconds above 0 and at "
        "most 604800; using the default (60 s)"
    )
    assert w.filename == __file__  # said at the line that made the profile
    assert [k.name for k in p.kernels] == ["k"] and p.unresolved == []
    with pytest.raises(ValueError, match="at most 604800"):
        kprof.profile(timeout=float(value) if value in ("inf", "1e10") else 1e10)


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"RANK": "worker-3"}, "RANK='worker-3' is not an integer ≥ 0"),
        ({"SLURM_PROCID": "4", "SLURM_NTASKS": "4"}, "SLURM_PROCID=4 and SLURM_NTASKS=4 disagree"),
    ],
)
@pytest.mark.parametrize("output", ["out.kprof", "prof-{rank}.kprof"])
def test_malformed_launcher_variables_lose_no_file(
    tmp_path: Path, env: dict[str, str], says: str, output: str
) -> None:
    """kprof run -o wrote nothing when a launcher variable was malformed, even with no
    {rank} in the path. Now: one warning, the rank unknown (0 in a path), the file written."""
    (tmp_path / "script.py").write_text(SCRIPT.format(tail=""))
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("KPROF_", "SLURM_"))}
    clean = {k: v for k, v in clean.items() if k not in ("RANK", "WORLD_SIZE", "PMI_RANK")}
    out = subprocess.run(
        [KPROF, "run", "-o", output, "script.py"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={**clean, **env, "KPROF_PLUGINS": "testdev"},
    )
    assert out.returncode == 0, out.stderr
    written = output.format(rank=0)
    assert [k.name for k in kprof.load(tmp_path / written).kernels] == ["from_script"]
    assert "rank" not in kprof.load(tmp_path / written).meta
    warnings = [line for line in out.stderr.splitlines() if "RuntimeWarning" in line]
    assert len(warnings) == 1 and "RuntimeWarning: kprof: rank unknown: " in warnings[0]
    assert says in warnings[0]
    assert f"kprof: wrote {written}" in out.stderr


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


OS_EXIT = """
import multiprocessing, os

def child():
    print("child", flush=True)  # multiprocessing ends a forked child with os._exit

if __name__ == "__main__":
    multiprocessing.set_start_method("fork")
    q = device.Queue()
    with q:
        q.launch("from_script", 10)
    proc = multiprocessing.Process(target=child)
    proc.start()
    proc.join()
    print("before exit", proc.exitcode)
    os._exit(3)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="a forked child is POSIX")
def test_kprof_run_writes_and_reports_at_os_exit(tmp_path: Path) -> None:
    """A script ending in os._exit wrote nothing (every cleanup skipped): kprof run ends the
    profile, writes and prints first, and exits with the script's status. The forked child's
    own os._exit writes nothing (it is not the process kprof run profiles)."""
    (tmp_path / "script.py").write_text("from kprof_testbackend import device\n" + OS_EXIT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KPROF_")}
    out = subprocess.run(
        [KPROF, "run", "-o", "out-{pid}.kprof", "--html", "out.html", "script.py"],
        capture_output=True,
        text=True,
        env={**env, "KPROF_PLUGINS": "testdev"},
        timeout=60,
        cwd=tmp_path,
    )
    assert out.returncode == 3, out.stderr
    assert out.stdout.startswith("child\nbefore exit 0\n")
    assert "recording 0 ranges, 1 kernel and 0 copies." in out.stdout
    [saved] = tmp_path.glob("out-*.kprof")
    assert [k.name for k in kprof.load(saved).kernels] == ["from_script"]
    assert out.stderr.splitlines() == [
        "kprof: wrote out.html",
        f"kprof: wrote {saved.name}",
        "kprof run: script.py exited with code 3",
    ]
