"""Property-based tests of the summary statistics: every row is consistent with the records."""

from __future__ import annotations

import statistics

from hypothesis import given
from hypothesis import strategies as st

from kprof_core.data.records import HOST_TIMED, KERNEL, UNRESOLVED, QueueRecord, ThreadRecord
from kprof_core.result import Profile

NAMES = ["a", "b", "c"]
rows = st.lists(
    st.tuples(
        st.sampled_from(NAMES), st.integers(0, 10**12), st.sampled_from([0, HOST_TIMED, UNRESOLVED])
    ),
    max_size=60,
)


def profile_of(data: list[tuple[str, int, int]], span: int) -> Profile:
    p = Profile()
    p.start_ns, p.end_ns = 0, span
    p.names = list(NAMES)
    p.queues = [QueueRecord("b", "d", "q", "b:d")]
    p.threads = [ThreadRecord(1, "t")]
    for i, (name, dur, flags) in enumerate(data):
        p.table.append(NAMES.index(name), KERNEL, 0, 0, i, i + 1, i, dur, -1, flags)
        if flags & UNRESOLVED:
            p.errors[i] = "lost"
    return p


@given(rows, st.integers(1, 10**13))
def test_summary_matches_the_records(data: list[tuple[str, int, int]], end: int) -> None:
    p = profile_of(data, end)
    summary = p.summary()
    span = p.span_ns
    # The span covers the block and every resolved record.
    assert span >= end and all(
        span >= i + d for i, (_n, d, f) in enumerate(data) if not f & UNRESOLVED
    )
    expected: dict[tuple[str, bool], list[int]] = {}
    for name, dur, flags in data:
        if not flags & UNRESOLVED:
            expected.setdefault((name, bool(flags & HOST_TIMED)), []).append(dur)
    assert {(r.name, r.host_timed) for r in summary.device} == set(expected)
    for r in summary.device:
        durs = expected[(r.name, r.host_timed)]
        assert r.calls == len(durs)
        assert r.total_ns == sum(durs)
        assert (r.min_ns, r.max_ns) == (min(durs), max(durs))
        assert r.median_ns == statistics.median(durs)
        assert r.min_ns <= r.median_ns <= r.max_ns and r.min_ns - 1 <= r.avg_ns <= r.max_ns + 1
        assert abs(r.avg_ns - sum(durs) / len(durs)) <= 1e-6 * max(1, r.avg_ns)
        assert abs(r.percent - 100 * r.total_ns / span) < 1e-9 * max(1.0, r.percent)
        assert r.std_ns >= 0
    totals = [r.total_ns for r in summary.device]
    assert totals == sorted(totals, reverse=True)
    assert sum(r.calls for r in summary.device) + len(p.unresolved) == len(data)
    # Every launch is host activity, resolved or not.
    assert sum(r.calls for r in summary.host) == len(data)
