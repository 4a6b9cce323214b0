"""``Profile``, the result of ``kprof.profile()`` as the user holds it: a profile's data with
the methods that report, export, save and compare it.

The layers stay one-way: ``ProfileData`` (``kprof_core.data``) sits below every reader
(``io``, ``analysis``, ``renderers``), and this module sits above them all, so that no reader
ever imports ``Profile`` back.
"""

from __future__ import annotations

import html
import os
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import IO, Any, Literal, overload

from kprof_core.analysis.compare import DEFAULT_ALPHA, Comparison, DiffRow
from kprof_core.analysis.compare import diff as _diff
from kprof_core.analysis.drift import Drift, window_label
from kprof_core.analysis.drift import drift as _drift
from kprof_core.analysis.idle import Analysis, analyse
from kprof_core.data.config_summary import grouping
from kprof_core.data.profile_data import ProfileData
from kprof_core.data.site_summary import SiteRow, StackRow
from kprof_core.data.summary import Durations, Summary
from kprof_core.data.tree import TreeNode, device_tree
from kprof_core.io import exports, storage
from kprof_core.renderers.analysis import analysis_html, analysis_lines
from kprof_core.renderers.chrome import write_chrome_trace
from kprof_core.renderers.console import render, rows_lines, summary_lines
from kprof_core.renderers.diff import diff_html, render_diff
from kprof_core.renderers.drift import drift_lines
from kprof_core.renderers.html import write_html
from kprof_core.renderers.notebook import notebook_html
from kprof_core.renderers.speedscope import write_speedscope
from kprof_core.renderers.terminal import lines
from kprof_core.renderers.tree_html import root_html
from kprof_core.renderers.tree_text import tree_lines

__all__ = [
    "Analysis",
    "DiffRow",
    "Durations",
    "Profile",
    "ProfileDiff",
    "ProfileSummary",
    "ProfileTree",
    "SiteSummary",
    "StackSummary",
    "Summary",
    "WindowDrift",
    "drift",
    "load",
    "loads",
]


class ProfileTree:
    """Device time as a tree (``Profile.tree()``); print it. ``root``: the ``TreeNode`` at
    its top (``kind``, ``name``, ``site``, ``total_ns``, ``share``, ``calls``, ``children``),
    whose totals equal the summary's device totals."""

    def __init__(self, root: TreeNode) -> None:
        self.root = root

    def report(self, min_share: float = 0.0) -> str:
        """The tree as text; nodes under ``min_share`` percent are counted, not shown."""
        return lines(tree_lines(self.root, min_share))

    def __str__(self) -> str:
        return self.report()

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # IPython shows the tree
        p.text(self.report())

    def _repr_html_(self) -> str:  # notebooks: the collapsible tree and the flame graph
        return root_html(self.root)


class ProfileDiff(Comparison):
    """How one profile differs from another (``Profile.diff``): every name, section by
    section, largest change in total time first; print it for the comparison table."""

    def report(self, labels: tuple[str, str] | list[str] = ("before", "after")) -> str:
        """The printed comparison (``kprof diff``); ``labels`` name the two profiles."""
        return render_diff(self, labels)

    def __str__(self) -> str:
        return self.report()

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # IPython shows the report
        p.text(self.report())

    def _repr_html_(self) -> str:
        return diff_html(self)


class WindowDrift(Drift):
    """How the windows of one run drift (``kprof.drift``); print it for the table."""

    def report(self) -> str:
        """The printed table (``kprof drift``)."""
        return lines(drift_lines(self))

    def __str__(self) -> str:
        return self.report()

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # IPython shows the report
        p.text(self.report())


def drift(
    windows: Sequence[ProfileData],
    labels: Sequence[str] | None = None,
    alpha: float = DEFAULT_ALPHA,
) -> WindowDrift:
    """Every window's device time per call against the first window's, name by name: the
    median in each, the ratio, and the windows where the change stands out of the spread (the
    Mann-Whitney U test of ``Profile.diff``, at ``alpha`` over all windows together); see
    :mod:`kprof_core.analysis.drift`. ``labels`` name the windows (default: their steps)."""
    if labels is None:
        labels = [window_label(w, f"window {i + 1}") for i, w in enumerate(windows)]
    return _drift(windows, labels, alpha, WindowDrift)


class ProfileAnalysis(Analysis):
    """Where the devices' time went (``Profile.analysis()``); print it for the section."""

    def report(self) -> str:
        """The printed section, as ``print(p)`` shows it."""
        return lines(analysis_lines(self))

    def __str__(self) -> str:
        return self.report()

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # IPython shows the report
        p.text(self.report())

    def _repr_html_(self) -> str:
        return analysis_html(self)


