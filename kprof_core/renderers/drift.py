"""``kprof drift`` as text: one line per name, its trend across the windows."""

from __future__ import annotations

from kprof_core.analysis.compare import TOO_FEW
from kprof_core.analysis.drift import Drift, DriftRow
from kprof_core.data.timefmt import format_time

BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float | None]) -> str:
    """The medians as bars from the row's lowest up; the scale spans at least a quarter of
    the first known median, so that a steady kernel's spread stays low bars. A window
    without calls is blank."""
    known = [v for v in values if v is not None]
    if not known:
        return ""
    lo, hi = min(known), max(known)
    span = max(hi - lo, 0.25 * known[0])
    return "".join(
        " "
        if v is None
        else BARS[0]
        if not span
        else BARS[min(len(BARS) - 1, int((v - lo) / span * len(BARS)))]
        for v in values
    )


def _time(v: float | None) -> str:
    return "-" if v is None else format_time(round(v))


def _worst(r: DriftRow, labels: list[str]) -> str:
    w = r.worst
    return "-" if w is None else f"{w[1]:.2f}× ({labels[w[0]]})"


def drift_lines(d: Drift) -> list[str]:
    """The printed drift table."""
    n = len(d.labels)
    head = (
        f"Drift of device time per call across {n} windows, each against the first "
        f"({d.labels[0]}); flagged when a Mann-Whitney U test gives p < {d.alpha_per_window:.2g} "
        f"(alpha {d.alpha:g} over {n - 1} comparisons):"
    )
    headers = [
        "First median",
        "Last median",
        "Last/first",
        "Per step first→last",
        "Worst flagged",
        "Flagged",
        "Status",
    ]
    nums = len(headers)
    body = []
    for r in d.rows:
        flagged = sum(1 for f in r.flagged if f)
        last = r.ratios[-1]
        steps = r.per_step or [None]
        body.append(
            [
                _time(r.medians[0]),
                _time(r.medians[-1]),
                "-" if last is None else f"{last:.2f}×",
                "-"
                if steps[0] is None and steps[-1] is None
                else f"{_time(steps[0])} → {_time(steps[-1])}",
                _worst(r, d.labels),
                f"{flagged} of {n - 1}",
                r.status,
                sparkline(r.medians),
                r.label,
            ]
        )
    cols = [*headers, "Trend", "Name"]
    widths = (
        [max(len(c), *(len(row[i]) for row in body)) for i, c in enumerate(cols)]
        if body
        else [len(c) for c in cols]
    )

    def line(cells: list[str]) -> str:
        out = [c.rjust(w) for c, w in zip(cells[:nums], widths[:nums], strict=True)]
        out.append(cells[nums].ljust(widths[nums]))
        out.append(cells[nums + 1])
        return " " + "  ".join(out)

    out = [head, line(cols), line(["─" * w for w in widths[:-1]] + ["─" * 4])]
    out += [line(row) for row in body]
    if not body:
        out.append(" (no device-side activity in these windows)")
    few = [r for r in d.rows if r.status == TOO_FEW]
    if few:
        out.append(
            f" (too few calls: {len(few)} name{'s' * (len(few) != 1)} had so few calls in a "
            f"window that the test could not reach p < {d.alpha_per_window:.2g}; at least "
            f"{d.calls_needed} calls a window are needed to flag one)"
        )
    return out
