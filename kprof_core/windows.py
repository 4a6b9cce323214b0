"""Windows of steps in a long run: ``kprof.schedule``, ``kprof.step()`` and the state machine
that opens one profile per window (``kprof.profile(schedule=...)``).

A step is the code between two calls of ``kprof.step()`` (step 0: from the profile's start to
the first call). The schedule says, per step, what to do with it, with torch.profiler's
meaning (users know it): nothing, warm up (capture runs, its records are discarded) or record.
Each run of recorded steps is one window: an ordinary profile of its own, entered at the
``step()`` that begins it and exited at the one that ends it, so that between windows no
recorder is active and launches cost what they cost outside any profile.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from kprof_core.result import Profile

#: What a step is for (torch.profiler.ProfilerAction's meaning and order).
NONE, WARMUP, RECORD, RECORD_AND_SAVE = 0, 1, 2, 3
ACTIONS = ("none", "warmup", "record", "record_and_save")


@dataclass(frozen=True)
class Schedule:
    """Which steps are recorded; see :func:`kprof.schedule`."""

    wait: int = 0
    warmup: int = 0
    active: int = 1
    repeat: int = 0
    skip_first: int = 0
    skip_first_wait: int = 0

    def __post_init__(self) -> None:
        for f in self.__dataclass_fields__:
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"kprof.schedule({f}=...) must be an int >= 0, not {v!r}")
        if self.active < 1:
            raise ValueError("kprof.schedule(active=...) must be at least 1 step")

    def __call__(self, step: int) -> int:
        """What step ``step`` (0 first) is for: ``NONE``, ``WARMUP``, ``RECORD``, or
        ``RECORD_AND_SAVE`` (the last step of a window). torch.profiler.schedule's rule."""
        if step < self.skip_first:
            return NONE
        step -= self.skip_first
        if self.skip_first_wait:  # the first cycle starts at its warmup
            step += self.wait
        cycle = self.wait + self.warmup + self.active
        if self.repeat and step // cycle >= self.repeat:
            return NONE
        mod = step % cycle
        if mod < self.wait:
            return NONE
        if mod < self.wait + self.warmup:
            return WARMUP
        return RECORD if mod < cycle - 1 else RECORD_AND_SAVE

    def next_active(self, step: int) -> int | None:
        """The first step from ``step`` on that is not ``NONE``; None when there is none."""
        step = max(step, self.skip_first)
        rel = step - self.skip_first + (self.wait if self.skip_first_wait else 0)
        cycle = self.wait + self.warmup + self.active
        if self.repeat and rel // cycle >= self.repeat:
            return None
        mod = rel % cycle
        return step + (self.wait - mod if mod < self.wait else 0)

    def describe(self) -> str:
        """The schedule in words, for reports and files."""
        parts = [f"{f}={getattr(self, f)}" for f in self.__dataclass_fields__]
        return "schedule(" + ", ".join(p for p in parts if not p.endswith("=0")) + ")"


def schedule(
    *,
    wait: int = 0,
    warmup: int = 0,
    active: int = 1,
    repeat: int = 0,
    skip_first: int = 0,
    skip_first_wait: int = 0,
) -> Schedule:
    """Which steps of a loop ``kprof.profile(schedule=...)`` records, as torch.profiler's.

    After ``skip_first`` steps, cycles of ``wait`` steps (nothing recorded), ``warmup`` steps
    (capture runs, records discarded: set-up costs stay out of the window) and ``active``
    steps (recorded: one window); ``repeat`` cycles in all (0: until the profile ends). With
    ``skip_first_wait=1`` the first cycle starts at its warmup. Steps are ended by
    ``kprof.step()``; step 0 runs from the profile's start to the first call.
    """
    return Schedule(wait, warmup, active, repeat, skip_first, skip_first_wait)


