"""kprof's pytest plugin, run the way users run it: pytest in a subprocess (``pytester``), the
plugin found through its ``pytest11`` entry point, on the test backend and on the real OpenCL
device (PoCL). Timing assertions use only large, deliberate differences (10x and more)."""

from __future__ import annotations

import re

import pytest

import kprof
from kprof_pytest.runs import baseline_name

TESTDEV = """
import os
import pytest
from kprof_testbackend import device

# Device times come from the test device's simulated clock (testdev_env), so neither a full
# collection nor a loaded machine can stretch them and reorder the tests.

US = float(os.environ.get("MUL2_US", "1000"))


@pytest.fixture
def q():
    q = device.Queue()
    with q:
        yield q
    q.close()


def test_heavy(q, kprof_profile):
    for _ in range(8):
        q.launch("mul2", US)
    q.launch("add", 10)
    times = kprof_profile.kernel_times("mul2")
    assert len(times) == 8 and min(times) >= US * 1000
    assert [k.name for k in kprof_profile.kernels] == ["mul2"] * 8 + ["add"]
    # Read once, the profile has ended: later work is not in it.
    q.launch("after_read", 10)
    q.finish()
    assert kprof_profile.kernel_times("after_read") == []


@pytest.mark.kprof
def test_marked(q):
    for _ in range(3):
        q.launch("small", 50)


def test_plain(q):
    q.launch("unseen", 10)
    q.finish()


@pytest.mark.kprof
def test_failing(q):
    q.launch("doomed", 10)
    q.finish()
    assert os.environ.get("FAILING") != "1"
"""


@pytest.fixture
def testdev_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KPROF_PLUGINS", "testdev")
    monkeypatch.delenv("MUL2_US", raising=False)
    # Device times exact on the test device's simulated clock: these tests order and compare
    # them, and a loaded machine stretched 3 x 50 µs past 10 µs in wall time.
    monkeypatch.setenv("KPROF_TESTDEV_CLOCK", "simulated")


def summary_lines(out: str) -> list[str]:
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if "kprof: device time per test" in line)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("=")), len(lines))
    return lines[start + 1 : end]


def test_nothing_is_imported_or_profiled_unless_asked(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_quiet="""
        import sys

        def test_no_kprof():
            assert "kprof_core" not in sys.modules and "kprof" not in sys.modules
    """
    )
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    r.assert_outcomes(passed=1)
    assert "kprof:" not in r.stdout.str()
    # The plugin is loaded all the same (through its entry point).
    assert re.search(r"plugins: .*kprof-", r.stdout.str())
    assert "--kprof-compare=DIR" in pytester.runpytest_subprocess("--help").stdout.str()


def test_fixture_and_marker_profile_only_those_tests(
    pytester: pytest.Pytester, testdev_env: None
) -> None:
    pytester.makepyfile(test_dev=TESTDEV)
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    r.assert_outcomes(passed=4)
    lines = summary_lines(r.stdout.str())
    assert len(lines) == 3
    assert "test_dev.py::test_heavy  mul2 " in lines[0] and "(8 calls), add " in lines[0]
    assert "test_dev.py::test_marked  small " in lines[1] and "(3 calls)" in lines[1]
    assert "test_dev.py::test_failing  doomed " in lines[2]
    assert "unseen" not in r.stdout.str()


def test_kprof_profiles_every_test_and_saves_each(
    pytester: pytest.Pytester, testdev_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_dev=TESTDEV)
    monkeypatch.setenv("FAILING", "1")
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--kprof", "--kprof-save", "base")
    r.assert_outcomes(passed=3, failed=1)
    lines = summary_lines(r.stdout.str())
    tests = [re.search(r"::(\w+)", line).group(1) for line in lines]  # type: ignore[union-attr]
    # Most device time first (the last two ran one 10 µs kernel each: either order).
    assert tests[:2] == ["test_heavy", "test_marked"]
    assert set(tests[2:]) == {"test_plain", "test_failing"}
    assert re.search(r"::test_plain  unseen \S+ \S+ \(1 call\)$", "\n".join(lines), re.M)
    # A failing test is in the summary, but its profile is no baseline.
    saved = sorted(p.name for p in (pytester.path / "base").iterdir())
    assert saved == sorted(
        baseline_name(f"test_dev::{t}") for t in ("test_heavy", "test_marked", "test_plain")
    )
    p = kprof.load(pytester.path / "base" / baseline_name("test_dev::test_plain"))
    assert (
        p.meta["test"] == "test_dev.py::test_plain" and p.meta["test_key"] == "test_dev::test_plain"
    )
    assert [k.name for k in p.kernels] == ["unseen"]


