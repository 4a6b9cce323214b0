"""kprof's own CUPTI reader, against the CUPTI test double, on both paths.

The double (tests/cupti_double) is built here with the system cc from the public headers of
NVIDIA's wheels; the scenarios (cupti_child.py) run in one child process per reader (the
compiled ``kprof_cuda._cupti`` and the pure-Python one) that loads the double first. These
tests must run in CI: a double that cannot be built fails them, never skips them; the compiled
path is skipped only where the extension was not built (no C compiler: .ci/run checks it is).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

# The scenarios of cupti_child.py (importing it would load the double into this process).
SCENARIOS = (
    "records_become_rows",
    "cuptis_default_clock_is_the_wall_clock",
    "two_profiles_on_two_threads",
    "outside_the_profile_is_not_recorded",
    "propagated_thread",
    "nested_profiles",
    "buffers_drained_while_running",
    "records_dropped_without_buffers_are_said",
    "runtime_api_records",
    "graph_launch_records",
    "a_batched_copy_is_every_copy_it_made",
    "past_the_launch_limit_the_oldest_are_forgotten",
    "every_graph_node_is_waited_for",
    "late_records_dropped_counted_said",
    "subscriber_taken_falls_back_to_events",
    "no_double_counting_with_cupti",
    "ranges_span_their_work_without_events",
    "streams_share_rows_with_events",
    "order_independent_join",
    "dropped_records_never_make_the_end_wait",
    "a_buffer_that_cannot_be_allocated_is_not_held_against_later_ones",
    "a_fork_inside_a_profile_leaves_cupti_alone_in_the_child",
    "calls_of_an_older_cupti_are_still_enabled_one_by_one",
    "a_newer_cupti_than_any_checked_is_said",
    "buffer_policy_by_api_version",
    "forced_flush_at_the_last_end",
    "unknown_kinds_skipped_and_counted",
    "contexts_do_not_collide",
    "kernels_running_at_the_end_are_waited_for",
    "earlier_drops_never_cut_short_the_wait_for_running_kernels",
    "a_failed_launch_is_never_waited_for",
    "a_launch_that_made_no_work_is_not_waited_for",
    "memory_records_become_allocations",
    "memory_outside_the_profile_is_not_recorded",
    "another_cupti_client_between_two_profiles",
    "a_buffer_of_another_client_is_read_never_freed",
)


@pytest.fixture(scope="session", params=["compiled", "pure"])
def results(
    request: pytest.FixtureRequest, cupti_libdir: Path, cupti_child: Callable[..., dict[str, str]]
) -> dict[str, str]:
    return cupti_child("cupti_child.py", cupti_libdir, request.param)


def test_every_scenario_ran(results: dict[str, str]) -> None:
    assert sorted(results) == sorted(SCENARIOS)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_cupti_scenario(results: dict[str, str], scenario: str) -> None:
    assert results.get(scenario) == "ok", results.get(scenario, "scenario did not run")