def steps_schedule(first: int, last: int, every: int | None = None, windows: int = 0) -> Schedule:
    """``kprof run --steps FIRST:LAST [--every N] [--windows K]``: steps ``first`` to ``last``
    (excluded) recorded, then again every ``every`` steps, ``windows`` times in all (0: no
    limit; 1 without ``every``)."""
    active = last - first
    if first < 0 or active < 1:
        raise ValueError(f"steps {first}:{last}: need 0 <= FIRST < LAST")
    if every is None:
        return Schedule(active=active, repeat=1 if windows == 0 else windows, skip_first=first)
    if every < active:
        raise ValueError(f"--every {every} is shorter than a window of {active} steps")
    return Schedule(
        wait=every - active, active=active, repeat=windows, skip_first=first, skip_first_wait=1
    )


def save_windows(
    directory: str | os.PathLike[str], prefix: str = "window"
) -> Callable[[Any], None]:
    """An ``on_window`` callback that saves each window as ``DIRECTORY/PREFIX-0001.kprof`` (the
    window's index, from 1; its steps are in ``meta["window"]``), making the directory."""
    os.makedirs(directory, exist_ok=True)

    def save(p: Any) -> None:
        p.save(os.path.join(directory, f"{prefix}-{p.meta['window']['index']:04d}.kprof"))

    return save


def check_schedule(sched: Any, on_window: Any, signalled: bool = False) -> None:
    """``TypeError`` saying which of ``profile(schedule=..., on_window=...)`` is wrong."""
    if sched is not None and not isinstance(sched, Schedule):
        raise TypeError(
            f"profile(schedule=...) takes kprof.schedule(...), not {type(sched).__name__}"
        )
    if on_window is not None and ((sched is None and not signalled) or not callable(on_window)):
        raise TypeError(
            "profile(on_window=...) takes a callable, with a schedule= or window_signal="
        )