def test_compare_fails_only_significant_slowdowns_above_the_ratio(
    pytester: pytest.Pytester, testdev_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_dev=TESTDEV)
    monkeypatch.setenv("MUL2_US", "1000")
    pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--kprof", "--kprof-save", "base"
    ).assert_outcomes(passed=4)
    # Ten times slower: test_heavy fails, naming the kernel; the others pass.
    monkeypatch.setenv("MUL2_US", "10000")
    r = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--kprof", "--kprof-compare", "base", "--kprof-fail-above", "1.5"
    )
    r.assert_outcomes(passed=3, failed=1)
    out = r.stdout.str()
    assert re.search(
        r"\nkprof: significantly slower than the baseline \S+ \(more than 1.5x, "
        r"median per call\): mul2 \d+\.\d\dx \(.* -> .* per call, 8->8 calls",
        out,
    )
    assert "FAILED test_dev.py::test_heavy - Failed: kprof: significantly slower" in out
    assert re.search(r"FAILED test_dev.py::test_heavy: slower mul2 \d+\.\d\dx", out)
    assert "4 tests compared" in out
    # Rows the test cannot decide are named, never counted as within the spread.
    assert (
        "test_dev.py::test_marked: too few calls small (3->3 calls; at least 5 a side needed "
        "to tell)" in out
    )
    assert "test_dev.py::test_heavy: too few calls add (1->1 calls" in out
    assert "4 tests compared, 0 within the run-to-run spread, 3 with too few calls to tell" in out
    # Without --kprof-fail-above the slowdown is reported, nothing fails.
    r = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--kprof", "--kprof-compare", "base"
    )
    r.assert_outcomes(passed=4)
    assert re.search(r"\ntest_dev.py::test_heavy: slower mul2 \d+\.\d\dx", r.stdout.str())
    # Faster is never a failure.
    monkeypatch.setenv("MUL2_US", "100")
    r = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--kprof", "--kprof-compare", "base", "--kprof-fail-above", "1.1"
    )
    r.assert_outcomes(passed=4)


def test_baselines_survive_a_change_of_rootdir(
    pytester: pytest.Pytester, testdev_env: None
) -> None:
    """pytest takes option values that are existing paths into account for the rootdir, so
    the node ids of a run with --kprof-compare DIR can differ from the run that saved DIR."""
    pytester.mkdir("sub").joinpath("test_dev.py").write_text(
        TESTDEV + "\n\ndef test_skipped():\n    pytest.skip('not here')\n"
    )
    r = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--rootdir=sub", "sub", "--kprof-save", "base"
    )
    r.assert_outcomes(passed=4, skipped=1)
    lines = "\n".join(summary_lines(r.stdout.str()))
    assert " test_dev.py::test_heavy " in lines and "test_skipped" not in lines
    r = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--rootdir=.", "sub", "--kprof-compare", "base"
    )
    r.assert_outcomes(passed=4, skipped=1)
    assert " sub/test_dev.py::test_heavy " in "\n".join(summary_lines(r.stdout.str()))
    assert re.search(
        r"\n3 tests compared, \d within the run-to-run spread(, \d with too few calls to tell)?; "
        r"0 without a baseline",
        r.stdout.str(),
    )


def test_usage_errors(pytester: pytest.Pytester, testdev_env: None) -> None:
    pytester.makepyfile(test_x="def test_x(): pass")
    r = pytester.runpytest_subprocess("--kprof", "--kprof-backends", "nope")
    r.assert_outcomes(failed=1)
    assert "kprof: unknown backend 'nope'; known backends: testdev" in r.stdout.str()
    r = pytester.runpytest_subprocess("--kprof-fail-above", "1.1")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    assert "--kprof-fail-above needs --kprof-compare DIR" in r.stderr.str()
    (pytester.path / "bad").mkdir()
    (pytester.path / "bad" / baseline_name("test_x::test_x")).write_text("not a profile")
    # An unreadable baseline is said once, in one line; the test's outcome stands
    # (tests/test_reliability_pytest.py has the gate's case).
    r = pytester.runpytest_subprocess("--kprof", "--kprof-compare", "bad")
    assert (r.stdout.str() + r.stderr.str()).count("not a kprof profile") == 1
    r.assert_outcomes(passed=1)


OPENCL = """
import os
import numpy as np
import pyopencl as cl
import pytest
import kprof_opencl

N = int(os.environ.get("MUL2_N", "4096"))


@pytest.fixture(scope="module")
def mul2():
    dev = kprof_opencl.default_device()
    if dev is None:
        pytest.skip("no OpenCL device")
    q = kprof_opencl.profiling_queue(dev)
    prg = cl.Program(q.context, '''
        __kernel void mul2(__global float *x) {
            size_t i = get_global_id(0);
            float v = x[i];
            for (int k = 0; k < 64; ++k) v = v * 0.999f + 0.5f;
            x[i] = v;
        }''').build()
    x = cl.Buffer(q.context, cl.mem_flags.READ_WRITE, 4 * N)
    k = prg.mul2
    k(q, (N,), None, x)  # compile and warm up outside the profile
    q.finish()
    return lambda: k(q, (N,), None, x)


def test_mul2(mul2, kprof_profile):
    for _ in range(12):
        mul2()
    assert len(kprof_profile.kernel_times("mul2")) == 12
    assert kprof_profile.summary().device_row("mul2").calls == 12
"""


def test_on_the_opencl_device(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pyopencl")
    import kprof_opencl

    if kprof_opencl.default_device() is None:
        pytest.skip("OpenCL finds no device here (pip install pocl-binary-distribution)")
    monkeypatch.setenv("KPROF_PLUGINS", "opencl")
    pytester.makepyfile(test_cl=OPENCL)
    monkeypatch.setenv("MUL2_N", "4096")
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--kprof-save", "base")
    r.assert_outcomes(passed=1)
    assert "test_cl.py::test_mul2  mul2 " in summary_lines(r.stdout.str())[0]
    # 256 times the work per launch.
    monkeypatch.setenv("MUL2_N", str(4096 * 256))
    r = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--kprof-compare", "base", "--kprof-fail-above", "2"
    )
    r.assert_outcomes(failed=1)
    assert re.search(r"significantly slower than the baseline .*: mul2 \d+\.\d\dx", r.stdout.str())
