"""A clock for kprof's deadlines that tests drive (see the ``fake_clock`` fixture)."""

from __future__ import annotations

import time


class FakeClock:
    """The clock kprof's deadlines read (``kprof_core._clock``), driven by the test: it moves
    only when a test's plugin says a call took time (``advance``) or kprof pauses between
    polls (``sleep``: the pause is also made for real, so that a real device thread makes
    progress meanwhile). Tests assert on it, never on wall time, which a loaded machine
    stretches."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps = 0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps += 1
        self.now += seconds
        time.sleep(seconds)

    def advance(self, seconds: float) -> None:
        self.now += seconds
