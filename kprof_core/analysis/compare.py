"""Comparing two profiles name by name, and telling a real change from run-to-run spread.

``Profile.diff(other)``, ``kprof diff base.kprof new.kprof`` and the pytest plugin's
``--kprof-compare`` all use :func:`diff`. With ``by="line"`` (``kprof diff --by line``) a name
launched from several lines of code is one row per line (``DiffRow.site``): the same kernel
from two places is two rows. Lines are matched across the profiles by their label (the
file's base name, the line and the function: ``"train.py:42 step"``), so that runs from two
checkouts in different directories compare.

For each name (kernels and copies, device ranges, and host rows in their own section) it
gives calls, median and total time before and after, and ``ratio`` = median after / median
before (per call, so that a test that runs a kernel more often is not called slower).

Whether a change stands out of the spread is decided by a two-sided **Mann-Whitney U test**
(Wilcoxon rank-sum) on the per-call durations of the two profiles: it asks whether a call
taken from one profile tends to be longer than one taken from the other, using ranks only,
so it holds for skewed timing distributions and long tails (one slow first call from a
compile or a cold cache moves a rank by one, not the mean by a lot). The test lives in
:mod:`kprof_core.analysis.ranktest`: exact for up to ``EXACT_LIMIT`` calls in all, ties
included, the normal approximation above. A change is significant when
``p < alpha`` (default 0.01, since a run compares many names at once); its direction comes
from the same statistic: ``effect`` = P(a call after is longer than one before), ties
counting half.

Few calls cannot decide anything: the smallest p-value the test can give with ``n1`` and
``n2`` calls is ``2 / C(n1 + n2, n1)`` (:func:`min_p_value`), so with 1 and 1 calls it is 1,
and at ``alpha`` 0.01 it takes 5 calls a side (:func:`calls_needed`). Such rows are neither
"same" nor changed: their status is ``"too few calls"``, and gates name them instead of
passing them silently (:meth:`Comparison.undecided`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from kprof_core.analysis.compare_groups import SECTIONS, Key, durations_by_config, durations_by_line
from kprof_core.analysis.ranktest import calls_needed, min_p_value, rank_test
from kprof_core.data.profile_data import ProfileData
from kprof_core.data.records import APPROXIMATE, HOST_TIMED

DEFAULT_ALPHA = 0.01
#: A row's status when its calls are too few for the test to reach ``p < alpha``.
TOO_FEW = "too few calls"
SECTION_TITLES = {
    "device": "Device-side activity (kernels and copies)",
    "device_ranges": "Device-side ranges",
    "host": "Host-side activity",
}


# -- the diff ---------------------------------------------------------------------------------------


def _median(values: Sequence[int]) -> float | None:
    if not values:
        return None
    s = sorted(values)
    mid = len(s) // 2
    return float(s[mid]) if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


@dataclass(frozen=True)
class DiffRow:
    """One name in one section: before (the base profile) and after (the other one).

    ``status``: ``"new"`` (only after), ``"gone"`` (only before), ``"slower"`` or
    ``"faster"`` (a significant change), ``"same"`` (within the run-to-run spread), ``"too few
    calls"`` (so few that the test could not have reached ``p < alpha`` whatever the times:
    :func:`min_p_value`); ``site``:
    compared by line (``by="line"``), the line's label (``"train.py:42 step"``, or
    ``"(site unknown)"``), else None; ``config``: compared by launch configuration
    (``by="config"``), the configuration's text (``"global 1024 local 64"``), else None (and
    None for rows that have none: ranges, copies).
    """

    section: str
    name: str
    host_timed: bool
    calls_before: int
    calls_after: int
    median_before: float | None
    median_after: float | None
    total_before: int
    total_after: int
    ratio: float | None
    p_value: float | None
    effect: float | None
    significant: bool
    status: str
    approximate: bool = False
    site: str | None = None
    config: str | None = None

    @property
    def label(self) -> str:
        """The name as tables show it: marked ``*`` or ``~``, and its line when compared by
        line (``"mul2 @ train.py:42 step"``), its configuration when compared by configuration
        (``"mul2 [global 1024 local 64]"``)."""
        name = (
            f"{self.name} *"
            if self.host_timed
            else f"{self.name} ~"
            if self.approximate
            else self.name
        )
        if self.config is not None:
            name = f"{name} [{self.config}]"
        return name if self.site is None else f"{name} @ {self.site}"

    @property
    def change_ns(self) -> int:
        """Total time after minus total time before."""
        return self.total_after - self.total_before


@dataclass(frozen=True)
class Comparison:
    """Every name of two profiles, section by section, largest change in total time first
    (the data; ``kprof_core.result.ProfileDiff`` adds its printed and HTML forms)."""

    rows: list[DiffRow]
    alpha: float
    span_before: int
    span_after: int
    #: ``"name"``; ``"line"``: a row per name and launch site (``DiffRow.site``); ``"config"``:
    #: a row per name and launch configuration (``DiffRow.config``).
    by: str = "name"

    def section(self, name: str) -> list[DiffRow]:
        """The rows of ``"device"``, ``"device_ranges"`` or ``"host"``."""
        if name not in SECTIONS:
            raise ValueError(f"unknown section {name!r}; sections: {', '.join(SECTIONS)}")
        return [r for r in self.rows if r.section == name]

    def row(
        self,
        name: str,
        section: str = "device",
        site: str | None = None,
        config: str | None = None,
    ) -> DiffRow:
        """The row of ``name`` in ``section`` (compared by line: the one of line ``site``,
        a label such as ``"train.py:42 step"``; by configuration: the one of ``config``, a
        text such as ``"global 1024 local 64"``)."""
        for r in self.section(section):
            if (
                r.name == name
                and (site is None or r.site == site)
                and (config is None or r.config == config)
            ):
                return r
        raise KeyError(
            f"no {section} row named {name!r}"
            + (f" at {site!r}" if site is not None else "")
            + (f" with {config!r}" if config is not None else "")
            + f"; rows: {[r.label for r in self.section(section)]}"
        )

    def slowdowns(
        self,
        above: float = 1.0,
        sections: Sequence[str] = ("device", "device_ranges"),
        host_timed: bool = False,
    ) -> list[DiffRow]:
        """Significant slowdowns whose ratio exceeds ``above``: what a CI gate on device time
        fails on. By default only device time: not the host section (it times Python), and
        not rows timed on the host for want of device timestamps (``*``: launch, synchronize,
        read the host clock), which follow the host's load from run to run; on PyOpenCL's own
        test suite (queues without profiling) a rerun of the same code made 15 of 57 tests
        "slower" by 1.2-5x on such rows, and none on device-timed ones. Rows observed on the
        host (``~``, OpenCL queues without profiling) follow the host's load as well and are
        left out the same way (``host_timed=True`` counts both)."""
        return [
            r
            for r in self.rows
            if r.section in sections
            and r.status == "slower"
            and (host_timed or not (r.host_timed or r.approximate))
            and r.ratio is not None
            and r.ratio > above
        ]

    def undecided(
        self, sections: Sequence[str] = ("device", "device_ranges"), host_timed: bool = False
    ) -> list[DiffRow]:
        """Rows with too few calls for the test to decide (status ``"too few calls"``), in the
        sections and with the rows a gate judges (:meth:`slowdowns`): a gate cannot vouch for
        them either way and says so."""
        return [
            r
            for r in self.rows
            if r.section in sections
            and r.status == TOO_FEW
            and (host_timed or not (r.host_timed or r.approximate))
        ]

    @property
    def calls_needed(self) -> int:
        """The fewest calls a side with which a row could be found changed at this alpha."""
        return calls_needed(self.alpha)

    def to_json(self) -> dict[str, Any]:
        """The diff as JSON-able data (times in ns)."""
        return {
            "alpha": self.alpha,
            "calls_needed": self.calls_needed,
            "by": self.by,
            "test": "Mann-Whitney U, two-sided",
            "span_before_ns": self.span_before,
            "span_after_ns": self.span_after,
            "rows": [asdict(r) for r in self.rows],
        }


def _rows(
    section: str,
    before: dict[Key, list[int]],
    after: dict[Key, list[int]],
    alpha: float,
    by: str,
) -> list[DiffRow]:
    rows = []
    for key in before.keys() | after.keys():
        label = key[2] if len(key) > 2 else None
        b, a = before.get(key, []), after.get(key, [])
        mb, ma = _median(b), _median(a)
        ratio = ma / mb if mb and ma is not None else None
        test = rank_test(b, a)
        p = test.p_value if test else None
        significant = p is not None and p < alpha
        if not b:
            status = "new"
        elif not a:
            status = "gone"
        elif significant:
            assert test is not None
            status = "slower" if test.effect > 0.5 else "faster"
        elif min_p_value(len(b), len(a)) >= alpha:
            status = TOO_FEW
        else:
            status = "same"
        rows.append(
            DiffRow(
                section,
                key[0],
                bool(key[1] & HOST_TIMED),
                len(b),
                len(a),
                mb,
                ma,
                sum(b),
                sum(a),
                ratio,
                p,
                test.effect if test else None,
                significant,
                status,
                bool(key[1] & APPROXIMATE),
                label if by == "line" else None,
                (label or None) if by == "config" else None,
            )
        )
    rows.sort(key=lambda r: (-abs(r.change_ns), r.name, r.site or "", r.config or "", r.host_timed))
    return rows


C = TypeVar("C", bound=Comparison)


def diff(
    before: ProfileData, after: ProfileData, alpha: float, cls: type[C], by: str = "name"
) -> C:
    """Compare ``after`` with ``before`` (see the module docstring for the rule), as a ``cls``
    (``Profile.diff`` passes its ``ProfileDiff``, which adds the printed forms); ``by``:
    ``"name"``, ``"line"`` for a row per name and launch site, or ``"config"`` for a row per
    name and launch configuration."""
    if by not in ("name", "line", "config"):
        raise ValueError(f'diff(by=...) takes "name", "line" or "config", not {by!r}')
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
        raise ValueError(f"alpha must be a probability between 0 and 1, not {alpha!r}")
    if not isinstance(before, ProfileData) or not isinstance(after, ProfileData):
        raise TypeError(
            f"diff compares two kprof.Profile objects, not "
            f"{type(before).__name__} and {type(after).__name__}"
        )
    rows = []
    if by != "name":
        split = durations_by_line if by == "line" else durations_by_config
        lb, la = split(before), split(after)
        for section in SECTIONS:
            rows += _rows(section, lb[section], la[section], float(alpha), by)
    else:
        db, da = before.durations(), after.durations()
        for section in SECTIONS:
            rows += _rows(section, getattr(db, section), getattr(da, section), float(alpha), by)
    return cls(rows, float(alpha), before.span_ns, after.span_ns, by)
