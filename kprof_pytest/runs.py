"""One profiled test (``TestRun``), its baseline, and the terminal summary of the session.

``kprof_core`` is imported inside the functions that profile, so that a session where no
test is profiled never imports it (see the package docstring).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from kprof_core.profiler import profile
    from kprof_core.result import DiffRow, Profile, ProfileDiff

_RUN = pytest.StashKey["TestRun"]()
_RESULTS = pytest.StashKey["list[TestResult]"]()


def test_key(item: pytest.Item) -> str:
    """What names a test's baseline: its module's name and the node id's part after the
    file (``test_ops::TestMul::test_mul2[4]``).

    Not the node id itself: that starts with the file's path relative to the rootdir, which
    pytest also derives from option values that are existing paths, so the same test gets
    another node id once ``--kprof-compare DIR`` exists (measured on PyOpenCL's test suite:
    every baseline missed). Nor the imported module's ``__name__``: that depends on
    ``--import-mode`` (``importlib`` names modules after their path from the rootdir), and a
    gate that finds no baseline passes every slowdown. The module name is derived from the
    file, as the default import mode names it: the packages (directories with an
    ``__init__.py``) above it, dotted, and the file's stem.
    """
    path = getattr(item, "path", None)
    if "::" not in item.nodeid or path is None or path.suffix != ".py":
        return item.nodeid
    parts = [path.stem]
    for parent in path.parents:
        if not (parent.name.isidentifier() and (parent / "__init__.py").is_file()):
            break
        parts.append(parent.name)
    return f"{'.'.join(reversed(parts))}::{item.nodeid.split('::', 1)[1]}"


def baseline_name(key: str) -> str:
    """The file a test's profile is saved as: its key made safe for a file name, and a short
    hash of the key so that two keys that sanitize alike still get two files."""
    safe = re.sub(r"[^A-Za-z0-9_.\-\[\]]+", "_", key)[:150]
    return f"{safe}-{hashlib.sha1(key.encode()).hexdigest()[:8]}.kprof"


@dataclass
class TestResult:
    """What the terminal summary needs of one test (the profile itself is not kept): plain
    data, so that pytest-xdist's workers can send it to the controller (``to_wire``)."""

    __test__ = False  # not a test class, whatever its name

    nodeid: str
    device_ns: int
    kernels: list[tuple[str, int, int]]  # (label, total ns, calls), largest first
    compared: bool = False
    baseline: str | None = None
    # Significant device-side changes: (status, description, failed the gate).
    changes: list[tuple[str, str, bool]] = field(default_factory=list)
    problem: str | None = None  # why the baseline could not be read

    def to_wire(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> TestResult:
        return cls(
            **{
                **data,
                "kernels": [tuple(k) for k in data["kernels"]],
                "changes": [tuple(c) for c in data["changes"]],
            }
        )


def add_results(config: pytest.Config, results: list[TestResult]) -> None:
    config.stash.setdefault(_RESULTS, []).extend(results)


def worker_output(config: pytest.Config) -> list[dict[str, Any]]:
    """This process's results, as pytest-xdist sends them from a worker to the controller."""
    return [r.to_wire() for r in config.stash.get(_RESULTS, [])]


def from_worker(config: pytest.Config, output: list[dict[str, Any]]) -> None:
    add_results(config, [TestResult.from_wire(d) for d in output])


class ProfileView:
    """The ``kprof_profile`` fixture: the test's ``kprof.Profile``, ended on first read.

    Every attribute of ``kprof.Profile`` (``kernel_times``, ``kernels``, ``summary()``,
    ``diff``, ``save``, ...) is available; the first access ends the test's profile so that
    its device times are resolved.
    """

    def __init__(self, run: TestRun) -> None:
        self._run = run

    @property
    def profile(self) -> Profile:
        """The test's ``kprof.Profile`` (ends the recording if it is still going on)."""
        return self._run.finished()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._run.finished(), name)

    def __str__(self) -> str:
        return str(self._run.finished())

    def __repr__(self) -> str:
        if self._run.profiler is None and self._run.result is None:
            return "<kprof_profile: not started (the test function has not run yet)>"
        return repr(self._run.finished())

    def _repr_html_(self) -> str | None:
        return self._run.finished()._repr_html_()


