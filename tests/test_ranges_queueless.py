"""A range entered before the thread has a current queue gets no device time; the report
says so (and why) instead of showing fewer device ranges than host ones unexplained.
PyOpenCL users meet it in every profile whose first range comes before the first launch."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import kprof
from kprof_core.low_level import native

PATHS = [pytest.param(True, id="compiled"), pytest.param(False, id="pure")]


@pytest.fixture(params=PATHS)
def path(request: pytest.FixtureRequest) -> Iterator[bool]:
    if request.param and native._module is None:
        pytest.skip("the compiled recorder is not built here")
    native.use_compiled(request.param)
    yield request.param
    native.use_compiled(native.os.environ.get(native.ENV, "") in ("", "0"))


def test_a_range_without_a_current_queue_is_said(tdq: Any, path: bool) -> None:
    q = tdq()
    with kprof.profile(backends=["testdev"]) as p:
        for _ in range(2):
            with kprof.range("first"):
                pass
        with q, kprof.range("step"):
            q.launch("k", 10)
    q.finish()
    assert [r.name for r in p.device_ranges] == ["step"]
    [note] = p.meta["notes"]
    assert note.startswith("2 of 2 'first' ranges have no span on testdev (their device time")
    assert f"! {note}" in str(p)


def test_nothing_is_said_for_a_backend_the_program_did_not_use(tdq: Any, path: bool) -> None:
    q = tdq()
    with kprof.profile(backends=["testdev"]) as p, kprof.range("first"):
        pass
    q.finish()
    assert "notes" not in p.meta
