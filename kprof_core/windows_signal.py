"""Windows opened and closed by a signal (``kprof.profile(window_signal=...)``, ``kprof run
--signal``), for programs that cannot be edited.

Until the program calls ``kprof.step()`` (in one that never does: always), a signal opens or
closes the window at once: the handler, which runs on the main thread between two bytecodes
of whatever it interrupted, enters or exits the window's profile itself. Unless it interrupted
kprof's own code: a harvest, capture being installed or removed, or a profile's end hold one
of kprof's ``OwnedLock``s, and a window opening or closing is marked busy here; re-entering
them could deadlock or tear their state, so the handler only notes the signal and the change
is made as that code lets go (``threads.when_free``, or the end of the transition). The
window records what the context the signal interrupted records (the script's, in ``kprof
run``: the main thread's code and the threads it hands the context with ``kprof.propagate``).

A window that closes at a signal is handed to ``on_window`` on a thread of its own, started
with the profile (never in the handler): saving and printing it must not run inside the
interrupted code (a write to the stream it was writing, a lock it holds), and an error there
must not be raised into it. Its end proper (resolving its work, building the ``Profile``)
runs in the handler, as it does at a step: it needs the thread and context that entered it.

Once the program has called ``kprof.step()``, windows open and close at the next step
instead (the handler only takes note), with exact step ranges, as ``--steps`` windows do.
"""

from __future__ import annotations

import signal
import sys
import threading
import warnings
from collections.abc import Callable
from contextlib import AbstractContextManager
from queue import Empty, SimpleQueue
from typing import Any

from kprof_core.recording.threads import holding, when_free
from kprof_core.result import Profile
from kprof_core.windows import NEVER, RECORD, Windows


def check_signal(value: Any, sched: Any) -> int | None:
    """The signal number ``profile(window_signal=...)`` asks for (True: ``SIGUSR2``), or None;
    an error saying what is wrong with it."""
    if value is False:
        return None
    if value is True:
        num = getattr(signal, "SIGUSR2", None)
        if num is None:
            raise ValueError(
                "profile(window_signal=True) uses SIGUSR2, which this platform lacks: "
                "give a signal number it has"
            )
        value = num
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"profile(window_signal=...) takes True or a signal number, not {value!r}")
    uncatchable = {getattr(signal, n, None) for n in ("SIGKILL", "SIGSTOP")}
    if value not in set(signal.valid_signals()) or value in uncatchable:
        raise ValueError(f"profile(window_signal={value}): not a signal a handler can catch")
    if sched is not None:
        raise ValueError(
            "profile(window_signal=...) opens and closes windows itself: give it no schedule="
        )
    return int(value)


def signame(num: int) -> str:
    """``SIGUSR2``, or ``signal 35`` for a number without a name."""
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


class Deliverer:
    """Hands each window it is given to ``on_window``, in order, on a thread of its own."""

    def __init__(self, on_window: Callable[[Profile], Any]) -> None:
        self.on_window = on_window
        # SimpleQueue.put is reentrant: safe in a signal handler, unlike Queue's lock.
        self.queue: SimpleQueue[Profile | None] = SimpleQueue()
        self.thread = threading.Thread(target=self._run, name="kprof-windows", daemon=True)
        self.thread.start()

    def put(self, p: Profile) -> None:
        self.queue.put(p)

    def _run(self) -> None:
        while (p := self.queue.get()) is not None:
            self._call(p)

    def _call(self, p: Profile) -> None:
        try:
            self.on_window(p)
        except Exception as exc:  # raised into no code of the user's: said, not lost
            warnings.warn(
                f"kprof: on_window failed for window {p.meta['window']['index']} "
                f"({type(exc).__name__}: {exc}); later windows are still handed to it",
                RuntimeWarning,
                stacklevel=1,
            )

    def close(self) -> None:
        """Deliver what is queued, then stop (the profile's end)."""
        self.queue.put(None)
        if self.thread.is_alive():
            self.thread.join()
        while True:  # a forked child has no such thread: what is left is delivered here
            try:
                p = self.queue.get_nowait()
            except Empty:
                return
            if p is not None:
                self._call(p)


