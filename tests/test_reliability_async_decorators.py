"""``@kprof.range`` and ``@kprof.profile()`` on coroutine and generator functions time their
execution, not the creation of the coroutine or generator object (issue 25, item 19: 67 µs
reported for a coroutine awaiting 50 ms). Checked by order, not by time: marks made while the
function runs lie inside the range, and inside the profile."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

import kprof


@kprof.range("step")
async def step() -> int:
    await asyncio.sleep(0)  # lets other tasks run: the range stays open meanwhile
    kprof.mark("inside")
    await asyncio.sleep(0)
    return 7


@kprof.range("gen")
def gen() -> Iterator[int]:
    for i in range(3):
        kprof.mark(f"item {i}")
        yield i
    return None


def encloses(r: Any, t: int) -> bool:
    return r.start_ns <= t <= r.end_ns


def test_a_range_on_an_async_def_times_its_await() -> None:
    async def main() -> int:
        return await step()

    with kprof.profile(device=False) as p:
        assert asyncio.run(main()) == 7
    [r] = [r for r in p.ranges if r.name == "step"]
    [m] = p.markers
    assert encloses(r, m.time_ns)  # was: the range ended before the coroutine ran


def test_a_range_on_a_generator_times_its_iteration() -> None:
    with kprof.profile(device=False) as p:
        assert list(gen()) == [0, 1, 2]
    [r] = [r for r in p.ranges if r.name == "gen"]
    assert len(p.markers) == 3 and all(encloses(r, m.time_ns) for m in p.markers)


def test_a_profile_on_an_async_def_profiles_its_await() -> None:
    @kprof.profile(device=False)
    async def work() -> str:
        await asyncio.sleep(0)
        kprof.mark("in the profile")
        return "done"

    assert asyncio.run(work()) == "done"
    p = work.last_profile  # type: ignore[attr-defined]
    assert [m.name for m in p.markers] == ["in the profile"]  # was: none, outside it


def test_a_profile_on_a_generator_profiles_its_iteration() -> None:
    @kprof.profile(device=False)
    def items() -> Iterator[int]:
        for i in range(2):
            kprof.mark(f"item {i}")
            yield i

    assert list(items()) == [0, 1]
    p = items.last_profile  # type: ignore[attr-defined]
    assert [m.name for m in p.markers] == ["item 0", "item 1"]


def test_async_generators_are_refused_with_the_reason() -> None:
    async def agen() -> Any:
        yield 1

    for deco, what in ((kprof.range("a"), "kprof.range"), (kprof.profile(), "kprof.profile")):
        with pytest.raises(TypeError, match=f"{what} cannot decorate the async generator"):
            deco(agen)
