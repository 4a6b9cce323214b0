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

Where kprof's compiled hook is built, the driver tells instead (``_clhook.stamp``: C callbacks
registered with ``clSetEventCallback`` at ``CL_RUNNING`` and ``CL_COMPLETE`` stamp the host
clock, no thread polls, no GIL needed): ``end`` is when the driver completed the command, and
``begin`` when it started running where the callback was registered before it did, else the
later of its launch and the previous completion on an in-order queue. Polling was far off on
real programs (a completion waits for the GIL, up to the 5 ms switch interval, and
several completions seen in one poll got ~0 µs each); see bench/HISTORY.md for both, measured.

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

from kprof import plugin as kp
from kprof.plugin import now

from .clock import END, START

_OUT_OF_ORDER = 1  # CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE
_RUNNING = 1  # CL_RUNNING: what an unstamped token reports as its status
_EXECUTION_STATUS = 0x11D3
_MIN_PAUSE, _MAX_PAUSE = 5e-5, 2e-3


class Observed:
    """The host's observation of one command: ``begin``/``end`` on ``perf_counter_ns``."""

    __slots__ = ("begin", "end", "event", "launched", "prev", "stamp", "status")
    #: Tells kprof's recorder that this token is a host observation (see Recorder.launch_observed).
    approximate = True

    def __init__(self, event: Any, launched: int) -> None:
        self.event = event
        self.launched = launched
        self.begin = 0
        self.end = -1  # set last, by the watcher: >= 0 means stamped
        self.status = _RUNNING
        self.stamp: Any = None  # the driver's callbacks (_clhook.Stamp), where compiled
        self.prev: Observed | _Done | None = None  # the command before, on an in-order queue

    def get_info(self, param: int) -> int:
        """The execution status, as ``Event.get_info(EXECUTION_STATUS)``: 0 once observed
        complete, negative if the command failed, positive before."""
        if param != _EXECUTION_STATUS:
            raise ValueError(
                f"an observed command answers only its execution status, not {param:#x}"
            )
        if self.end < 0 and self.stamp is not None:
            self._settle()
        return self.status if self.end >= 0 else _RUNNING

    def _settle(self) -> None:
        """Take the times the driver's callbacks stamped, oldest command first (a command's
        fallback start is the previous one's completion); nothing while one is still running."""
        chain = []
        tok: Observed | _Done | None = self
        while isinstance(tok, Observed) and tok.end < 0:
            chain.append(tok)
            tok = tok.prev
        for cmd in reversed(chain):
            got = cmd.stamp.read()
            if got is None:
                return
            status, begin, end = got
            prev = cmd.prev
            if not begin:  # it ran before the callbacks were registered: the earliest it could
                begin = max(cmd.launched, prev.end if prev is not None else 0)
            cmd.begin = min(begin, end)
            cmd.status = status
            cmd.event = cmd.stamp = cmd.prev = None
            cmd.end = end

    def get_profiling_info(self, param: int) -> int:
        """``START``/``END`` as observed on the host clock (not the device's)."""
        if self.end < 0 and self.stamp is not None:
            self._settle()
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

    __slots__ = ("in_order", "last", "last_end", "listed", "pending")

    def __init__(self, in_order: bool) -> None:
        self.pending: deque[Observed] = deque()
        self.in_order = in_order  # out-of-order work may overlap: the last end bounds nothing
        self.last_end = 0
        self.listed = False  # in the watcher's list of queues with pending work
        self.last: Observed | None = None  # the latest stamped token (in-order queues)


class Watcher:
    """One daemon thread that stamps completions of every tracked queue, oldest first."""

    def __init__(self) -> None:
        self._listed: list[_QueueState] = []  # queues with pending work (changed under _lock)
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._retire = False  # capture was removed: the thread ends once nothing is pending
        #: Commands tracked so far in the process, [stamped by the driver, polled]: a
        #: profile's report says how its approximate rows were observed (``accuracy_note``).
        self.counts = [0, 0]

    def track(self, event: Any, queue: Any, launched: int) -> Observed:
        """A token for ``event`` (a command just enqueued on ``queue`` at ``launched``)."""
        tok = Observed(event, launched)
        try:
            state = queue._kprof_watch
        except AttributeError:
            state = self._new_queue(queue)
        stamp = _stamp(event)
        if stamp is not None:  # the driver calls back: nothing to poll
            self.counts[0] += 1
            tok.stamp = stamp
            if state.in_order:
                prev, state.last = state.last, tok
                if prev is not None and prev.end < 0:
                    tok.prev = prev
                elif prev is not None:
                    tok.prev = _Done(prev.end)
            return tok
        self.counts[1] += 1
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
            self._retire = False
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="kprof OpenCL watcher", daemon=True
                )
                self._thread.start()

    def retire(self) -> None:
        """Capture is removed: the thread ends as soon as nothing is pending, so that no
        thread of kprof's runs outside a profile (a later ``track`` starts another)."""
        with self._lock:
            self._retire = True
        self._wake.set()

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
                done: list[tuple[Observed, int]] = []
                while pending:
                    tok = pending[0]
                    try:
                        status = tok.event.get_info(_EXECUTION_STATUS)
                    except Exception:  # an invalid event: give up on it, as failed
                        status = -1
                    if status > 0:
                        busy = True
                        break  # in order: nothing after it on this queue is done either
                    done.append((tok, status))
                    pending.popleft()
                if done:
                    _stamp_seen(state, done, now())
                    progressed = True
            if busy:
                pause = _MIN_PAUSE if progressed else min(pause * 2, _MAX_PAUSE)
                time.sleep(pause)  # releases the GIL
            else:
                self._unlist_idle()
                with self._lock:
                    if self._retire and not self._listed:
                        self._thread = None  # under the lock: a track now starts a new one
                        return
                pause = _MIN_PAUSE
                self._wake.wait()  # set by track() after it appended, and by retire()


