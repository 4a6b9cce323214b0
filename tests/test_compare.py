"""Comparing profiles: the rank test against known answers, and ``Profile.diff`` on synthetic
profiles whose changes are known (seeded, so every number here is deterministic)."""

from __future__ import annotations

import itertools
import math
import random
from fractions import Fraction
from pathlib import Path

import pytest
from tracecheck import synthetic

from kprof_core.analysis import ranktest
from kprof_core.analysis.compare import rank_test
from kprof_core.data.records import COPY, HOST_TIMED, KERNEL, PLACED, DeviceTable
from kprof_core.result import Profile


def brute_force_p(before: list[float], after: list[float]) -> Fraction:
    """The exact two-sided p-value by enumerating every split of the pooled calls."""
    pooled = sorted(before + after)
    rank = {}
    for v in set(pooled):
        idx = [i + 1 for i, x in enumerate(pooled) if x == v]
        rank[v] = Fraction(sum(idx), len(idx))
    ranks = [rank[v] for v in pooled]
    n, m = len(pooled), len(after)
    mean = Fraction(m * (n + 1), 2)
    observed = abs(sum(rank[v] for v in after) - mean)
    splits = list(itertools.combinations(range(n), m))
    extreme = sum(1 for c in splits if abs(sum(ranks[i] for i in c) - mean) >= observed)
    return Fraction(extreme, len(splits))


# -- the test itself -----------------------------------------------------------------------------------


def test_complete_separation_has_the_textbook_p_value() -> None:
    t = rank_test([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])
    assert t is not None and t.exact
    assert t.p_value == pytest.approx(2 / 252)  # 2 of C(10, 5) splits are as extreme
    assert t.u == 25 and t.effect == 1.0
    down = rank_test([6, 7, 8, 9, 10], [1, 2, 3, 4, 5])
    assert down is not None and down.p_value == pytest.approx(2 / 252) and down.effect == 0.0


def test_identical_samples_are_not_different() -> None:
    t = rank_test([5, 5, 5], [5, 5, 5])
    assert t is not None and t.p_value == 1.0 and t.effect == 0.5


def test_one_call_each_can_never_be_significant() -> None:
    t = rank_test([100], [1_000_000])
    assert t is not None and t.p_value == 1.0