@dataclass(frozen=True)
class ProfileSummary(Summary):
    """Per-name statistics (``Profile.summary()``); print it for the tables, as ``print(p)``
    shows them. ``by``: how the device table groups its rows (``summary(by=...)``)."""

    by: str | tuple[str, ...] = "name"

    def report(self) -> str:
        """The printed tables."""
        return lines(summary_lines(self, self.by))

    def __str__(self) -> str:
        return self.report()

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # IPython shows the tables
        p.text(self.report())

    def _repr_html_(self) -> str:
        return f"<pre>{html.escape(self.report())}</pre>"


class _PrintedRows:
    """How a list of ``SiteRow`` or ``StackRow`` prints: its table under ``title``."""

    title = ""

    def report(self) -> str:
        """The printed table (every row)."""
        return lines(rows_lines(self.title, self))  # type: ignore[arg-type]  # a list of rows

    def __str__(self) -> str:
        return self.report()

    def __repr__(self) -> str:
        return f"<{type(self).__name__}: {len(self)} rows; print it for the table>"  # type: ignore[arg-type]

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # IPython shows the table
        p.text(self.report())

    def _repr_html_(self) -> str:
        return f"<pre>{html.escape(self.report())}</pre>"


class SiteSummary(_PrintedRows, list[SiteRow]):
    """Device time per launch site (``Profile.summary(by="line")``): a list of ``SiteRow``,
    largest total first; print it for the table."""

    title = "Device time by line"


class StackSummary(_PrintedRows, list[StackRow]):
    """Device time per launch stack (``Profile.summary(by="stack")``): a list of
    ``StackRow``, largest total first; print it for the table."""

    title = "Device time by stack"


