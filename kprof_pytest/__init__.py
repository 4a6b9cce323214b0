"""kprof's pytest plugin (entry point ``pytest11``): device time per test, and baselines.

    pytest --kprof                                 # profile every test; a summary at the end
    pytest --kprof --kprof-save .kprof-baseline    # keep each test's profile
    pytest --kprof --kprof-compare .kprof-baseline --kprof-fail-above 1.10

``@pytest.mark.kprof`` profiles chosen tests only (``@pytest.mark.kprof(backends=["opencl"])``),
and the ``kprof_profile`` fixture is the test's own profile, to assert on.

Under pytest-xdist (``-n N``) each worker profiles its tests and sends what the summary needs
to the controller, which prints the same summary and comparison as a serial run.

It costs nothing unless asked for: this module imports only pytest, and ``kprof_core`` (with
the backends) is imported the first time a test is profiled. That is why the plugin is a
package of its own rather than a module of ``kprof_core``: importing ``kprof_core`` takes
~80 ms, which every pytest run in an environment with kprof would otherwise pay.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

MARKER = "kprof"
FIXTURE = "kprof_profile"


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("kprof", "kprof: device time of GPU kernels per test")
    g.addoption(
        "--kprof",
        action="store_true",
        help="profile every test with kprof; list the tests with the most device time",
    )
    g.addoption(
        "--kprof-backends",
        metavar="A,B",
        help="only these kprof backends (comma-separated; default: every available one)",
    )
    g.addoption(
        "--kprof-save",
        metavar="DIR",
        help="save each profiled test's profile to DIR (one .kprof file per test)",
    )
    g.addoption(
        "--kprof-compare",
        metavar="DIR",
        help="compare each profiled test with its profile saved in DIR, as kprof diff does",
    )
    g.addoption(
        "--kprof-fail-above",
        metavar="RATIO",
        type=float,
        help="with --kprof-compare: fail tests where a kernel, copy or device range is "
        "significantly slower than the baseline by more than RATIO (e.g. 1.10)",
    )
    g.addoption(
        "--kprof-alpha",
        metavar="P",
        type=float,
        default=0.01,
        help="significance level of the comparison's rank test (default 0.01)",
    )
    g.addoption(
        "--kprof-top",
        metavar="N",
        type=int,
        default=10,
        help="how many tests the summary lists (default 10)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(backends=None): profile this test with kprof (device time of its "
        "kernels); backends: names of the kprof backends to use",
    )
    fail = config.getoption("kprof_fail_above")
    if fail is not None and not config.getoption("kprof_compare"):
        raise pytest.UsageError(
            "--kprof-fail-above needs --kprof-compare DIR (the baseline to compare with)"
        )
    if fail is not None and not fail > 0:
        raise pytest.UsageError(f"--kprof-fail-above takes a ratio such as 1.10, not {fail}")
    alpha = config.getoption("kprof_alpha")
    if not 0 < alpha < 1:
        raise pytest.UsageError(f"--kprof-alpha takes a probability such as 0.01, not {alpha}")


def _wanted(item: pytest.Item) -> bool:
    return (
        item.config.getoption("kprof")
        or item.get_closest_marker(MARKER) is not None
        or FIXTURE in getattr(item, "fixturenames", ())
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    if not _wanted(item):
        return (yield)
    from .runs import TestRun

    run = TestRun.of(item)
    run.start()
    try:
        result = yield
    except pytest.skip.Exception:
        run.stop()  # a skipped test is not in the summary
        raise
    except BaseException:
        run.stop()
        run.record()  # in the summary; a failing test's profile is no baseline
        raise
    run.stop()
    run.record()
    run.baseline()  # save, compare, and fail on a slowdown when asked
    return result


@pytest.fixture
def kprof_profile(request: pytest.FixtureRequest) -> Any:
    """The test's own kprof profile: it records the test function's kernels from its start
    until the test first reads it (reading resolves the device times, so it ends the profile:
    read it after the work you measure), e.g. ``kprof_profile.kernel_times("mul2")``."""
    from .runs import TestRun

    return TestRun.of(request.node).view


# -- pytest-xdist: each worker's results travel to the controller, which prints the summary --
_WORKER_KEY = "kprof_results"


def pytest_sessionfinish(session: pytest.Session) -> None:
    # On an xdist worker: xdist sends ``workeroutput`` once every sessionfinish ran.
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        from . import runs

        output[_WORKER_KEY] = runs.worker_output(session.config)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    # On the xdist controller (the hook exists only where pytest-xdist is installed).
    results = getattr(node, "workeroutput", {}).get(_WORKER_KEY)
    if results:
        from . import runs

        runs.from_worker(node.config, results)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    from . import runs  # imports only this plugin's module, not kprof_core

    runs.terminal_summary(terminalreporter, config)
