"""Drift between windows of one run: did step 10,000 get slower than step 100?

``kprof drift DIR`` and ``kprof.drift(windows)`` compare every window's device time per call
with the first window's, name by name, by the same test as ``kprof diff``
(:mod:`kprof_core.analysis.compare`: a two-sided Mann-Whitney U test on the per-call
durations). With ``k`` later windows each name is tested ``k`` times, so a window is flagged
only when ``p < alpha / k`` (Bonferroni): a steady kernel over a hundred windows is then
flagged by chance with probability at most ``alpha``, not a hundred times that.

Per name (kernels and copies, device time): the median per call in each window, its ratio to
the first window's, its device time per step (the window's total over its steps, where the
windows know their steps: a kernel called more often per step drifts there, not per call),
which windows are flagged and in which direction, and a status: ``slower`` or ``faster`` (the
flagged window whose ratio is furthest from 1 decides), ``steady`` (no window flagged, and
every comparison could have flagged one), ``too few calls`` (no window flagged, and at least one
comparison had so few calls that the test could not reach its threshold: see
:func:`kprof_core.analysis.compare.min_p_value`), ``new`` (absent from the first window) or
``gone`` (absent from a later one, where it had been).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from kprof_core.analysis.compare import TOO_FEW, Comparison, diff
from kprof_core.analysis.ranktest import calls_needed
from kprof_core.data.profile_data import ProfileData


@dataclass(frozen=True)
class DriftRow:
    """One name across the windows (``None`` where the window has no call of it)."""

    name: str
    host_timed: bool
    approximate: bool
    calls: list[int]
    medians: list[float | None]
    ratios: list[float | None]  # median / the first window's median
    p_values: list[float | None]
    flagged: list[str]  # per window: "slower", "faster" or "" (window 0: always "")
    status: str
    #: Device time per step in each window (None: no call, or the window's steps unknown).
    per_step: list[float | None] | None = None

    @property
    def worst(self) -> tuple[int, float] | None:
        """(window, ratio) of the flagged window whose ratio is furthest from 1, if any."""
        best: tuple[int, float] | None = None
        for i, (f, r) in enumerate(zip(self.flagged, self.ratios, strict=True)):
            if f and r is not None and r > 0:
                if best is None or abs(math.log(r)) > abs(math.log(best[1])):
                    best = (i, r)
        return best

    @property
    def label(self) -> str:
        return (
            f"{self.name} *"
            if self.host_timed
            else f"{self.name} ~"
            if self.approximate
            else self.name
        )


@dataclass(frozen=True)
class Drift:
    """Every device name across the windows, most drifted first; ``labels`` name the windows."""

    labels: list[str]
    rows: list[DriftRow]
    alpha: float

    @property
    def alpha_per_window(self) -> float:
        return self.alpha / max(1, len(self.labels) - 1)

    @property
    def calls_needed(self) -> int:
        """The fewest calls a window (the same in both) with which the test can flag one."""
        return calls_needed(self.alpha_per_window)

    def undecided(self, host_timed: bool = False) -> list[DriftRow]:
        """Names whose comparisons had too few calls to flag anything (status ``"too few
        calls"``): a gate (``kprof drift --fail-above``) cannot vouch for them and names them."""
        return [
            r
            for r in self.rows
            if r.status == TOO_FEW and (host_timed or not (r.host_timed or r.approximate))
        ]

    def row(self, name: str) -> DriftRow:
        for r in self.rows:
            if r.name == name:
                return r
        raise KeyError(f"no device row named {name!r}; names: {[r.name for r in self.rows]}")

    def slowdowns(self, above: float = 1.0, host_timed: bool = False) -> list[DriftRow]:
        """Names with a flagged slower window whose ratio exceeds ``above`` (what ``kprof drift
        --fail-above`` fails on); rows timed or observed on the host only with ``host_timed``
        (they follow the host's load, as in ``Comparison.slowdowns``)."""
        out = []
        for r in self.rows:
            if not host_timed and (r.host_timed or r.approximate):
                continue
            if any(
                f == "slower" and x is not None and x > above
                for f, x in zip(r.flagged, r.ratios, strict=True)
            ):
                out.append(r)
        return out

    def to_json(self) -> dict[str, Any]:
        """As JSON-able data (times in ns)."""
        return {
            "alpha": self.alpha,
            "alpha_per_window": self.alpha_per_window,
            "calls_needed": self.calls_needed,
            "test": "Mann-Whitney U, two-sided, each window against the first (Bonferroni)",
            "windows": self.labels,
            "rows": [asdict(r) for r in self.rows],
        }


D = TypeVar("D", bound=Drift)


def window_label(p: ProfileData, fallback: str) -> str:
    """``steps 100-109`` (``step 7``) for a window, else ``fallback`` (a file name)."""
    w = p.meta.get("window")
    if isinstance(w, dict) and "first_step" in w:
        a, b = w["first_step"], w.get("last_step")
        return f"step {a}" if a == b else f"steps {a}-{b}"
    return fallback


def window_steps(p: ProfileData) -> int | None:
    """How many steps a window holds (None where it says nothing of its steps)."""
    w = p.meta.get("window")
    if isinstance(w, dict):
        first, last = w.get("first_step"), w.get("last_step")
        if isinstance(first, int) and isinstance(last, int) and last >= first:
            return last - first + 1
    return None


def drift(profiles: Sequence[ProfileData], labels: Sequence[str], alpha: float, cls: type[D]) -> D:
    """Every window against the first (see the module docstring), as a ``cls``."""
    if len(profiles) < 2:
        raise ValueError(f"drift needs at least two windows, got {len(profiles)}")
    k = len(profiles) - 1
    per = alpha / k
    comps = [diff(profiles[0], p, per, Comparison) for p in profiles[1:]]
    found = [{(r.name, r.host_timed, r.approximate): r for r in c.section("device")} for c in comps]
    keys = {key for f in found for key in f}
    steps = [window_steps(p) for p in profiles]
    rows = []
    for name, ht, ap in keys:
        calls: list[int] = []
        medians: list[float | None] = []
        ratios: list[float | None] = []
        totals: list[int] = []
        pvals: list[float | None] = [None]
        flagged = [""]
        few = False
        for i, f in enumerate(found):
            r = f.get((name, ht, ap))
            if i == 0:
                calls.append(r.calls_before if r else 0)
                medians.append(r.median_before if r else None)
                ratios.append(1.0 if r and r.median_before else None)
                totals.append(r.total_before if r else 0)
            calls.append(r.calls_after if r else 0)
            medians.append(r.median_after if r else None)
            ratios.append(r.ratio if r else None)
            totals.append(r.total_after if r else 0)
            pvals.append(r.p_value if r else None)
            flagged.append(r.status if r and r.status in ("slower", "faster") else "")
            few = few or (r is not None and r.status == TOO_FEW)
        if not calls[0]:
            status = "new"
        elif not all(calls):
            status = "gone"
        else:
            status = TOO_FEW if few else "steady"
        per_step: list[float | None] = [
            t / n if c and n else None for t, n, c in zip(totals, steps, calls, strict=True)
        ]
        row = DriftRow(name, ht, ap, calls, medians, ratios, pvals, flagged, status, per_step)
        worst = row.worst
        if worst is not None and status in ("steady", TOO_FEW):
            status = flagged[worst[0]]
        rows.append(
            DriftRow(name, ht, ap, calls, medians, ratios, pvals, flagged, status, per_step)
        )

    def order(r: DriftRow) -> tuple[float, str]:
        w = r.worst
        return (-abs(math.log(w[1])) if w else 0.0, r.name)

    rows.sort(key=order)
    return cls(list(labels), rows, alpha)