class SignalWindows(Windows):
    """The windows of ``profile(window_signal=signum)``: each signal opens or closes one."""

    def __init__(
        self,
        signum: int,
        open_window: Callable[[], AbstractContextManager[Profile]],
        hold: Callable[[], Callable[[], None]],
        outer: Profile,
        on_window: Callable[[Profile], Any] | None,
    ) -> None:
        super().__init__(NEVER, open_window, hold, outer, on_window)
        self.signum = signum
        self.signals = 0
        self._pending = False  # at steps: a signal came, the next kprof.step() acts on it
        self._want = False  # at the signal: whether a window should be open now
        self._now = False  # the open window opened at a signal (and closes at one)
        # A window opens or closes on this thread: a signal waits for the end. Set until the
        # handler is in place, and from the profile's end on (a signal then changes nothing).
        self._busy = True
        self._previous: tuple[Any] | None = None
        self._deliverer: Deliverer | None = None

    def describe(self) -> str:
        return f"windows on {signame(self.signum)}"

    def begin(self) -> None:
        """Set the handler (only the main thread may: it raises elsewhere, nothing begun)."""
        if self.on_window is not None:
            self._deliverer = Deliverer(self.on_window)
        self._busy = False
        self._previous = (signal.signal(self.signum, self._signalled),)

    def _signalled(self, signum: int, frame: Any) -> None:
        self.signals += 1
        if self.step_num and not (self._want or self._now):
            # The program calls kprof.step(): its windows begin and end at steps.
            self._pending = True
            self.wake = 0
            return
        self._want = not self._want
        self._settle()

    def _settle(self) -> None:
        """Open or close the window as the signals asked, unless that would re-enter kprof's
        own code on this thread: then as it lets go (see the module's docstring)."""
        if self._busy or threading.get_ident() != self.thread:
            return
        if holding():
            when_free(self._settle)
            return
        self._busy = True
        try:
            while True:  # a signal in the middle asks again
                if self._want and self._cm is None:
                    self._open(RECORD)
                    self._now = True
                elif not self._want and self._now:
                    try:
                        self._close(self.step_num, partial=False)
                    finally:
                        self._now = False
                else:
                    return
        except Exception as exc:  # raised into the interrupted code otherwise: said instead
            what = "open" if self._want else "close"
            self._want = self._now
            warnings.warn(
                f"kprof: the window {signame(self.signum)} asked for could not {what} "
                f"({type(exc).__name__}: {exc}); the next signal tries again",
                RuntimeWarning,
                stacklevel=2,
            )
        finally:
            self._busy = False

    def advance(self, n: int) -> None:
        """Step ``n`` begins: a signal since the last step opens or closes the window here."""
        self._busy = True
        try:
            if self._pending:
                self._pending = False
                if self._cm is not None:
                    self._close(n - 1, partial=False)
                else:
                    self._open(RECORD)
        finally:
            self._busy = False
        self.wake = 0 if self._pending else sys.maxsize  # 0: a signal came meanwhile
        self._settle()

    def window_meta(self, last: int) -> dict[str, Any]:
        at = {"trigger": signame(self.signum)}
        return at if self._now else {"first_step": self._first, "last_step": last, **at}

    def deliver(self, p: Profile) -> None:
        if self._now and self._deliverer is not None:
            self._deliverer.put(p)
        else:
            super().deliver(p)

    def exit(self, clock: Callable[[], int]) -> None:
        self._busy = True  # from here on a signal is counted, nothing else
        try:
            super().exit(clock)
        finally:
            if self._previous is not None:
                # What was there before, only where kprof's handler is still the one installed:
                # a handler the program set meanwhile is the program's, and stays. One set
                # outside Python (getsignal's None) cannot be put back: the default then,
                # never kprof's own left behind.
                prev = self._previous[0]
                self._previous = None
                try:
                    if signal.getsignal(self.signum) == self._signalled:
                        signal.signal(self.signum, signal.SIG_DFL if prev is None else prev)
                except ValueError:  # the profile ended outside the main thread
                    warnings.warn(
                        f"kprof: the profile with window_signal= ended outside the main "
                        f"thread, where its {signame(self.signum)} handler cannot be "
                        f"replaced: it stays, doing nothing once the profile has ended",
                        RuntimeWarning,
                        stacklevel=3,
                    )

    def finish(self) -> None:
        """The profile's end: the windows handed on so far are delivered first; one that a
        signal closed and kprof's own code held back ends as asked, one still open as it is
        (``partial``)."""
        deliverer, self._deliverer = self._deliverer, None
        if deliverer is not None:
            deliverer.close()
        if self._now and not self._want:
            try:
                self._close(self.step_num, partial=False)
            finally:
                self._now = False
        super().finish()
        self.outer.meta["windows"]["signals"] = self.signals