class Profile(ProfileData):
    __doc__ = (ProfileData.__doc__ or "").rstrip() + (
        "\n    - ``windows``: the finished windows of a ``kprof.profile(schedule=...)`` without\n"
        '      ``on_window`` (each a ``Profile``, its steps in ``meta["window"]``).\n    '
    )

    def __init__(self, trace: bool = False, backends: list[str] | None = None) -> None:
        super().__init__(trace, backends)
        #: The finished windows of a ``kprof.profile(schedule=...)`` without ``on_window``.
        self.windows: list[Profile] = []

    def analysis(self, range: str | None = None) -> ProfileAnalysis:
        """Why the device waits: busy and idle time per device and per queue over the
        profile's span (or the instances of the host range named ``range``), idle split into
        waiting for the host, waiting on another queue and unexplained; launch-to-start delays
        (aligned clocks only), short kernels, queue depth, overlap between queues, and a
        one-line verdict. Host-timed (``*``) and approximate (``~``) rows are left out and
        counted. Every definition is in :mod:`kprof_core.analysis.idle`.
        """
        a = analyse(self, range)
        return ProfileAnalysis(**{f: getattr(a, f) for f in a.__dataclass_fields__})

    def diff(self, other: ProfileData, alpha: float | None = None, by: str = "name") -> ProfileDiff:
        """How ``other`` (after) differs from this profile (before), name by name.

        Per name: calls, median and total time before and after, the ratio of the medians, and
        whether the change stands out of the run-to-run spread of the per-call durations (a
        Mann-Whitney U test at ``alpha``, default 0.01); see :mod:`kprof_core.analysis.compare`.
        ``by="line"``: a row per name and launch site (profiles taken with ``sites=True``), so
        that the same kernel launched from two places is two rows; ``by="config"``: a row per
        name and launch configuration (``DiffRow.config``).
        """
        return _diff(self, other, DEFAULT_ALPHA if alpha is None else alpha, ProfileDiff, by)

    # -- output -------------------------------------------------------------------------------------

    @overload
    def summary(self, by: Literal["line"]) -> SiteSummary: ...  # type: ignore[overload-overlap]
    @overload
    def summary(self, by: Literal["stack"]) -> StackSummary: ...  # type: ignore[overload-overlap]
    @overload
    def summary(self, by: str | tuple[str, ...] | list[str] = ...) -> ProfileSummary: ...
    def summary(
        self, by: str | tuple[str, ...] | list[str] = "name"
    ) -> ProfileSummary | SiteSummary | StackSummary:
        """Per-name statistics of the host side, the device side and device ranges; with
        ``by="line"``, the device time of kernels and copies per launch site (``SiteRow``s,
        largest total first, with the kernels launched from each); with ``by="stack"``, the
        same per launch stack (``StackRow``s; ``profile(stacks=True)``); with ``by=("name",
        "config")`` the device rows per name and launch configuration (``SummaryRow.config``),
        with ``by="config"`` per configuration alone. Each prints as its table and shows as
        one in notebooks."""
        got = super().summary(by)
        key = grouping(by)
        if isinstance(got, Summary):
            return ProfileSummary(**{f.name: getattr(got, f.name) for f in fields(Summary)}, by=key)
        return SiteSummary(got) if key == "line" else StackSummary(got)

    def save(self, path: Any, compress: bool = True) -> None:
        """Save to a ``.kprof`` file (a path or a binary file); ``kprof.load`` reads it back.

        The format is documented in ``kprof_core.io.storage``; ``compress=False`` writes the
        columns raw (larger, a little faster).
        """
        storage.save(self, path, compress=compress)

    def report(
        self, trace: bool | None = None, by: str | tuple[str, ...] | list[str] = "name"
    ) -> str:
        """The printed report: the summary, and the trace when ``trace`` (default: as profiled);
        a scheduled profile's is its windows' reports, each under its steps. ``by``: how the
        device table groups its rows, as ``summary(by=...)`` (``("name", "config")`` adds a
        Config column)."""
        trace = self.trace if trace is None else trace
        key = grouping(by)
        if "windows" not in self.meta:
            return render(self, trace, key)
        info = self.meta["windows"]
        head = (
            f"kprof: {self.meta.get('steps', 0)} steps, {info['schedule']}: "
            f"{info['delivered']} window(s)"
        )
        if len(self.windows) < info["delivered"]:
            head += " (handed to on_window, not kept here)"
        if "note" in info:
            head += f"\n ! {info['note']}"
        return "\n\n".join([head, *(w.report(trace, key) for w in self.windows)])

    def __str__(self) -> str:
        return self.report()

    def __repr__(self) -> str:
        nr, nk = self.counts
        return f"<kprof.Profile {self.span_ns} ns, {nr} ranges, {nk} kernels>"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # IPython shows the report
        p.text(self.report())

    def _repr_html_(self) -> str | None:
        """Notebooks show the timeline (a self-contained frame) and the summary tables."""
        return notebook_html(self)

    # -- exports (kprof_core.renderers.chrome, .html and kprof_core.io.exports) ---------------------

    def export_chrome_trace(self, path: str | os.PathLike[str] | IO[str]) -> None:
        """Write a Chrome trace / Perfetto JSON file (open it in ui.perfetto.dev)."""
        write_chrome_trace(path, [self])

    def export_perfetto(self, path: str | os.PathLike[str] | IO[bytes]) -> None:
        """Write Perfetto's native trace format (``.pftrace``; open it in ui.perfetto.dev):
        the Chrome trace's tracks, slices, flows and counters as protobuf with interned
        names, several times smaller and faster to load than JSON. Streamed to disk."""
        from kprof_core.renderers.perfetto import write_perfetto

        write_perfetto(path, [self])

    def tree(self) -> ProfileTree:
        """Device time as a tree: ``kprof.range`` blocks, then the lines of code that launched
        (outermost frame first: the whole stack with ``profile(stacks=True)``, the launch site
        alone with ``sites=True``), then kernels, each with device time, share and calls.
        Print it; its ``root`` is the ``TreeNode`` the HTML and notebook views draw."""
        return ProfileTree(device_tree(self))

    def export_speedscope(self, path: str | os.PathLike[str] | IO[str]) -> None:
        """Write the device-time tree as a speedscope file (open it in www.speedscope.app):
        a sampled profile weighted by device nanoseconds, frames with file and line."""
        write_speedscope(path, self)

    def export_html(self, path: str | os.PathLike[str] | IO[str]) -> None:
        """Write a self-contained HTML timeline (zoom, pan, tooltips) with the summary tables."""
        write_html(path, [self])

    @overload
    def to_json(self, path: None = None) -> dict[str, Any]: ...
    @overload
    def to_json(self, path: str | os.PathLike[str] | IO[str]) -> None: ...

    def to_json(
        self, path: str | os.PathLike[str] | IO[str] | None = None
    ) -> dict[str, Any] | None:
        """The records, summary and meta as JSON-able data; with ``path``, written there as JSON."""
        return exports.to_json(self, path)

    def to_csv(self, path: str | os.PathLike[str] | IO[str] | None = None) -> str | None:
        """Every record as CSV: the text when ``path`` is None, else written there."""
        return exports.to_csv(self, path)

    def to_dataframe(self) -> Any:
        """Every record as a ``pandas.DataFrame`` (needs pandas: ``pip install pandas``)."""
        return exports.to_dataframe(self)


def load(source: storage.PathOrFile) -> Profile:
    """Read a profile saved by ``Profile.save`` (a path or a binary file); a file that is not a
    readable profile raises ``ProfileFileError`` saying why (see ``kprof_core.io.storage``)."""
    return storage.load(source, Profile)


def loads(data: bytes, name: str = "<bytes>") -> Profile:
    """A profile from the bytes of a ``.kprof`` file (``storage.dumps``); ``name`` in errors."""
    return storage.loads(data, name, Profile)
