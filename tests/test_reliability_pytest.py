"""The pytest plugin against hostile names and baselines, and under other ways of running
pytest (pytest-xdist's ``-n N``, ``--import-mode=importlib``). Run as users run it: pytest in
a subprocess (``pytester``), on the test backend. Slowdowns are deliberate (10x)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hostile import EVIL_NAME

from kprof_pytest.runs import baseline_name

SUITE = f"""
import gc
import os
import pytest
from kprof_testbackend import device

gc.freeze()  # see test_pytest_plugin.py: a full collection would land in a kernel's time

US = float(os.environ.get("US", "1000"))
EVIL = {EVIL_NAME!r}


@pytest.fixture
def q():
    q = device.Queue()
    with q:
        yield q
    q.close()


def test_evil(q):
    for _ in range(8):
        q.launch(EVIL, US)
    q.finish()


def test_other():
    pass  # profiled (--kprof), no device work: nothing in it can differ from its baseline
"""

ARGS = ("-p", "no:cacheprovider", "--kprof")


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("KPROF_PLUGINS", "testdev")
    monkeypatch.setenv("US", "1000")
    pytester.mkdir("sub").joinpath("test_dev.py").write_text(SUITE)
    return pytester


def section(out: str, title: str) -> list[str]:
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if title in line)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("=")), len(lines))
    return lines[start + 1 : end]


def assert_no_terminal_control(out: str) -> None:
    """Nothing kprof wrote can act on a terminal: the hostile name appears escaped."""
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out and "\r" not in out
    assert "k\\x1b]0;pwned\\x07" in out


# -- 1: terminal injection through the summary and the gate's failure ----------------------------


def test_hostile_kernel_names_are_escaped_in_the_summary_and_failures(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = suite.runpytest_subprocess(*ARGS, "sub", "--kprof-save", "base")
    r.assert_outcomes(passed=2)
    out = r.stdout.str()
    assert_no_terminal_control(out)
    assert not re.search(r"^1 failed, 0 passed", out, re.M)  # no forged result line
    monkeypatch.setenv("US", "10000")
    r = suite.runpytest_subprocess(
        *ARGS, "sub", "--kprof-compare", "base", "--kprof-fail-above", "1.5"
    )
    r.assert_outcomes(passed=1, failed=1)
    out = r.stdout.str()
    assert_no_terminal_control(out)
    assert re.search(r"\nkprof: significantly slower than the baseline \S+ .*k\\x1b\]0;pwned", out)
    assert re.search(r"\nFAILED sub/test_dev.py::test_evil: slower k\\x1b\]0;pwned", out)


# -- 2: pytest-xdist ------------------------------------------------------------------------------


def test_xdist_workers_send_the_summary_and_comparison_to_the_controller(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("xdist")
    serial = suite.runpytest_subprocess(*ARGS, "sub", "--kprof-save", "base")
    serial.assert_outcomes(passed=2)
    par = suite.runpytest_subprocess(*ARGS, "-n", "2", "sub")
    par.assert_outcomes(passed=2)
    assert "2 workers" in par.stdout.str()  # it did run on xdist's workers

    def tests_of(out: str) -> list[str]:
        return [
            re.search(r"  (\S+::\w+)  ", line).group(1)  # type: ignore[union-attr]
            for line in section(out, "kprof: device time per test")
        ]

    assert tests_of(par.stdout.str()) == tests_of(serial.stdout.str())
    assert tests_of(par.stdout.str()) == [
        "sub/test_dev.py::test_evil",
        "sub/test_dev.py::test_other",
    ]
    assert "(8 calls)" in section(par.stdout.str(), "device time per test")[0]

    # The comparison, and the gate's failure, as a serial run prints them.
    monkeypatch.setenv("US", "10000")
    runs = [
        suite.runpytest_subprocess(
            *ARGS, *n, "sub", "--kprof-compare", "base", "--kprof-fail-above", "1.5"
        )
        for n in ((), ("-n", "2"))
    ]
    for r in runs:
        r.assert_outcomes(passed=1, failed=1)
    compared = [section(r.stdout.str(), "kprof: compared with base") for r in runs]
    for lines in compared:
        assert lines[0].startswith("FAILED sub/test_dev.py::test_evil: slower k\\x1b]0;pwned")
        assert re.fullmatch(
            r"2 tests compared, 1 within the run-to-run spread; 0 without a baseline", lines[-1]
        )
    assert [re.sub(r" \d+\.\d\dx.*", "", line) for line in compared[0]] == [
        re.sub(r" \d+\.\d\dx.*", "", line) for line in compared[1]
    ]


# -- 3 and 4: baselines that are not files, or not profiles ---------------------------------------


def hostile_baselines(path: Path) -> dict[str, str]:
    """A baseline directory (as a pull request could carry it) whose files are a FIFO and a
    symlink to /dev/zero; what the summary must say of each."""
    base = path / "base"
    base.mkdir()
    os.mkfifo(base / baseline_name("test_dev::test_evil"))
    os.symlink("/dev/zero", base / baseline_name("test_dev::test_other"))
    return {"test_evil": "is a FIFO (named pipe)", "test_other": "is a character device"}


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs and /dev/zero are POSIX")
def test_a_fifo_or_device_baseline_is_one_line_and_keeps_the_outcome(
    suite: pytest.Pytester,
) -> None:
    says = hostile_baselines(suite.path)
    r = suite.runpytest_subprocess(*ARGS, "sub", "--kprof-compare", "base", timeout=120)
    r.assert_outcomes(passed=2)
    out = r.stdout.str() + r.stderr.str()
    assert "Traceback" not in out and "MemoryError" not in out and "UsageError" not in out
    lines = section(r.stdout.str(), "kprof: compared with base")
    for test, what in says.items():
        (line,) = [x for x in lines if f"::{test}:" in x]  # once, in one line
        assert line.startswith(f"sub/test_dev.py::{test}: not compared: base/")
        assert line.endswith(f": {what}, not a kprof profile (kprof reads regular files)")
    assert lines[-1] == (
        "0 tests compared, 0 within the run-to-run spread; 0 without a baseline; "
        "2 with an unreadable baseline"
    )


def test_an_unreadable_baseline_fails_only_a_gate_and_in_one_line(suite: pytest.Pytester) -> None:
    base = suite.mkdir("base")
    (base / baseline_name("test_dev::test_evil")).write_text("not a profile")
    r = suite.runpytest_subprocess(*ARGS, "sub", "--kprof-compare", "base")
    r.assert_outcomes(passed=2)
    assert r.ret == 0
    out = r.stdout.str() + r.stderr.str()
    assert "Traceback" not in out and "UsageError" not in out and "INTERNALERROR" not in out
    assert out.count("not a kprof profile") == 1
    assert re.search(
        r"\nsub/test_dev.py::test_evil: not compared: base/\S+: not a kprof profile \(", out
    )
    # The user asked the gate to fail: it cannot vouch for the test, which fails in one line.
    r = suite.runpytest_subprocess(
        *ARGS, "sub", "--kprof-compare", "base", "--kprof-fail-above", "1.5"
    )
    r.assert_outcomes(passed=1, failed=1)
    out = r.stdout.str()
    assert "Traceback" not in out and "UsageError" not in out
    assert "FAILED sub/test_dev.py::test_evil - Failed: kprof: cannot compare with the " in out


# -- 15: --import-mode=importlib ------------------------------------------------------------------


def test_importlib_mode_finds_the_same_baselines(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = suite.runpytest_subprocess(*ARGS, "sub", "--kprof-save", "base")
    r.assert_outcomes(passed=2)
    monkeypatch.setenv("US", "10000")
    # importlib names the module sub.test_dev (prepend: test_dev): the same baselines.
    r = suite.runpytest_subprocess(
        *ARGS,
        "--import-mode=importlib",
        "sub",
        "--kprof-compare",
        "base",
        "--kprof-fail-above",
        "1.5",
    )
    r.assert_outcomes(passed=1, failed=1)
    out = r.stdout.str()
    assert "FAILED sub/test_dev.py::test_evil - Failed: kprof: significantly slower" in out
    assert "2 tests compared, 1 within the run-to-run spread; 0 without a baseline" in out