class TestRun:
    """The profile of one test's call phase."""

    __test__ = False  # not a test class, whatever its name

    def __init__(self, item: pytest.Item) -> None:
        self.item = item
        self.profiler: profile | None = None
        self.result: Profile | None = None
        self.summary: TestResult | None = None
        self.view = ProfileView(self)

    @classmethod
    def of(cls, item: pytest.Item) -> TestRun:
        run = item.stash.get(_RUN, None)
        if run is None:
            run = item.stash[_RUN] = cls(item)
        return run

    def _backends(self) -> list[str] | None:
        marker = self.item.get_closest_marker("kprof")
        if marker is not None and marker.kwargs.get("backends") is not None:
            names = marker.kwargs["backends"]
            return [names] if isinstance(names, str) else list(names)
        opt = self.item.config.getoption("kprof_backends")
        return [b for b in opt.split(",") if b] if opt else None

    def start(self) -> None:
        from kprof_core.host.backend import KprofError
        from kprof_core.profiler import profile

        try:
            prof = profile(backends=self._backends())
            prof.__enter__()
        except (KprofError, TypeError) as exc:  # an unknown backend name, a bad marker
            pytest.fail(escape(f"kprof: {exc}"), pytrace=False)
        self.profiler = prof

    def stop(self) -> None:
        """End the profile (once: the test may have ended it by reading ``kprof_profile``)."""
        prof, self.profiler = self.profiler, None
        if prof is not None:
            prof.__exit__(None, None, None)
            self.result = prof.result
            assert self.result is not None
            self.result.meta["test"] = self.item.nodeid
            self.result.meta["test_key"] = test_key(self.item)

    def finished(self) -> Profile:
        if self.result is None and self.profiler is None:
            raise RuntimeError(
                "kprof_profile is the profile of the test function: read it in "
                "the test, not in a fixture's set-up"
            )
        self.stop()
        assert self.result is not None
        return self.result

    def record(self) -> None:
        """Keep what the terminal summary needs: device time and the kernels behind it."""
        p = self.result
        if p is None:
            return
        kernels = sorted(
            ((r.label, r.total_ns, r.calls) for r in p.summary().device),
            key=lambda k: (-k[1], k[0]),
        )
        self.summary = TestResult(self.item.nodeid, sum(k[1] for k in kernels), kernels)
        add_results(self.item.config, [self.summary])

    def baseline(self) -> None:
        """Save, compare with the baseline, and fail on a significant slowdown, as asked."""
        p, res = self.result, self.summary
        if p is None or res is None:
            return
        config = self.item.config
        name = baseline_name(test_key(self.item))
        save_dir = config.getoption("kprof_save")
        if save_dir:
            Path(save_dir).mkdir(parents=True, exist_ok=True)
            p.save(os.path.join(save_dir, name))
        compare_dir = config.getoption("kprof_compare")
        if not compare_dir:
            return
        path = os.path.join(compare_dir, name)
        if not os.path.lexists(path):
            return
        fail_above = config.getoption("kprof_fail_above")
        try:
            d = compare_with(path, p, config.getoption("kprof_alpha"))
        except CommandError as exc:
            # The test's own outcome stands: the summary says it once, in one line. Only a
            # gate (--kprof-fail-above) fails the test, as it cannot vouch for it.
            res.problem = str(exc)
            if fail_above is not None:
                pytest.fail(
                    escape(f"kprof: cannot compare with the baseline: {exc}"), pytrace=False
                )
            return
        res.compared, res.baseline = True, path
        failed = d.slowdowns(fail_above) if fail_above is not None else []
        res.changes = [
            (r.status, describe(r), r in failed)
            for r in d.rows
            if r.section != "host" and r.significant
        ]
        # Rows the test cannot decide: said, never counted as within the spread.
        res.changes += [
            (
                r.status,
                f"{r.label} ({r.calls_before}->{r.calls_after} calls; at least "
                f"{d.calls_needed} a side needed to tell)",
                False,
            )
            for r in d.undecided()
        ]
        if failed:
            pytest.fail(
                escape(
                    f"kprof: significantly slower than the baseline {path} "
                    f"(more than {fail_above:g}x, median per call): "
                    + "; ".join(describe(r) for r in failed)
                ),
                pytrace=False,
            )


