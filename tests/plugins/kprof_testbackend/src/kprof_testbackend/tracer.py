"""kprof backend plugin 'testtrace': a simulated vendor tracer that reports device work after
it ran, as activity records (the way CUPTI's Activity API does), through kprof's activity hooks.

The user's side: ``tracer.launch(name, stream, duration_ns)`` enqueues work on a simulated
stream; streams run their work in order on a simulated device clock
(``perf_counter_ns() + tracer.clock_offset``). The tool's side: each launch is tagged with the
innermost scope kprof opened on the launching thread (``activity_scope_enter``), like an
external correlation id; completed work is handed to ``kprof.plugin.deliver`` in batches from
the tracer's own thread, and all of it at ``activity_flush``. Work launched outside any kprof
scope, or while no profile is active, is never reported to kprof. ``tracer.hold(stream)``
keeps a stream's work from completing (a hung device) until ``tracer.release()``.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from kprof import plugin as kp


class Stream:
    """A simulated queue of the traced device."""

    def __init__(self, name: str, device: int = 0) -> None:
        self.name, self.device = name, device
        self.free_at = 0  # device time at which its last work ends
        self.held = False


class Tracer:
    #: Records handed over per delivery while a profile runs (the rest wait for the next batch
    #: or for a flush), like a vendor buffer filling up.
    batch = 64

    def __init__(self) -> None:
        self.clock_offset = 0
        self.enabled = False
        self.enable_calls = 0
        self._tls = threading.local()
        self._lock = threading.Lock()
        # DeviceRecord fields: (scope, kind, name, stream, begin, end, nbytes, launch begin and
        # end, detail), and the launch's site.
        self._pending: list[tuple[Any, ...]] = []
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self.delivered_batches = 0
        self.delivery_threads: set[str] = set()
        self.foreign = 0  # launches outside any kprof scope (never reported)
        #: The stream ``current_queue`` answers (None: no current queue, so ranges have no
        #: device side here), and what kprof mirrored to the tool: ("push", name) or ("pop",).
        self.current: Stream | None = None
        self.mirrored: list[tuple[str, ...]] = []

    # -- the user's side --------------------------------------------------------------------------

    def clock(self) -> int:
        return time.perf_counter_ns() + self.clock_offset

    def launch(
        self,
        name: str,
        stream: Stream,
        duration_ns: int,
        nbytes: int = -1,
        kind: int = kp.KERNEL,
        detail: str | None = None,
    ) -> None:
        """Enqueue work: it runs after the stream's previous work, for ``duration_ns``. Its
        launch site is taken here, on the launching thread, as CUPTI's callback API lets a
        backend do (``kp.launch_site()``); the record carries it."""
        lb = self.clock()
        site = kp.launch_site()
        stack = getattr(self._tls, "scopes", None)
        with self._lock:
            begin = max(lb, stream.free_at)
            end = stream.free_at = begin + duration_ns
            if not self.enabled or not stack:
                self.foreign += 1
                return
            self._pending.append(
                (stack[-1], kind, name, stream, begin, end, nbytes, lb, self.clock(), detail, site)
            )
        if len(self._pending) >= self.batch:
            self._wake.set()

    def hold(self, stream: Stream) -> None:
        stream.held = True

    def release(self) -> None:
        with self._lock:
            for item in self._pending:
                item[3].held = False
        self._wake.set()

    # -- the tool's side ------------------------------------------------------------------------

    def _completed(self, scopes: tuple[int, ...] | None, everything: bool) -> list[Any]:
        """Take the records whose work has ended (and whose stream is not held)."""
        now = self.clock()
        with self._lock:
            done, rest = [], []
            for item in self._pending:
                ok = item[5] <= now and not item[3].held
                ok = ok and (scopes is None or item[0] in scopes or everything)
                (done if ok else rest).append(item)
            # The tool's own thread hands over full batches, and what has waited 20 ms (a
            # vendor tool's periodic flush); a flush hands over everything completed.
            if (
                not everything
                and len(done) < self.batch
                and not any(now - item[5] > 20_000_000 for item in done)
            ):
                return []
            self._pending = rest
        # Launch configurations as text (the work's size in work-items is its duration).
        return [
            kp.DeviceRecord(
                *item[:10], config=f"grid {item[5] - item[4]} workgroup 64", site=item[10]
            )
            for item in done
        ]

    #: Hand records over column-wise (``kp.deliver_columns``), as a rocprofiler-sdk
    #: reader would: queues keyed by 64-bit handles, 64-bit correlation ids, launch
    #: configuration in work-items, described by a format string.
    columns = False

    def _deliver(self, records: list[Any]) -> None:
        if records:
            self.delivered_batches += 1
            self.delivery_threads.add(threading.current_thread().name)
            if self.columns:
                kp.deliver_columns(self.backend, self._as_columns(records))
            else:
                kp.deliver(self.backend, records)

    def _as_columns(self, records: list[Any]) -> kp.ActivityColumns:
        names = sorted({r.name for r in records})
        queues = list({id(r.queue): r.queue for r in records}.values())
        qi = {id(q): i for i, q in enumerate(queues)}
        return kp.ActivityColumns(
            scope=[r.scope for r in records],
            kind=[r.kind for r in records],
            name=[names.index(r.name) for r in records],
            names=names,
            queue=[qi[id(r.queue)] for r in records],
            queues=queues,
            begin=[r.begin for r in records],
            end=[r.end for r in records],
            nbytes=[r.nbytes for r in records],
            launch_begin=[r.launch_begin for r in records],
            launch_end=[r.launch_end for r in records],
            correlation=[(1 << 63) + i for i in range(len(records))],  # 64-bit ids
            # (The simulated work's size in work-items is its duration: something per row.)
            detail=(
                "grid {0} work-items, workgroup {1}",
                ([r.end - r.begin for r in records], [64] * len(records)),
            ),
            clock="simulated tracer clock",
            site=[r.site for r in records],
            config=(
                "grid {0} workgroup {1}",
                ([r.end - r.begin for r in records], [64] * len(records)),
            ),
        )

    def _run(self) -> None:
        while self.enabled:
            self._wake.wait(0.002)
            self._wake.clear()
            self._deliver(self._completed(None, False))

    @kp.hookimpl
    def describe_backend(self, backend: kp.Backend) -> kp.BackendInfo:
        return kp.BackendInfo(
            library="kprof-testbackend tracer",
            library_version="1.0.0",
            devices=("testtrace 0",),
            timestamps=True,
            detail="activity records (simulated vendor tracer)",
        )

    @kp.hookimpl
    def install_capture(self, backend: kp.Backend) -> None:
        self.backend = backend
        self.enabled = True
        self.enable_calls += 1
        self._thread = threading.Thread(target=self._run, name="testtrace-delivery", daemon=True)
        self._thread.start()

    @kp.hookimpl
    def remove_capture(self, backend: kp.Backend) -> None:
        self.enabled = False
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with self._lock:  # what was never delivered is gone with the tool, as with CUPTI
            self._pending.clear()

    @kp.hookimpl
    def activity_scope_enter(self, backend: kp.Backend, scope: int) -> bool:
        stack = getattr(self._tls, "scopes", None)
        if stack is None:
            stack = self._tls.scopes = []
        stack.append(scope)
        return True

    @kp.hookimpl
    def activity_scope_exit(self, backend: kp.Backend, scope: int) -> None:
        stack = self._tls.scopes
        if not stack or stack[-1] != scope:
            raise RuntimeError(f"scope {scope} is not the innermost on this thread ({stack})")
        stack.pop()

    @kp.hookimpl
    def activity_flush(self, backend: kp.Backend, scopes: tuple[int, ...], timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while True:
            self._deliver(self._completed(scopes, True))
            with self._lock:
                left = sum(1 for item in self._pending if item[0] in scopes)
            if not left or time.monotonic() >= deadline:
                return left
            time.sleep(0.001)

    @kp.hookimpl
    def activity_align(self, backend: kp.Backend, queue: Stream, device_ns: int) -> kp.Alignment:
        return kp.Alignment(device_ns - self.clock_offset, 0, "simulated tracer clock")

    @kp.hookimpl
    def current_queue(self, backend: kp.Backend) -> Stream | None:
        return self.current

    @kp.hookimpl
    def range_push(self, backend: kp.Backend, name: str) -> None:
        self.mirrored.append(("push", name))

    @kp.hookimpl
    def range_pop(self, backend: kp.Backend) -> None:
        self.mirrored.append(("pop",))

    @kp.hookimpl
    def queue_info(self, backend: kp.Backend, queue: Stream) -> kp.QueueInfo:
        return kp.QueueInfo(
            device=f"testtrace {queue.device}", label=queue.name, device_key=queue.device
        )


#: The instance behind the ``testtrace`` entry point.
tracer = Tracer()

describe_backend = tracer.describe_backend
install_capture = tracer.install_capture
remove_capture = tracer.remove_capture
activity_scope_enter = tracer.activity_scope_enter
activity_scope_exit = tracer.activity_scope_exit
activity_flush = tracer.activity_flush
activity_align = tracer.activity_align
queue_info = tracer.queue_info
current_queue = tracer.current_queue
range_push = tracer.range_push
range_pop = tracer.range_pop
