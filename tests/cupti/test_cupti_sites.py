"""Launch sites of CUPTI's rows through CUPTI's callback API, against the CUPTI test double,
on both readers (compiled and pure Python): the scenarios of ``cupti_sites_child.py``, one
child process per reader, each asserting the same exact sites, stacks, counts and notes (so
both readers give identical results). Like ``test_cupti_double.py``: a double that cannot be
built fails, never skips."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

SCENARIOS = (
    "each_row_has_its_line",
    "stacks_with_stacks_true",
    "off_costs_nothing",
    "only_the_launching_threads_take_the_gil",
    "threads_each_their_line",
    "nested_profile_without_sites",
    "another_subscriber",
    "allocations_have_their_line",
    "either_recorder",
)


@pytest.fixture(scope="session", params=["compiled", "pure"])
def site_results(
    request: pytest.FixtureRequest, cupti_libdir: Path, cupti_child: Callable[..., dict[str, str]]
) -> dict[str, str]:
    return cupti_child("cupti_sites_child.py", cupti_libdir, request.param)


def test_every_scenario_ran(site_results: dict[str, str]) -> None:
    assert sorted(site_results) == sorted(SCENARIOS)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_cupti_site_scenario(site_results: dict[str, str], scenario: str) -> None:
    assert site_results.get(scenario) == "ok", site_results.get(scenario, "did not run")