def _stamp_seen(state: _QueueState, done: list[tuple[Observed, int]], t: int) -> None:
    """Stamp the commands one poll saw complete. On an in-order queue they ran one after the
    other between the previous completion (or their launch) and ``t``: each gets an equal
    share of what is left of that window from its own launch on. Stamping each at ``t`` made
    all but the first ~0 µs long (a 168 µs FFT shown as 9.96 µs)."""
    if not state.in_order:
        for tok, status in done:
            tok.begin, tok.status, tok.event = tok.launched, status, None
            tok.end = t  # set last: >= 0 means stamped
        return
    start = state.last_end
    for i, (tok, status) in enumerate(done):
        begin = min(max(tok.launched, start), t)
        end = begin + (t - begin) // (len(done) - i)
        tok.begin, tok.status, tok.event = begin, status, None
        tok.end = end
        start = end
    state.last_end = t


class _Done:
    """A settled previous command: only its completion is needed (no chain of tokens kept)."""

    __slots__ = ("end",)

    def __init__(self, end: int) -> None:
        self.end = end


def _stamp(event: Any) -> Any:
    """The driver's callbacks on ``event`` (``_clhook.Stamp``), or None: not compiled, or the
    driver refused them."""
    global _stamper
    if not kp.compiled_enabled():  # KPROF_PURE_PYTHON=1: the polling watcher
        return None
    if _stamper is None:
        mod = _compiled_hook()
        _stamper = mod.stamp if mod is not None else False
    if _stamper is False:
        return None
    try:
        return _stamper(event.int_ptr)
    except Exception:
        return None


_stamper: Any = None  # _clhook.stamp, or False where it is not in use


def method() -> str:
    """How commands on queues without profiling are timed here, in words."""
    if kp.compiled_enabled() and _compiled_hook() is not None:
        return "the driver's completion callbacks (clSetEventCallback)"
    return "a watcher thread polling completions"


def accuracy_note(stamped: int, polled: int) -> str | None:
    """The report's line on how ``stamped`` + ``polled`` commands on queues without profiling
    were observed, with what bench/bench_approximate.py measured of each way on PoCL (see
    bench/HISTORY.md, "Approximate rows against exact ones"); None when there were none."""
    out = []
    if stamped:
        out.append(
            f"{stamped} by the driver's completion callbacks (clSetEventCallback): against "
            "exact times of the same commands on PoCL, reikna's FFTs and matrix products came "
            "within 2 % in total, tiny kernels up to 2.5x and tiny blocking copies up to 200x "
            "too long (launch to completion), none under 0.93x"
        )
    if polled:
        out.append(
            f"{polled} by kprof's watcher thread polling completions (every 50 us, backing off "
            "to 2 ms; it needs the GIL): against exact times on PoCL, reikna's FFTs and matrix "
            "products came within 4 % in total, but a single command from 0.05x to 110x (the "
            "commands completing in one poll share its window)"
        )
    if not out:
        return None
    return (
        "OpenCL commands on queues created without profiling (rows marked ~: the queue was "
        "made before `import kprof`, or after kprof_opencl.disable_profiling()) were timed on "
        "the host: " + "; ".join(out) + "."
    )


def _compiled_hook() -> Any:
    """``_clhook`` where built and usable here (as ``hook.module()``, which imports capture,
    which imports this module: asked directly)."""
    mod = kp.load_plugin_part("kprof_opencl", "_clhook")
    return mod if mod is not None and getattr(mod, "supported", False) else None


watcher = Watcher()


def _forget_in_child() -> None:
    # A forked child has no watcher thread (threads do not survive fork): start afresh.
    global watcher
    watcher = Watcher()


os.register_at_fork(after_in_child=_forget_in_child)
