"""The two-sided Mann-Whitney U (Wilcoxon rank-sum) test that ``kprof diff``, ``kprof drift``
and the pytest gate decide with (:mod:`kprof_core.analysis.compare` says how), and the
smallest p-value it can reach with a given number of calls, which tells "too few calls" from
"same".

The p-value is exact for up to :data:`EXACT_LIMIT` calls in all, ties included (the null
distribution of the doubled mid-rank sum, counted over every way to split the calls), and
from the normal approximation with tie and continuity corrections above that.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat

EXACT_LIMIT = 60  # calls in all; C(64, 32) < 2**64, so every count fits one 64-bit slot


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


def min_p_value(n1: int, n2: int) -> float:
    """The smallest two-sided p-value the test can give with ``n1`` and ``n2`` calls: every
    call of one side shorter than every call of the other (no ties), exact up to
    :data:`EXACT_LIMIT` calls in all, else the normal approximation's."""
    if not n1 or not n2:
        return 1.0
    n = n1 + n2
    if n <= EXACT_LIMIT:
        return min(1.0, 2 / math.comb(n, n1))
    z = max(0.0, n1 * n2 / 2 - 0.5) / math.sqrt(n1 * n2 * (n + 1) / 12)
    return min(1.0, math.erfc(z / math.sqrt(2)))


def calls_needed(alpha: float) -> int:
    """The fewest calls a side (the same on both) with which the test can reach ``p < alpha``."""
    k = 1
    while min_p_value(k, k) >= alpha:
        k += 1
    return k


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


__all__ = ["EXACT_LIMIT", "RankTest", "calls_needed", "min_p_value", "rank_test"]
