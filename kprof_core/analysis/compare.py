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
compile or a cold cache moves a rank by one, not the mean by a lot). The p-value is exact
for up to :data:`EXACT_LIMIT` calls in all, ties included (the null distribution of the
doubled mid-rank sum, counted over every way to split the calls), and from the normal
approximation with tie and continuity corrections above that. A change is significant when
``p < alpha`` (default 0.01, since a run compares many names at once); its direction comes
from the same statistic: ``effect`` = P(a call after is longer than one before), ties
counting half. One call on each side can never be significant: a single call has no spread
to compare against, so time a kernel several times to gate on it.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from itertools import repeat
from typing import Any, TypeVar

from kprof_core.analysis.compare_groups import SECTIONS, Key, durations_by_config, durations_by_line
from kprof_core.data.profile_data import ProfileData
from kprof_core.data.records import APPROXIMATE, HOST_TIMED

DEFAULT_ALPHA = 0.01
EXACT_LIMIT = 60  # calls in all; C(64, 32) < 2**64, so every count fits one 64-bit slot
SECTION_TITLES = {
    "device": "Device-side activity (kernels and copies)",
    "device_ranges": "Device-side ranges",
    "host": "Host-side activity",
}


# -- the test ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RankTest:
    """A two-sided Mann-Whitney U test of ``after`` against ``before``."""

    u: float  # U of ``after``: pairs where the call after is longer, ties counting half
    effect: float  # u / (n_before * n_after): P(after longer), 0.5 when neither tends longer
    p_value: float
    exact: bool


def _exact_two_sided(weights: list[int], m: int, observed: int) -> float:
    """P(|S - E| >= |observed - E|) where S is the sum of ``m`` weights drawn without
    replacement from ``weights`` (all subsets equally likely), E its mean.

    The counts of each sum are kept as 64-bit slots of one Python int per subset size (a
    generating function), so adding a weight is one shift and one add, at C speed.
    """
    n = len(weights)
    top = sum(sorted(weights)[-m:]) if m else 0
    dp = [0] * (m + 1)
    dp[0] = 1
    for i, w in enumerate(weights):
        shift = 64 * w
        for k in range(min(i + 1, m), 0, -1):
            if dp[k - 1]:
                dp[k] += dp[k - 1] << shift
    counts = array("Q")
    counts.frombytes(dp[m].to_bytes(8 * (top + 1), "little"))
    total = math.comb(n, m)
    mean2 = m * sum(weights)  # n x E, kept in integers
    d = abs(n * observed - mean2)
    extreme = sum(c for s, c in enumerate(counts) if c and abs(n * s - mean2) >= d)
    return min(1.0, extreme / total)


def _ranks2(values: list[float]) -> list[int]:
    """Twice the mid-rank of each value of a sorted list (integers, ties sharing their mean)."""
    n = len(values)
    ranks2 = [0] * n
    i = 0
    while i < n:
        j = i
        while j + 1 < n and values[j + 1] == values[i]:
            j += 1
        ranks2[i : j + 1] = [i + j + 2] * (j - i + 1)  # twice the mean of ranks i+1 .. j+1
        i = j + 1
    return ranks2


def rank_test(before: Sequence[float], after: Sequence[float]) -> RankTest | None:
    """The Mann-Whitney U test of two samples of durations; None when either is empty."""
    n1, n2 = len(before), len(after)
    if not n1 or not n2:
        return None
    n = n1 + n2
    sb = sorted(before)
    # U of after: for each call after, the calls before that were shorter, ties counting half.
    # Binary searches mapped at C speed: a million calls a side took 3.7 s on a loaded
    # 2-core machine (sorting (value, side) tuples of the pooled calls: 16 s).
    u2 = sum(map(bisect_left, repeat(sb, n2), after)) + sum(
        map(bisect_right, repeat(sb, n2), after)
    )
    u = u2 / 2
    effect = u / (n1 * n2)
    if n <= EXACT_LIMIT:
        pooled = sorted([*before, *after])
        ranks2 = _ranks2(pooled)
        # The doubled rank sum of after, from U: S = U + n2 (n2 + 1) / 2.
        return RankTest(u, effect, _exact_two_sided(ranks2, n2, u2 + n2 * (n2 + 1)), True)
    mean = n1 * n2 / 2
    ties = Counter(before)
    ties.update(after)
    tie_term = sum(t**3 - t for t in ties.values() if t > 1) / (n * (n - 1))
    var = n1 * n2 / 12 * ((n + 1) - tie_term)
    if var <= 0:  # every call took the same time
        return RankTest(u, effect, 1.0, False)
    z = max(0.0, abs(u - mean) - 0.5) / math.sqrt(var)
    return RankTest(u, effect, min(1.0, math.erfc(z / math.sqrt(2))), False)


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
    ``"faster"`` (a significant change), ``"same"`` (within the run-to-run spread); ``site``:
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

    def to_json(self) -> dict[str, Any]:
        """The diff as JSON-able data (times in ns)."""
        return {
            "alpha": self.alpha,
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