class CommandError(Exception):
    """A baseline that cannot be read (the loader's one-line reason)."""


def compare_with(path: str, p: Profile, alpha: float) -> ProfileDiff:
    from kprof_core.cli import common

    try:
        base = common.load_profile(path)
    except common.CommandError as exc:
        raise CommandError(str(exc)) from None
    return base.diff(p, alpha=alpha)


def describe(r: DiffRow) -> str:
    from kprof_core.data.timefmt import format_time

    assert r.median_before is not None and r.median_after is not None and r.p_value is not None
    return (
        f"{r.label} {r.ratio:.2f}x ({format_time(r.median_before)} -> "
        f"{format_time(r.median_after)} per call, {r.calls_before}->{r.calls_after} calls, "
        f"p={r.p_value:.2g})"
    )


def escape(text: str) -> str:
    from kprof_core.renderers.terminal import escape

    return escape(text)


def terminal_summary(tr: Any, config: pytest.Config) -> None:
    results = config.stash.get(_RESULTS, None)
    if not results:
        return
    from kprof_core.analysis.compare import TOO_FEW
    from kprof_core.data.timefmt import format_time

    def line(text: str) -> None:
        # Test ids and kernel names come from the tests and from files: escaped, like every
        # line kprof writes to a terminal.
        tr.write_line(escape(text))

    top = max(0, config.getoption("kprof_top"))
    ranked = sorted(results, key=lambda r: (-r.device_ns, r.nodeid))[:top]
    tr.write_sep("=", "kprof: device time per test")
    width = max((len(format_time(r.device_ns)) for r in ranked), default=0)
    for r in ranked:
        kernels = ", ".join(
            f"{label} {format_time(total)} ({calls} call{'s' * (calls != 1)})"
            for label, total, calls in r.kernels[:3]
        )
        more = f", {len(r.kernels) - 3} more" if len(r.kernels) > 3 else ""
        line(
            f"{format_time(r.device_ns):>{width}}  {r.nodeid}  {kernels or 'no device work'}{more}"
        )
    if len(results) > len(ranked):
        line(f"({len(results) - len(ranked)} more profiled tests; --kprof-top N lists more)")
    compare_dir = config.getoption("kprof_compare")
    if not compare_dir:
        return
    tr.write_sep("=", escape(f"kprof: compared with {compare_dir}"))
    # In test id order: the same lines whether the tests ran in one process or on xdist's.
    in_order = sorted(results, key=lambda r: r.nodeid)
    compared = [r for r in in_order if r.compared]
    for r in compared:
        for status, description, failed in r.changes:
            line(f"{'FAILED ' * failed}{r.nodeid}: {status} {description}")
    unreadable = [r for r in in_order if r.problem is not None]
    for r in unreadable:
        line(f"{r.nodeid}: not compared: {r.problem}")
    steady = sum(1 for r in compared if not r.changes)
    few = sum(1 for r in compared if r.changes and all(c[0] == TOO_FEW for c in r.changes))
    missing = len(results) - len(compared) - len(unreadable)
    line(
        f"{len(compared)} test{'s' * (len(compared) != 1)} compared, {steady} within "
        f"the run-to-run spread"
        + (f", {few} with too few calls to tell" if few else "")
        + f"; {missing} without a baseline"
        + (f"; {len(unreadable)} with an unreadable baseline" if unreadable else "")
    )
