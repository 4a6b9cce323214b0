"""The results of the idle analysis (``Profile.analysis()``): per device and per queue, and
the verdict in one line with its evidence. The definitions are in :mod:`.idle`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from kprof_core.data.timefmt import format_time


@dataclass(frozen=True)
class DelayStats:
    """Launch-to-start delays (ns): ``count`` rows, ``min``, ``p50``, ``p90``, ``p99``,
    ``max`` (nearest-rank percentiles) and ``mean`` (rounded down)."""

    count: int
    min: int
    p50: int
    p90: int
    p99: int
    max: int
    mean: int

    @staticmethod
    def of(values: Sequence[int]) -> DelayStats | None:
        """The statistics of ``values``, or None when there are none."""
        n = len(values)
        if not n:
            return None
        v = sorted(values)

        def rank(q: int) -> int:  # nearest rank: the smallest value with q % at or below it
            return v[max(0, -(-q * n // 100) - 1)]

        return DelayStats(n, v[0], rank(50), rank(90), rank(99), v[-1], sum(v) // n)


@dataclass(frozen=True)
class GroupAnalysis:
    """The analysis of one device or one queue over the window.

    ``key``: the device key (``"opencl:0"``), or ``"<device key>/<queue label>"`` for a queue;
    ``title``: how reports name it; ``backend``: its backend's name. Times in ns:
    ``window_ns`` (what shares are of), ``busy_ns``, ``idle_ns`` (window − busy) split by
    cause into ``launch_wait_ns`` (the host inside the launch call of the work that came next),
    ``host_wait_ns`` (the host's own work between launches: nothing launched yet),
    ``dependency_wait_ns`` (launched, waiting on another queue's work) and ``start_wait_ns``
    (launched, nothing kprof sees to wait for, not started yet: the driver preparing or
    submitting it, a host event); they add up to ``idle_ns``. ``rows``: device rows analysed
    (kernels and copies starting in the window); ``kernels``: how many of them are kernels;
    ``short_rows`` and ``short_ns``: how many kernels ran shorter than their launch call took,
    and their device time; ``median_duration_ns`` and ``median_launch_ns``: of the kernels'
    device durations and of their launch calls (lower median; copies are not kernels).
    ``delays``: launch-to-start delays of all rows (None where the clock is not aligned, or no
    rows). ``aligned``: whether the device's clock was aligned to the host's (without it, the
    split by cause rests on the fallback placement); ``error_ns``: its bound. ``depth_max``
    and ``depth_mean``: queue depth. ``overlap_ns``: for a device, the time two or more of its
    queues were busy at once (0 for a queue).
    """

    key: str
    title: str
    backend: str
    window_ns: int
    busy_ns: int
    launch_wait_ns: int
    host_wait_ns: int
    dependency_wait_ns: int
    start_wait_ns: int
    rows: int
    kernels: int
    short_rows: int
    short_ns: int
    median_duration_ns: int
    median_launch_ns: int
    delays: DelayStats | None
    aligned: bool
    error_ns: int | None
    depth_max: int
    depth_mean: float
    overlap_ns: int = 0

    @property
    def idle_ns(self) -> int:
        """The window less busy time."""
        return self.window_ns - self.busy_ns

    @property
    def unexplained_ns(self) -> int:
        """The name ``start_wait_ns`` had before it was understood (kept for old callers)."""
        return self.start_wait_ns

    def share(self, ns: int) -> float:
        """``ns`` as a fraction of the window (0 for an empty window)."""
        return ns / self.window_ns if self.window_ns else 0.0


@dataclass(frozen=True)
class Analysis:
    """Where the devices' time went (``Profile.analysis()``).

    ``range``: the host range whose instances are the windows (None: the profile's active
    span, from the first analysed device work's start to the last one's end); ``windows``: how
    many; ``window_ns``: their total length. ``before_ns`` and ``after_ns``: for the active
    span, the profile's time before its first device work (start-up: contexts, program
    builds) and after its last, which are left out of every share (None for a range).
    ``devices`` and ``queues``: one :class:`GroupAnalysis` each; ``overlaps``: ``(queue key,
    queue key, ns)`` for each pair of queues of one device that were busy at the same time.
    ``skipped``: rows left out, by reason (``"host-timed"``, ``"approximate"``,
    ``"unresolved"``). ``error_ns``: the largest clock error bound among aligned devices
    (None when none is). ``first_launch_wait_ns``: for a ``"start-bound"`` verdict, the part of
    that device's waiting to start that came before a kernel's first launch in the profile
    (drivers compile or upload a kernel then; None for other verdicts). ``kind`` and ``verdict``: the diagnosis in one
    line (:func:`verdict` gives the rule for each). ``notes``: what the figures rest on.
    """

    range: str | None
    windows: int
    window_ns: int
    devices: list[GroupAnalysis]
    queues: list[GroupAnalysis]
    overlaps: list[tuple[str, str, int]]
    skipped: dict[str, int]
    error_ns: int | None
    kind: str
    verdict: str
    notes: list[str] = field(default_factory=list)
    before_ns: int | None = None
    after_ns: int | None = None
    first_launch_wait_ns: int | None = None

    def device(self, key: str | None = None) -> GroupAnalysis:
        """One device's analysis by key or title (the busiest when ``key`` is None)."""
        if key is None:
            if not self.devices:
                raise KeyError("no device work was analysed")
            return busiest(self.devices)
        for g in self.devices:
            if key in (g.key, g.title):
                return g
        raise KeyError(f"no device {key!r}; devices: {[g.key for g in self.devices]}")

    def queue(self, key: str) -> GroupAnalysis:
        """One queue's analysis by key (``"<device key>/<queue label>"``) or title."""
        for g in self.queues:
            if key in (g.key, g.title):
                return g
        raise KeyError(f"no queue {key!r}; queues: {[g.key for g in self.queues]}")

    def to_dict(self) -> dict[str, Any]:
        """The analysis as JSON-able data."""
        return asdict(self)


def busiest(groups: list[GroupAnalysis]) -> GroupAnalysis:
    return max(groups, key=lambda g: (g.busy_ns, g.rows))


def pct(x: float) -> str:
    """A share as reports print it (``"64 %"``; below 1 %, one decimal)."""
    v = 100 * x
    if 0 < v < 0.1:
        return "< 0.1 %"
    return f"{v:.1f} %" if 0 < v < 1 or 99 < v < 100 else f"{v:.0f} %"


#: The idle causes as reports show them: column header, ``GroupAnalysis`` field, in words.
CAUSES = (
    ("Wait launch", "launch_wait_ns", "the host inside launch calls"),
    ("Wait host", "host_wait_ns", "the host's own work"),
    ("Wait queue", "dependency_wait_ns", "waiting on another queue"),
    ("Wait start", "start_wait_ns", "launched, not yet started"),
)

#: Fewer exactly timed device rows than this on the busiest device: no verdict ("too few").
MIN_ROWS = 2

#: The kinds, in the order that breaks a tie between equal shares.
KINDS = ("device-bound", "launch-bound", "host-bound", "dependency-bound", "start-bound")


def decide(devices: list[GroupAnalysis]) -> tuple[str, GroupAnalysis | None]:
    """The verdict's kind and the device it is about (the busiest).

    - ``"no device work"``: nothing analysed; ``"too few rows"``: fewer than ``MIN_ROWS`` rows
      on the busiest device (one piece of work has no gap to explain).
    - Otherwise the largest of the device's shares of the window: busy → ``"device-bound"``;
      the host inside launch calls → ``"launch-bound"``; the host's own work between launches
      → ``"host-bound"``; launched work waiting on another queue → ``"dependency-bound"``;
      launched work not started, with nothing kprof sees to wait for → ``"start-bound"``.
    - ``"cannot tell"``: an idle cause came out largest on a device whose clock is not aligned
      to the host's (the split of idle time by cause rests on launches and device work sharing
      one clock).
    """
    if not devices or not any(g.rows for g in devices):
        return "no device work", None
    g = busiest(devices)
    if g.rows < MIN_ROWS:
        return "too few rows", g
    shares = dict(
        zip(
            KINDS,
            (g.busy_ns, g.launch_wait_ns, g.host_wait_ns, g.dependency_wait_ns, g.start_wait_ns),
        )
    )
    kind = max(shares, key=lambda k: shares[k])  # ties: the order of KINDS
    if kind != "device-bound" and not g.aligned:
        return "cannot tell", g
    return kind, g


def verdict(
    kind: str,
    g: GroupAnalysis | None,
    many: bool,
    first_wait: int | None = None,
    typical_wait: int | None = None,
) -> str:
    """The verdict in one line: the kind, the figure that decided it, and advice only where
    the figures printed beside it support it (``many``: the profile has several devices, so
    the line names this one; for ``"start-bound"``: ``first_wait``, the part of the waiting to
    start that came before kernels' first launches with their configuration, and
    ``typical_wait``, the median waiting to start before a row)."""
    if g is None:
        return "no device work to analyse"
    where = f" (on {g.title})" if many else ""
    busy = pct(g.share(g.busy_ns))
    if kind == "too few rows":
        return (
            f"too few device rows to tell why the device waits{where} "
            f"(n={g.rows}; at least {MIN_ROWS} needed)"
        )
    if kind == "device-bound":
        return f"device-bound: {busy} busy{where}"
    if kind == "cannot tell":
        return (
            f"cannot tell why the device waits{where}: its clock is not aligned to the host's; "
            f"{busy} busy"
        )
    if kind == "launch-bound":
        said = (
            f"launch-bound: the device was idle {pct(g.share(g.launch_wait_ns))} of the span "
            f"while the host was inside launch calls{where}"
        )
        if not g.kernels:
            return said + " (copies only)"
        d, ln = g.median_duration_ns, g.median_launch_ns
        said += (
            f"; kernels ran a median {format_time(d)} against {format_time(ln)} per launch "
            f"call, {pct(g.short_rows / g.kernels)} of them shorter than their call"
        )
        if d < ln:
            return said + (
                "; fuse kernels or use CUDA graphs" if g.backend == "cuda" else "; fuse kernels"
            )
        return said + "; kernels are not shorter than their calls: look for calls that block"
    if kind == "host-bound":
        return (
            f"host-bound: the device was idle {pct(g.share(g.host_wait_ns))} of the span "
            f"while the host did its own work between launches{where}; {busy} busy; speed up "
            f"or overlap that work (a host profiler such as pyinstrument shows where it goes)"
        )
    if kind == "dependency-bound":
        return (
            f"dependency-bound: the device was idle {pct(g.share(g.dependency_wait_ns))} of the "
            f"span waiting on another queue{where}; {busy} busy; overlap independent work"
        )
    said = (
        f"start-bound: launched work waited {pct(g.share(g.start_wait_ns))} of the span "
        f"before the device began it{where}; {busy} busy"
    )
    if first_wait is not None and 2 * first_wait > g.start_wait_ns:
        return said + (
            f"; {pct(g.share(first_wait))} came before a kernel's first launch, which the "
            f"driver prepares (compiles) then: warm kernels up before the profile"
        )
    if g.kernels and typical_wait is not None and g.median_duration_ns < typical_wait:
        return said + (
            f"; kernels ran a median {format_time(g.median_duration_ns)} against a median "
            f"{format_time(typical_wait)} of waiting to start before each, the driver's "
            f"overhead per command: fuse kernels (fewer, larger launches)"
        )
    return said + "; the driver's latency, a wait on a host event, or work kprof does not see"


def notes(devices: list[GroupAnalysis], skipped: dict[str, int], errors: list[int]) -> list[str]:
    out = []
    if skipped:
        parts = ", ".join(f"{n} {why}" for why, n in skipped.items())
        out.append(
            f"left out: {parts} row{'s' * (sum(skipped.values()) != 1)}, the analysis takes exact device times only"
        )
    unaligned = [g.title for g in devices if not g.aligned]
    if unaligned:
        out.append(
            "clock not aligned to the host's on "
            + ", ".join(unaligned)
            + ": no launch-to-start delays, and the split of idle time rests on the first work"
            " being placed at its launch"
        )
    if errors:
        out.append(f"launch-to-start delays within the clock error bound of {max(errors)} ns")
    bound = max(errors, default=0)
    early = [g.title for g in devices if g.delays is not None and g.delays.min < -bound]
    if early:
        # Not a clock error: on PoCL the kernel runs on the host's cores and can start (and
        # end) before clEnqueueNDRangeKernel returns, and a descheduled launching thread
        # returns late by milliseconds. Seen on PyOpenCL's own examples.
        out.append(
            "negative launch-to-start delays on " + ", ".join(early) + ": the device began"
            " that work before its launch call returned"
        )
    return out
