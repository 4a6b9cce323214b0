"""Approximate times for queues created without profiling, observed without synchronizing.

OpenCL gives no timestamps for work on a queue created without ``PROFILING_ENABLE``. Rather
than finishing the queue after each launch (which serialises the program, and hangs it when a
launch waits on a ``UserEvent`` set later), a launch on such a queue hands kprof an
:class:`Observed` token, and one watcher thread per process polls the oldest pending event of
each queue and stamps it with the host clock when it sees it complete. On an in-order queue
work completes in order, so only the head of each queue is polled, and a command's work began
no earlier than the previous command's completion and its own launch: ``begin`` is the later
of the two, ``end`` the observed completion. Both are late by up to the polling interval
(50 µs, backing off to 2 ms while the same command runs; more while another thread holds the
GIL), so the rows are marked approximate.

Why not ``Event.set_callback``: PyOpenCL starts a native thread per callback, which measured
~100 µs per launch here (a tiny launch is ~2.5 µs); tracking a token costs ~1 µs.

Tokens answer the two questions kprof asks of OpenCL events (``get_info`` of the execution
status and ``get_profiling_info`` of START and END), so the plugin's hooks read them as they
read events. A token holds a plain ``Event`` on the command (never PyOpenCL's ``NannyEvent``,
which holds the host array of a copy) only until it is stamped.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from typing import Any

from kprof_core.recording.capture import now

from .clock import END, START

_OUT_OF_ORDER = 1  # CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE
_RUNNING = 1  # CL_RUNNING: what an unstamped token reports as its status
_EXECUTION_STATUS = 0x11D3
_MIN_PAUSE, _MAX_PAUSE = 5e-5, 2e-3


class Observed:
    """The host's observation of one command: ``begin``/``end`` on ``perf_counter_ns``."""

    __slots__ = ("begin", "end", "event", "launched", "status")
    #: Tells kprof's recorder that this token is a host observation (see Recorder.launch_observed).
    approximate = True

    def __init__(self, event: Any, launched: int) -> None:
        self.event = event
        self.launched = launched
        self.begin = 0
        self.end = -1  # set last, by the watcher: >= 0 means stamped
        self.status = _RUNNING

    def get_info(self, param: int) -> int:
        """The execution status, as ``Event.get_info(EXECUTION_STATUS)``: 0 once observed
        complete, negative if the command failed, positive before."""
        if param != _EXECUTION_STATUS:
            raise ValueError(
                f"an observed command answers only its execution status, not {param:#x}"
            )
        return self.status if self.end >= 0 else _RUNNING

    def get_profiling_info(self, param: int) -> int:
        """``START``/``END`` as observed on the host clock (not the device's)."""
        if self.end < 0:
            raise RuntimeError("the command has not been seen complete yet")
        if self.status < 0:
            raise RuntimeError(f"the command failed with OpenCL status {self.status}")
        if param == START:
            return self.begin
        if param == END:
            return self.end
        raise ValueError(f"an observed command has only START and END times, not {param:#x}")


class _QueueState:
    """What the watcher knows of one queue; kept on the queue itself (``_kprof_watch``), so that
    a new queue that reuses a dead one's ``id`` starts afresh."""

    __slots__ = ("in_order", "last_end", "listed", "pending")

    def __init__(self, in_order: bool) -> None:
        self.pending: deque[Observed] = deque()
        self.in_order = in_order  # out-of-order work may overlap: the last end bounds nothing
        self.last_end = 0
        self.listed = False  # in the watcher's list of queues with pending work


class Watcher:
    """One daemon thread that stamps completions of every tracked queue, oldest first."""

    def __init__(self) -> None:
        self._listed: list[_QueueState] = []  # queues with pending work (changed under _lock)
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def track(self, event: Any, queue: Any, launched: int) -> Observed:
        """A token for ``event`` (a command just enqueued on ``queue`` at ``launched``)."""
        tok = Observed(event, launched)
        try:
            state = queue._kprof_watch
        except AttributeError:
            state = self._new_queue(queue)
        state.pending.append(tok)
        if not state.listed:
            self._list(state)
        if not self._wake.is_set():
            self._wake.set()
        return tok

    def _new_queue(self, queue: Any) -> _QueueState:
        try:
            in_order = not queue.properties & _OUT_OF_ORDER
        except Exception:
            in_order = False
        state = _QueueState(in_order)
        try:
            queue._kprof_watch = state
        except AttributeError:  # no __dict__: a state per launch, ordered by nothing
            state.in_order = False
        return state

    def _list(self, state: _QueueState) -> None:
        with self._lock:
            if not state.listed:
                state.listed = True
                self._listed.append(state)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="kprof OpenCL watcher", daemon=True
                )
                self._thread.start()

    def _unlist_idle(self) -> None:
        """Forget queues with nothing pending (a queue's next launch lists it again)."""
        with self._lock:
            keep = []
            for state in self._listed:
                if state.pending:
                    keep.append(state)
                    continue
                state.listed = False
                # track() appends before it reads ``listed``: an append that raced with the
                # line above is seen here, and the queue stays listed.
                if state.pending:
                    state.listed = True
                    keep.append(state)
            self._listed = keep

    def _run(self) -> None:
        pause = _MIN_PAUSE
        while True:
            self._wake.clear()
            busy = progressed = False
            for state in list(self._listed):
                pending = state.pending
                while pending:
                    tok = pending[0]
                    try:
                        status = tok.event.get_info(_EXECUTION_STATUS)
                    except Exception:  # an invalid event: give up on it, as failed
                        status = -1
                    if status > 0:
                        busy = True
                        break  # in order: nothing after it on this queue is done either
                    t = now()
                    if state.in_order:
                        tok.begin = max(tok.launched, state.last_end)
                        state.last_end = t
                    else:
                        tok.begin = tok.launched
                    tok.status = status
                    tok.event = None
                    tok.end = t
                    pending.popleft()
                    progressed = True
            if busy:
                pause = _MIN_PAUSE if progressed else min(pause * 2, _MAX_PAUSE)
                time.sleep(pause)  # releases the GIL
            else:
                self._unlist_idle()
                pause = _MIN_PAUSE
                self._wake.wait()  # set by track(), after it appended


watcher = Watcher()


def _forget_in_child() -> None:
    # A forked child has no watcher thread (threads do not survive fork): start afresh.
    global watcher
    watcher = Watcher()


os.register_at_fork(after_in_child=_forget_in_child)
