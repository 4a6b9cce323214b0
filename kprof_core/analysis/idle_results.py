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
    ``window_ns`` (what shares are of), ``busy_ns``, ``idle_ns`` (window − busy) split into
    ``host_wait_ns``, ``dependency_wait_ns`` and ``unexplained_ns`` (they add up to
    ``idle_ns``). ``rows``: device rows analysed (those starting in the window); ``short_rows``
    and ``short_ns``: how many ran shorter than their launch call took, and their device time;
    ``median_duration_ns`` and ``median_launch_ns``: of the rows' device durations and of their
    launch calls (lower median). ``delays``: launch-to-start delays (None where the clock is not
    aligned, or no rows). ``aligned``: whether the device's clock was aligned to the host's
    (without it, the split by cause rests on the fallback placement); ``error_ns``: its bound.
    ``depth_max`` and ``depth_mean``: queue depth. ``overlap_ns``: for a device, the time two or
    more of its queues were busy at once (0 for a queue).
    """

    key: str
    title: str
    backend: str
    window_ns: int
    busy_ns: int
    host_wait_ns: int
    dependency_wait_ns: int
    unexplained_ns: int
    rows: int
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

    def share(self, ns: int) -> float:
        """``ns`` as a fraction of the window (0 for an empty window)."""
        return ns / self.window_ns if self.window_ns else 0.0


@dataclass(frozen=True)
class Analysis:
    """Where the devices' time went (``Profile.analysis()``).

    ``range``: the host range whose instances are the windows (None: the profile's span);
    ``windows``: how many; ``window_ns``: their total length. ``devices`` and ``queues``: one
    :class:`GroupAnalysis` each; ``overlaps``: ``(queue key, queue key, ns)`` for each pair of
    queues of one device that were busy at the same time. ``skipped``: rows left out, by
    reason (``"host-timed"``, ``"approximate"``, ``"unresolved"``). ``error_ns``: the largest
    clock error bound among aligned devices (None when none is). ``kind`` and ``verdict``: the
    diagnosis in one line, decided on the busiest device by its largest share of the window:
    busy → ``"device-bound"``, waiting for the host → ``"launch-bound"``, waiting on another
    queue → ``"dependency-bound"``, unexplained → ``"unexplained idle"``; ``"no device work"``
    when nothing could be analysed. ``notes``: what the figures rest on, in words.
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


def verdict(devices: list[GroupAnalysis]) -> tuple[str, str]:

    if not devices or not any(g.rows for g in devices):
        return "no device work", "no device work to analyse"
    g = busiest(devices)
    where = f" (on {g.title})" if len(devices) > 1 else ""
    shares = {
        "device-bound": g.busy_ns,
        "launch-bound": g.host_wait_ns,
        "dependency-bound": g.dependency_wait_ns,
        "unexplained idle": g.unexplained_ns,
    }
    kind = max(shares, key=lambda k: shares[k])  # ties: the order above
    busy = pct(g.share(g.busy_ns))
    if kind == "device-bound":
        return kind, f"device-bound: {busy} busy{where}"
    if kind == "launch-bound":
        advice = "fuse kernels or use CUDA graphs" if g.backend == "cuda" else "fuse kernels"
        short = g.short_rows / g.rows if g.rows else 0.0
        return kind, (
            f"launch-bound: the device was idle {pct(g.share(g.host_wait_ns))} of the span "
            f"waiting for the host{where}; {pct(short)} of kernels ran shorter than their launch "
            f"took (median {format_time(g.median_duration_ns)} vs "
            f"{format_time(g.median_launch_ns)}); {advice}"
        )
    if kind == "dependency-bound":
        return kind, (
            f"dependency-bound: the device was idle {pct(g.share(g.dependency_wait_ns))} of the "
            f"span waiting on another queue{where}; {busy} busy; overlap independent work"
        )
    return kind, (
        f"unexplained idle: the device was idle {pct(g.share(g.unexplained_ns))} of the span "
        f"with work enqueued{where} (start latency, host events, work kprof does not see); "
        f"{busy} busy"
    )


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