class Windows:
    """One scheduled profile's steps and windows; ``kprof.step()`` drives it.

    ``open_window`` makes the profile a window runs under; ``hold`` keeps capture installed
    and returns what lets it go (used between a window that ends and one that starts at the
    same step, so that capture is not removed and installed again).
    """

    def __init__(
        self,
        sched: Schedule,
        open_window: Callable[[], AbstractContextManager[Profile]],
        hold: Callable[[], Callable[[], None]],
        outer: Profile,
        on_window: Callable[[Profile], Any] | None,
    ) -> None:
        self.sched, self.outer, self.on_window = sched, outer, on_window
        self._open_window, self._hold = open_window, hold
        self.step_num = 0
        self.thread = _ident()
        self._cm: AbstractContextManager[Profile] | None = None
        self._current: Profile | None = None
        self._kind = NONE  # WARMUP or RECORD while a profile is open
        self._first = 0
        self.delivered = 0
        self.discarded = 0  # warmups
        # Steps before this one need nothing done (no window open, none starting): the
        # common step between windows is then a counter and a comparison.
        self.wake = 0
        self._token: Any = None

    def describe(self) -> str:
        """What opens the windows, in words."""
        return self.sched.describe()

    def enter(self, clock: Callable[[], int]) -> None:
        """The scheduled profile's start: ``kprof.step()`` in this context drives it now."""
        self.outer.start_ns = clock()
        self._token = STEPPER.set(self)
        try:
            self._move(NONE, self.sched(0))
            self.begin()
        except BaseException:
            self.exit(clock)
            raise

    def begin(self) -> None:
        """What a kind of windows sets up last at the profile's start (``enter``): nothing
        here; the signal's handler (``windows_signal.py``)."""

    def exit(self, clock: Callable[[], int]) -> None:
        """The scheduled profile's end (``finish``), ``kprof.step()`` no longer driving it."""
        try:
            self.finish()
        finally:
            self.outer.end_ns = clock()
            try:
                STEPPER.reset(self._token)
            except ValueError:  # exited in another context than it entered
                STEPPER.set(None)

    def advance(self, n: int) -> None:
        """Step ``n`` begins (``step_num`` is already ``n``): close and open windows as the
        schedule says. ``kprof.step()`` calls it only from ``wake`` on."""
        self._move(self.sched(n - 1), self.sched(n))

    def _move(self, prev: int, nxt: int) -> None:
        recording = nxt in (RECORD, RECORD_AND_SAVE)
        close = self._cm is not None and (
            (self._kind == WARMUP and nxt != WARMUP)
            or (self._kind == RECORD and (prev == RECORD_AND_SAVE or not recording))
        )
        reopen = nxt != NONE and (close or self._cm is None)
        release = self._hold() if close and reopen else None
        try:
            if close:
                self._close(self.step_num - 1, partial=False)
            if reopen:
                self._open(WARMUP if nxt == WARMUP else RECORD)
        finally:
            if release is not None:
                release()
        if self._cm is None:
            wake = self.sched.next_active(self.step_num + 1)
            self.wake = sys.maxsize if wake is None else wake
        else:
            self.wake = 0

    def _open(self, kind: int) -> None:
        cm = self._open_window()
        self._current = cm.__enter__()
        self._cm, self._kind, self._first = cm, kind, self.step_num

    def _close(self, last: int, partial: bool) -> None:
        cm, p, kind = self._cm, self._current, self._kind
        assert cm is not None and p is not None
        self._cm = self._current = None
        self._kind = NONE
        cm.__exit__(None, None, None)
        if kind == WARMUP:
            self.discarded += 1
            return
        self.delivered += 1
        p.meta["window"] = {
            "index": self.delivered,
            **self.window_meta(last),
            **({"partial": True} if partial else {}),
        }
        self.deliver(p)

    def window_meta(self, last: int) -> dict[str, Any]:
        """What ``meta["window"]`` says of the window ending now, besides its index."""
        return {"first_step": self._first, "last_step": last, "schedule": self.sched.describe()}

    def deliver(self, p: Profile) -> None:
        """Hand a finished window to ``on_window``, or keep it in the outer profile."""
        if self.on_window is None:
            self.outer.windows.append(p)
        else:
            self.on_window(p)

    def finish(self) -> None:
        """The profile's end: a window still recording is delivered as it is (``partial``),
        a warmup discarded."""
        if self._cm is not None:
            self._close(self.step_num, partial=True)
        self.outer.meta["steps"] = self.step_num  # calls of kprof.step()
        self.outer.meta["windows"] = {
            "schedule": self.describe(),
            "delivered": self.delivered,
            "warmups_discarded": self.discarded,
        }
        if not self.delivered and self.sched is not NEVER:
            self.outer.meta["windows"]["note"] = self.why_none()

    def why_none(self) -> str:
        """Why a schedule recorded no window: what the report says under its head."""
        first = self.sched.next_active(0)
        if not self.step_num:
            return (
                "no window was recorded: kprof.step() was never called on the thread that "
                "entered the profile"
            )
        if first is None or first >= self.step_num:
            where = "never" if first is None else f"at step {first}"
            return (
                f"no window was recorded: the program made {self.step_num} step(s) "
                f"(kprof.step() calls) and the schedule's first window begins {where}"
            )
        return f"no window was recorded: every window opened was a warmup ({self.discarded})"


#: No step recorded: the schedule of windows opened by a signal only.
NEVER = Schedule(skip_first=sys.maxsize)

_ident = threading.get_ident

#: The scheduled profile of this context, which ``kprof.step()`` advances.
STEPPER: ContextVar[Windows | None] = ContextVar("kprof_stepper", default=None)
_get = STEPPER.get


def step() -> None:
    """Mark the end of a step of a loop (a training step). Inside ``kprof.profile(schedule=
    ...)`` it opens and closes windows as the schedule says; anywhere else it does nothing
    (one context-variable lookup), so it can stay in the loop. Call it where the profile was
    entered (the loop's own thread)."""
    w = _get()
    # Inlined (no method call): between windows a step is this, a counter and a comparison.
    if w is not None and _ident() == w.thread:  # counted on the profile's own thread only
        n = w.step_num = w.step_num + 1
        if n >= w.wake:
            w.advance(n)
