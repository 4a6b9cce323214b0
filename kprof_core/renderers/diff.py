"""A comparison of two profiles (:mod:`kprof_core.analysis.compare`) as text and as HTML."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kprof_core.analysis.compare import SECTION_TITLES, TOO_FEW
from kprof_core.analysis.compare_groups import SECTIONS
from kprof_core.data.timefmt import format_time
from kprof_core.renderers.common import FOOTNOTE
from kprof_core.renderers.terminal import lines

if TYPE_CHECKING:
    from kprof_core.analysis.compare import Comparison, DiffRow

HEADERS = (
    "Calls",
    "Median before",
    "Median after",
    "Ratio",
    "Total before",
    "Total after",
    "Change",
    "Verdict",
)


def _p(p: float) -> str:
    return "p<0.0001" if p < 1e-4 else f"p={p:.2g}"


def verdict(r: DiffRow) -> str:
    """``slower (p=0.002)``, ``faster (...)``, ``same``, ``too few calls``, ``new`` or
    ``gone``."""
    if r.status in ("slower", "faster"):
        assert r.p_value is not None
        return f"{r.status} ({_p(r.p_value)})"
    return r.status


def cells(r: DiffRow) -> list[str]:
    def t(v: float | None) -> str:
        return "-" if v is None else format_time(v)

    change = r.change_ns
    return [
        f"{r.calls_before}→{r.calls_after}",
        t(r.median_before),
        t(r.median_after),
        "-" if r.ratio is None else f"{r.ratio:.2f}x",
        format_time(r.total_before),
        format_time(r.total_after),
        ("+" if change > 0 else "") + format_time(change),
        verdict(r),
    ]


BY_HEADINGS = {
    "line": ", by line (a row per name and launch site)",
    "config": ", by launch configuration (a row per name and configuration)",
}


def _heading(d: Comparison, labels: Sequence[str]) -> str:
    return (
        f"Comparing {labels[1]} ({format_time(d.span_after)}) with {labels[0]} "
        f"({format_time(d.span_before)})"
        + BY_HEADINGS.get(d.by, "")
        + "; a change is significant when the per-call "
        f"durations differ by a two-sided Mann-Whitney U test at p < {d.alpha:g}."
    )


def too_few_note(d: Comparison, few: Sequence[DiffRow]) -> str:
    """Why rows say "too few calls", and how many calls would do."""
    return (
        f"too few calls: {len(few)} row{'s' * (len(few) != 1)} had so few calls that the "
        f"test could not reach p < {d.alpha:g} whatever the times; neither same nor changed "
        f"(at least {d.calls_needed} calls a side are needed)"
    )


def _line(cs: Sequence[str], widths: Sequence[int]) -> str:
    return (" " + "  ".join(c.rjust(w) for c, w in zip(cs, widths)) + "  " + cs[-1]).rstrip()


def render_diff(d: Comparison, labels: Sequence[str] = ("before", "after")) -> str:
    """The text table of ``kprof diff``: one section per kind of row, largest change first."""
    out = [_heading(d, labels)]
    for section in SECTIONS:
        rows = d.section(section)
        if not rows:
            continue
        body = [[*cells(r), r.label] for r in rows]
        widths = [max(len(h), *(len(c[i]) for c in body)) for i, h in enumerate(HEADERS)]

        out += [
            "",
            SECTION_TITLES[section] + ":",
            _line([*HEADERS, "Name"], widths),
            _line(["─" * w for w in widths] + ["─" * 4], widths),
        ]
        out += [_line(c, widths) for c in body]
    if not d.rows:
        out += ["", "Neither profile recorded anything to compare."]
    slow = d.slowdowns()
    if slow:
        out += [
            "",
            f"{len(slow)} significant device-time slowdown{'s' * (len(slow) != 1)}: "
            + ", ".join(f"{r.label} {r.ratio:.2f}x" for r in slow),
        ]
    few = [r for r in d.rows if r.status == TOO_FEW]
    if few:
        out += ["", too_few_note(d, few)]
    if any(r.host_timed for r in d.rows):
        out += [
            "",
            FOOTNOTE.rstrip() + "; their changes follow the host's load and never count "
            "as device-time slowdowns",
        ]
    if any(r.approximate for r in d.rows):
        out += [
            "",
            " ~ approximate: observed on the host as the work completed (a queue without "
            "device timestamps); their changes follow the host's load and never count as "
            "device-time slowdowns",
        ]
    return lines(out)  # names come from files: escaped like every line for a terminal


def diff_html(d: Comparison, labels: Sequence[str] = ("before", "after")) -> str:
    """The comparison as static HTML tables (for the timeline page and notebooks)."""
    out = [
        '<section class="kprof-diff">',
        "<h2>Comparison</h2>",
        f"<p>{html.escape(_heading(d, labels))}</p>",
    ]
    for section in SECTIONS:
        rows = d.section(section)
        if not rows:
            continue
        out.append(
            f"<h3>{html.escape(SECTION_TITLES[section])}</h3><table><thead><tr>"
            + "".join(f"<th>{html.escape(h)}</th>" for h in HEADERS)
            + '<th class="name">Name</th></tr></thead><tbody>'
        )
        for r in rows:
            out.append(
                f'<tr data-status="{r.status}">'
                + "".join(f"<td>{html.escape(c)}</td>" for c in cells(r))
                + f'<td class="name">{html.escape(r.label)}</td></tr>'
            )
        out.append("</tbody></table>")
    if not d.rows:
        out.append("<p>Neither profile recorded anything to compare.</p>")
    few = [r for r in d.rows if r.status == TOO_FEW]
    if few:
        out.append(f"<p>{html.escape(too_few_note(d, few))}</p>")
    out.append("</section>")
    return "\n".join(out)
