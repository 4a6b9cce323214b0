"""What kprof promises a plugin author, checked with simulated plugins that a third party could
write from the README: where a range's host interval lies relative to the calls that put its
timestamps, and which hooks make a backend device-timed."""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from kprof_testbackend.instant import InstantClock, InstantQueue, Token

import kprof
from kprof_core.recording.recorder import now

pytestmark = pytest.mark.usefixtures("fresh_registry")

SLOW_S = 0.005  # a record_timestamp that takes 5 ms to enqueue (as seen with wgpu-py)


class SlowEnqueue(InstantClock):
    """Its timestamps take ``SLOW_S`` to enqueue; the device reaches each one halfway through
    the call. Every call's host interval is kept, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[int, int]] = []

    @kprof.plugin.hookimpl
    def record_timestamp(self, backend: kprof.plugin.Backend) -> Any:
        entered = now()
        time.sleep(SLOW_S / 2)
        tok = Token(now())
        time.sleep(SLOW_S / 2)
        self.live.add(id(tok))
        self.calls.append((entered, now()))
        return tok


@pytest.fixture
def slow() -> Iterator[SlowEnqueue]:
    plugin = SlowEnqueue()
    kprof.register_backend(plugin, "slow")
    yield plugin


def test_a_range_host_interval_encloses_its_timestamp_calls(slow: SlowEnqueue) -> None:
    q = InstantQueue("q")
    with kprof.profile(backends=["slow"]) as p, slow.using(q):
        with kprof.range("block"):
            pass
    [host] = p.ranges
    [dev] = p.device_ranges
    (first_in, _), (_, last_out) = slow.calls
    o = p.start_ns
    # The host range starts before the first record_timestamp was called and ends after the
    # last one returned: it is what the block cost the thread, timestamps included.
    assert host.start_ns <= first_in - o
    assert host.end_ns >= last_out - o
    assert host.duration_ns >= 2 * SLOW_S * 1e9
    # So it encloses the device range, which lies between the two timestamps.
    assert host.start_ns <= dev.start_ns and dev.end_ns <= host.end_ns
    # The device entry's launch window is the same interval.
    assert (dev.launch_start_ns, dev.launch_end_ns) == (host.start_ns, host.end_ns)
    assert not slow.live


def test_a_kernel_call_launch_window_encloses_its_timestamp_calls(slow: SlowEnqueue) -> None:
    q = InstantQueue("q")
    with kprof.profile(backends=["slow"]) as p, slow.using(q):
        kprof.kernel(lambda: None, name="k")()
    [k] = p.kernels
    (first_in, _), (_, last_out) = slow.calls
    o = p.start_ns
    assert k.launch_start_ns <= first_in - o
    assert k.launch_end_ns >= last_out - o
    assert k.launch_start_ns <= k.start_ns and k.end_ns <= k.launch_end_ns
    [launch] = p.launches
    assert (launch.start_ns, launch.end_ns) == (k.launch_start_ns, k.launch_end_ns)


def test_nested_ranges_nest_on_the_host_with_slow_timestamps(slow: SlowEnqueue) -> None:
    q = InstantQueue("q")
    with kprof.profile(backends=["slow"]) as p, slow.using(q):
        with kprof.range("outer"):
            with kprof.range("inner"):
                pass
    inner, outer = p.ranges  # in the order they ended
    assert (inner.name, outer.name) == ("inner", "outer")
    assert outer.start_ns <= inner.start_ns and inner.end_ns <= outer.end_ns
    d_inner, d_outer = p.device_ranges
    assert outer.start_ns <= d_outer.start_ns <= d_inner.start_ns
    assert d_inner.end_ns <= d_outer.end_ns <= outer.end_ns


# -- device_times without elapsed_time ---------------------------------------------------------


class AbsoluteClock:
    """A plugin whose timestamps are absolute device-clock times (as Vulkan's, WebGPU's and
    OpenCL's are): ``device_times``, no ``elapsed_time``. The device clock runs ``OFFSET`` ns
    ahead of the host clock, so that device-timed and host-timed records cannot look alike."""

    OFFSET = 10**12

    def __init__(self) -> None:
        self._local = threading.local()
        self.released: list[Token] = []

    @kprof.plugin.hookimpl
    def current_queue(self, backend: kprof.plugin.Backend) -> Any:
        return getattr(self._local, "queue", None)

    @kprof.plugin.hookimpl
    def record_timestamp(self, backend: kprof.plugin.Backend) -> Any:
        return Token(now() + self.OFFSET)

    @kprof.plugin.hookimpl
    def timestamp_done(self, backend: kprof.plugin.Backend, token: Token) -> bool:
        return True

    @kprof.plugin.hookimpl
    def device_times(
        self, backend: kprof.plugin.Backend, start: Token, stop: Token
    ) -> tuple[int, int]:
        return start.t, stop.t

    @kprof.plugin.hookimpl
    def release_timestamp(self, backend: kprof.plugin.Backend, token: Token) -> None:
        self.released.append(token)

    @kprof.plugin.hookimpl
    def queue_info(self, backend: kprof.plugin.Backend, queue: Any) -> kprof.plugin.QueueInfo:
        return kprof.plugin.QueueInfo(device="abs 0", label="queue 0")

    @kprof.plugin.hookimpl
    def align_clock(
        self, backend: kprof.plugin.Backend, token: Token, launch_window: tuple[int, int]
    ) -> kprof.plugin.Alignment:
        return kprof.plugin.Alignment(host_ns=token.t - self.OFFSET, error_ns=0, method="offset")


def test_device_times_alone_makes_a_backend_device_timed() -> None:
    plugin = AbsoluteClock()
    b = kprof.register_backend(plugin, "abs")
    assert b.has_timestamps
    assert b.info().timestamps
    plugin._local.queue = q = object()
    stamps: list[int] = []

    def work() -> None:
        stamps.append(now())

    try:
        with kprof.profile(backends=["abs"]) as p:
            with kprof.range("r"):
                kprof.kernel(work, name="k")()
    finally:
        del plugin._local.queue
    [k] = p.kernels
    [r] = p.device_ranges
    for rec in (k, r):
        assert not rec.host_timed and rec.error is None
        assert rec.device == "abs 0"
    # Placed by the alignment: the kernel's timestamps bracket the work on the host clock.
    assert k.start_ns <= stamps[0] - p.start_ns <= k.end_ns
    assert r.start_ns <= k.start_ns and k.end_ns <= r.end_ns
    [clock] = p.clocks.values()
    assert clock.method == "offset" and clock.shift_ns == 0
    assert len(plugin.released) == 4  # two tokens per entry, each given back once
    del q


def test_timestamps_that_cannot_be_read_are_reported_at_registration() -> None:
    class Unreadable:
        @kprof.plugin.hookimpl
        def record_timestamp(self, backend: kprof.plugin.Backend) -> Any:
            return object()

    with pytest.warns(
        RuntimeWarning,
        match=r"record_timestamp but neither elapsed_time nor "
        r"device_times.*timed on the host",
    ):
        b = kprof.register_backend(Unreadable(), "unreadable")
    assert not b.has_timestamps
    assert not b.info().timestamps


def test_a_complete_plugin_registers_without_a_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kprof.register_backend(AbsoluteClock(), "abs2")
        kprof.register_backend(InstantClock(), "inst2")


# -- deferred submission: work that will never run is given up at once ---------------------------


class Deferred(InstantClock):
    """Timestamps are written into a command buffer: done once it is submitted; a buffer
    dropped without submission makes its tokens raise ``kprof.plugin.NeverSubmitted``."""

    def __init__(self) -> None:
        super().__init__()
        self.buffer: list[Token] = []
        self.submitted: set[int] = set()
        self.dropped: set[int] = set()
        self.asked: dict[int, int] = {}

    @kprof.plugin.hookimpl
    def record_timestamp(self, backend: kprof.plugin.Backend) -> Any:
        tok = super().record_timestamp(backend)
        self.buffer.append(tok)
        return tok

    def submit(self) -> None:
        self.submitted.update(id(t) for t in self.buffer)
        self.buffer.clear()

    def drop(self) -> None:
        self.dropped.update(id(t) for t in self.buffer)
        self.buffer.clear()

    @kprof.plugin.hookimpl
    def timestamp_done(self, backend: kprof.plugin.Backend, token: Token) -> Any:
        self.asked[id(token)] = self.asked.get(id(token), 0) + 1
        if id(token) in self.dropped:
            raise kprof.plugin.NeverSubmitted("command buffer dropped without submit")
        return id(token) in self.submitted


def test_a_token_never_submitted_is_given_up_at_once() -> None:
    plugin = Deferred()
    b = kprof.register_backend(plugin, "deferred")
    q = InstantQueue("q")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # giving up is not a plugin error: no warning
        with kprof.profile(backends=["deferred"], timeout=600) as p, plugin.using(q):
            with kprof.range("kept"):
                pass
            plugin.submit()
            with kprof.range("dropped"):
                pass
            plugin.drop()
    kept, dropped = p.device_ranges
    assert kept.name == "kept" and kept.error is None and not kept.host_timed
    assert dropped.name == "dropped"
    assert dropped.error == (
        "its work was never submitted to the device: command buffer dropped without submit"
    )
    assert [r.name for r in p.unresolved] == ["dropped"]
    # Asked once on the fast path and once more to make the row, never polled until a timeout.
    assert max(plugin.asked.get(i, 0) for i in plugin.dropped) <= 2
    assert b.broken is None
    assert not plugin.live and plugin.released == 4