@pytest.mark.parametrize("seed", range(12))
def test_exact_p_values_match_enumeration_with_ties(seed: int) -> None:
    rng = random.Random(seed)
    n1, n2 = rng.randrange(1, 8), rng.randrange(1, 8)
    # Few distinct values: many ties, as coarse device clocks give.
    before = [rng.randrange(10) for _ in range(n1)]
    after = [rng.randrange(3, 13) for _ in range(n2)]
    t = rank_test(before, after)
    assert t is not None and t.exact
    assert t.p_value == pytest.approx(float(brute_force_p(before, after)), rel=1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_the_normal_approximation_is_close_to_the_exact_value(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(100 + seed)
    before = [rng.lognormvariate(0, 0.3) for _ in range(25)]
    after = [rng.lognormvariate(0.1, 0.3) for _ in range(25)]
    exact = rank_test(before, after)
    monkeypatch.setattr(ranktest, "EXACT_LIMIT", 0)
    approx = rank_test(before, after)
    assert exact is not None and approx is not None and exact.exact and not approx.exact
    assert approx.p_value == pytest.approx(exact.p_value, abs=0.01)
    assert approx.u == exact.u


def test_a_large_sample_uses_the_normal_approximation() -> None:
    # 40 against 40, complete separation: z = (800 - 0.5) / sqrt(40*40*81/12)
    t = rank_test(list(range(40)), list(range(100, 140)))
    assert t is not None and not t.exact
    z = 799.5 / math.sqrt(40 * 40 * 81 / 12)
    assert t.p_value == pytest.approx(math.erfc(z / math.sqrt(2)), rel=1e-12)


def test_a_ten_percent_slowdown_is_found_and_noise_is_not() -> None:
    """On lognormal per-call times with 10 % spread, 60 calls a side: a 10 % slowdown is
    significant for (nearly) every seed tried, and the false-alarm rate on identical
    distributions stays near alpha."""
    found, alarms = 0, 0
    for seed in range(100):
        rng = random.Random(seed)
        base = [1e5 * rng.lognormvariate(0, 0.1) for _ in range(60)]
        same = [1e5 * rng.lognormvariate(0, 0.1) for _ in range(60)]
        slower = [1.1e5 * rng.lognormvariate(0, 0.1) for _ in range(60)]
        t_same, t_slow = rank_test(base, same), rank_test(base, slower)
        assert t_same is not None and t_slow is not None
        alarms += t_same.p_value < 0.01
        found += t_slow.p_value < 0.01 and t_slow.effect > 0.5
    assert alarms <= 4  # expected 1 in 100 at alpha 0.01
    assert found >= 95  # the test's power at n = 60, a shift of one spread, is about 0.99


def test_empty_sides_have_no_test() -> None:
    assert rank_test([], [1, 2]) is None and rank_test([1], []) is None


# -- Profile.diff ----------------------------------------------------------------------------------------


def profile_with(
    kernels: dict[str, list[int]],
    ranges: dict[str, list[int]] | None = None,
    host_timed: tuple[str, ...] = (),
) -> Profile:
    """A finished profile holding exactly these per-call kernel durations (ns)."""
    p = Profile()
    p.start_ns, p.end_ns = 1_000, 1_000
    from kprof_core.data.records import QueueRecord, ThreadRecord

    p.threads = [ThreadRecord(1, "MainThread")]
    p.queues = [QueueRecord("testdev", "0", "queue 1", "testdev:0")]
    t = DeviceTable()
    now = 1_000
    for name, durs in kernels.items():
        if name not in p.names:
            p.names.append(name)
        for d in durs:
            t.append(
                name=p.names.index(name),
                kind=COPY if name.startswith("[") else KERNEL,
                flags=PLACED | (HOST_TIMED if name in host_timed else 0),
                queue=0,
                thread=0,
                launch_start=now,
                launch_end=now + 10,
                start=now + 20,
                duration=d,
                nbytes=-1,
            )
            now += d + 100
    p.table = t
    p.end_ns = now
    for name, durs in (ranges or {}).items():
        p.names.append(name)
        for d in durs:
            p.host.append(
                name=p.names.index(name), kind=p.host.RANGE, thread=0, start=now, end=now + d
            )
            now += d
    return p


def test_diff_reports_counts_medians_totals_and_ratio() -> None:
    before = profile_with(
        {"mul2": [100, 110, 120, 130, 140, 150, 160, 170], "add": [50] * 8, "old": [10, 10]}
    )
    after = profile_with(
        {
            "mul2": [200, 210, 220, 230, 240, 250, 260, 270],
            "add": [50] * 6 + [51, 49],
            "new": [7, 9, 8],
        }
    )
    d = before.diff(after)
    mul = d.row("mul2")
    assert (mul.calls_before, mul.calls_after) == (8, 8)
    assert (mul.median_before, mul.median_after) == (135.0, 235.0)
    assert (mul.total_before, mul.total_after) == (1080, 1880)
    assert mul.ratio == pytest.approx(235 / 135)
    assert mul.significant and mul.status == "slower" and mul.effect == 1.0
    assert mul.p_value == pytest.approx(2 / math.comb(16, 8))
    add = d.row("add")
    assert add.status == "same" and not add.significant and add.ratio == 1.0
    assert d.row("new").status == "new" and d.row("new").calls_before == 0
    assert d.row("new").ratio is None and d.row("new").median_before is None
    assert d.row("old").status == "gone" and d.row("old").total_after == 0
    # Largest absolute change in total time first.
    assert [r.name for r in d.section("device")] == ["mul2", "new", "old", "add"]
    assert [r.name for r in d.slowdowns(1.5)] == ["mul2"]
    assert d.slowdowns(1.8) == []


def test_diff_keeps_host_rows_in_their_own_section() -> None:
    before = profile_with({"k": [100] * 5}, ranges={"step": [1000] * 5})
    after = profile_with({"k": [100] * 5}, ranges={"step": [3000] * 5})
    d = before.diff(after)
    step = d.row("step", "host")
    assert step.status == "slower" and step.ratio == 3.0
    assert "step" not in [r.name for r in d.section("device")]
    # Host slowdowns are reported but do not count as device-time slowdowns.
    assert d.slowdowns() == []
    assert [r.name for r in d.slowdowns(sections=("host",))] == ["step"]


def test_diff_of_a_profile_with_itself_finds_nothing() -> None:
    p = synthetic(500, seed=3)
    d = p.diff(p)
    assert d.rows and all(r.status == "same" and r.p_value == 1.0 for r in d.rows)
    assert all(r.ratio == 1.0 and r.change_ns == 0 for r in d.rows)


def test_diff_of_two_runs_finds_the_changed_kernel_only() -> None:
    a, b = synthetic(2000, seed=1), synthetic(2000, seed=2)
    nid = b.names.index("kernel_a")
    for i in range(len(b.table)):
        if b.table.name[i] == nid:
            b.table.duration[i] = b.table.duration[i] * 2 + 3000
    d = a.diff(b)
    assert [r.name for r in d.section("device") if r.significant] == ["kernel_a"]
    assert d.row("kernel_a").status == "slower"
    assert d.row("kernel_a").ratio == pytest.approx(2.2, abs=0.2)


def test_diff_json_and_report() -> None:
    before = profile_with({"mul2": [100 + i for i in range(8)]})
    after = profile_with({"mul2": [300 + i for i in range(8)]})
    d = before.diff(after)
    data = d.to_json()
    assert data["alpha"] == 0.01 and data["rows"][0]["name"] == "mul2"
    assert data["rows"][0]["status"] == "slower" and data["rows"][0]["calls_after"] == 8
    text = d.report(labels=("a.kprof", "b.kprof"))
    assert "Comparing b.kprof" in text and "with a.kprof" in text
    assert "slower (p=0.00016)" in text and "2.93x" in text
    assert "1 significant device-time slowdown: mul2 2.93x" in text
    html = d._repr_html_()
    assert '<tr data-status="slower">' in html and "<td>2.93x</td>" in html


def test_diff_rejects_bad_arguments() -> None:
    p = profile_with({"k": [1]})
    with pytest.raises(ValueError, match="alpha"):
        p.diff(p, alpha=1.5)
    with pytest.raises(TypeError, match=r"two kprof\.Profile"):
        p.diff("x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown section"):
        p.diff(p).section("gpu")


def test_rows_timed_on_the_host_never_count_as_device_time_slowdowns() -> None:
    slow = [400, 410, 420, 430, 440, 450]
    before = profile_with(
        {"synced": [100, 110, 120, 130, 140, 150], "timed": [100] * 6}, host_timed=("synced",)
    )
    after = profile_with({"synced": slow, "timed": [100] * 6}, host_timed=("synced",))
    d = before.diff(after)
    row = d.row("synced")
    assert row.host_timed and row.label == "synced *" and row.status == "slower"
    assert d.slowdowns() == []
    assert [r.label for r in d.slowdowns(host_timed=True)] == ["synced *"]
    text = d.report()
    assert "significant device-time slowdown" not in text
    assert text.endswith(
        "their changes follow the host's load and never count as device-time slowdowns"
    )


def test_rows_observed_on_the_host_are_marked_and_never_count_as_slowdowns() -> None:
    from kprof_core.data.records import APPROXIMATE, HOST_TIMED

    def observed(p: Profile) -> Profile:  # every record approximate (a queue without profiling)
        for i in range(len(p.table)):
            p.table.flags[i] = (p.table.flags[i] & ~HOST_TIMED) | APPROXIMATE
        return p

    before = observed(profile_with({"k": [100, 110, 120, 130, 140, 150]}))
    after = observed(profile_with({"k": [400, 410, 420, 430, 440, 450]}))
    d = before.diff(after)
    row = d.row("k")
    assert (row.host_timed, row.approximate, row.label, row.status) == (
        False,
        True,
        "k ~",
        "slower",
    )
    assert d.slowdowns() == [] and [r.label for r in d.slowdowns(host_timed=True)] == ["k ~"]
    assert d.report().endswith("never count as device-time slowdowns")
    assert "*" not in d.report()


# -- too few calls to tell -------------------------------------------------------------------------


def test_the_smallest_p_value_the_test_can_reach() -> None:
    assert ranktest.min_p_value(1, 1) == 1.0
    assert ranktest.min_p_value(3, 3) == pytest.approx(2 / 20)
    assert ranktest.min_p_value(5, 5) == pytest.approx(2 / 252)
    # It is what complete separation gives: the test cannot go below it.
    t = rank_test([1, 2, 3], [4, 5, 6])
    assert t is not None and t.p_value == pytest.approx(ranktest.min_p_value(3, 3))
    assert ranktest.min_p_value(0, 4) == 1.0
    assert ranktest.min_p_value(100, 100) < 1e-30  # the normal approximation's
    assert ranktest.calls_needed(0.01) == 5  # 2 / C(10, 5) < 0.01 <= 2 / C(8, 4)
    assert ranktest.calls_needed(0.002) == 7  # drift's 0.01 over five windows


def test_a_copy_with_one_call_a_side_is_too_few_not_same() -> None:
    before = profile_with({"[copy host to device]": [1_000], "k": [100] * 6})
    after = profile_with({"[copy host to device]": [9_000], "k": [100] * 6})
    d = before.diff(after)
    row = d.row("[copy host to device]")
    assert (row.status, row.significant) == ("too few calls", False)
    assert d.row("k").status == "same"  # six calls a side can tell, and the times agree
    assert [r.name for r in d.undecided()] == ["[copy host to device]"]
    assert d.slowdowns() == []
    text = str(d)
    assert "too few calls" in text
    assert "at least 5 calls a side are needed" in text
    assert d.to_json()["calls_needed"] == 5


def test_kprof_diff_gate_names_rows_it_cannot_judge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kprof_core.cli.main import main

    profile_with({"k": [100, 100, 100]}).save(tmp_path / "a.kprof")
    profile_with({"k": [900, 900, 900]}).save(tmp_path / "b.kprof")
    code = main(
        ["diff", str(tmp_path / "a.kprof"), str(tmp_path / "b.kprof"), "--fail-above", "1.1"]
    )
    err = capsys.readouterr().err
    assert code == 0  # nothing significant: the gate passes, and says what it could not judge
    assert (
        "the gate could not judge 1 row with too few calls (at least 5 a side needed): k (3→3)"
        in err
    )
