"""The CUDA plugin end to end on a fake CUDA: everything that is not CUDA itself.

``FakeCuda`` has the attributes of :class:`kprof_cuda.api.CupyApi` and CUDA's semantics where
the plugin relies on them: each stream is a worker thread that runs its commands in order; an
event is stamped with ``perf_counter_ns`` when its stream reaches it (so the fake device clock
*is* the host clock, and placement can be checked exactly); recording an event again replaces
its previous record; an event never recorded reads as done; ``get_elapsed_time`` returns
float32 milliseconds and fails on events that are not done or belong to another device.
The real ``CudaPlugin`` runs on top of it, registered as backend ``fakecuda``.
"""

from __future__ import annotations

import contextlib
import itertools
import queue as _queue
import sys
import threading
import time
import types
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import kprof
import kprof_cuda
from kprof_core.host.discovery import ENV_DISABLE_AUTOLOAD, ENV_PLUGINS, registry
from kprof_core.low_level.layout import SLOT, STOP
from kprof_core.recording.recorder import Recorder
from kprof_cuda import clock
from kprof_cuda.capture import D2H, H2D
from kprof_cuda.plugin import CudaPlugin

MODULE = "kprof_fake_cupy"  # the fake "cupy" module's name in sys.modules
NOT_READY, INVALID_HANDLE, LAUNCH_FAILED = 600, 400, 719


class FakeCudaError(RuntimeError):
    def __init__(self, status: int) -> None:
        super().__init__(f"fakeError{status}")
        self.status = status


class FakeEvent:
    def __init__(self, ptr: int, device: int) -> None:
        self.ptr, self.device = ptr, device
        self.generation = 0
        self.time_ns: int | None = None
        self.status = 0  # what eventQuery says once reached (tests inject failures)

    @property
    def done(self) -> bool:
        return self.generation == 0 or self.time_ns is not None


class _Reached:
    """A command that stamps one record of an event (not a later one)."""

    def __init__(self, ev: FakeEvent, generation: int) -> None:
        self.ev, self.generation = ev, generation

    def __call__(self) -> None:
        if self.ev.generation == self.generation:
            self.ev.time_ns = time.perf_counter_ns()


class Worker:
    """One device stream: a thread that runs commands in order."""

    def __init__(self, name: str) -> None:
        self.commands: _queue.SimpleQueue[Any] = _queue.SimpleQueue()
        self.thread = threading.Thread(target=self._run, name=f"fakecuda-{name}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            cmd = self.commands.get()
            if cmd is None:
                return
            if isinstance(cmd, float):
                if cmd:
                    time.sleep(cmd)  # a kernel; sleeping lets the host keep launching
            else:
                cmd()

    def finish(self) -> None:
        ev = threading.Event()
        self.commands.put(ev.set)
        ev.wait()


class FakeStream:
    def __init__(self, fake: FakeCuda, ptr: int, device_id: int) -> None:
        self.fake, self.ptr, self.device_id = fake, ptr, device_id

    def synchronize(self) -> None:
        self.fake.worker(self.ptr, self.device_id).finish()

    def __repr__(self) -> str:
        return f"<FakeStream {self.ptr} (device {self.device_id})>"


class FakeCuda:
    """What the CUDA plugin calls (the attributes of ``CupyApi``), plus the user's side."""

    def __init__(self, devices: int = 1) -> None:
        self.devices = devices
        self._ptrs = itertools.count(0x1000, 0x10)
        self._lock = threading.Lock()
        self._tls = threading.local()
        self.events: dict[int, FakeEvent] = {}
        self.workers: dict[tuple[int, ...], Worker] = {}
        self.null = FakeStream(self, 0, -1)
        self.ptds = FakeStream(self, 2, -1)
        self.error = FakeCudaError
        self.records = 0
        self._stream_devices: dict[int, int] = {}
        #: Called by ``synchronize_device`` after the streams finished (a CUPTI double's wait).
        self.on_synchronize: Any = None
        self.synchronized: list[int] = []

    # -- the CupyApi surface ----------------------------------------------------------------

    def get_device(self) -> int:
        return getattr(self._tls, "device", 0)

    def current_stream(self, device_id: int = -1) -> FakeStream:
        dev = self.get_device() if device_id < 0 else device_id
        return self._streams().get(dev, self.null)

    def event_record(self, event_ptr: int, stream_ptr: int) -> None:
        ev = self.events[event_ptr]
        dev = self._stream_devices.get(stream_ptr, self.get_device())
        if ev.device != dev:
            raise FakeCudaError(INVALID_HANDLE)
        self.records += 1
        ev.generation += 1
        ev.time_ns = None
        self.worker(stream_ptr, dev).commands.put(_Reached(ev, ev.generation))

    def event_query(self, event_ptr: int) -> int:
        ev = self.events[event_ptr]
        return ev.status if ev.done else NOT_READY

    def get_elapsed_time(self, start: Any, stop: Any) -> float:
        a, b = self.events[start.ptr], self.events[stop.ptr]
        if a.device != b.device:
            raise FakeCudaError(INVALID_HANDLE)
        if a.time_ns is None or b.time_ns is None:
            raise FakeCudaError(NOT_READY)
        return float(np.float32((b.time_ns - a.time_ns) / 1e6))  # cudaEventElapsedTime: float

    def new_event(self, device: int) -> FakeEvent:
        with self._lock:
            ev = FakeEvent(next(self._ptrs), device)
            self.events[ev.ptr] = ev
        return ev

    def new_stream(self, device: int) -> FakeStream:
        s = FakeStream(self, next(self._ptrs), device)
        self._stream_devices[s.ptr] = device
        return s

    @contextlib.contextmanager
    def using_device(self, device: int) -> Iterator[None]:
        prev = self.get_device()
        self._tls.device = device
        try:
            yield
        finally:
            self._tls.device = prev

    def synchronize_device(self, device: int) -> None:
        with self._lock:
            workers = [w for key, w in self.workers.items() if key[0] == device]
        for w in workers:
            w.finish()
        if self.on_synchronize is not None:
            self.on_synchronize(device)
        self.synchronized.append(device)

    def device_name(self, device: int) -> str:
        return "Fake GPU"

    # -- the user's side --------------------------------------------------------------------

    def _streams(self) -> dict[int, FakeStream]:
        try:
            return self._tls.streams  # type: ignore[no-any-return]
        except AttributeError:
            self._tls.streams = {}
            return self._tls.streams  # type: ignore[no-any-return]

    def worker(self, ptr: int, device_id: int) -> Worker:
        dev = self.get_device() if device_id < 0 else device_id
        key: tuple[int, ...] = (dev, ptr, threading.get_ident()) if ptr == 2 else (dev, ptr)
        with self._lock:
            w = self.workers.get(key)
            if w is None:
                w = self.workers[key] = Worker(f"{key}")
        return w

    def stream(self) -> FakeStream:
        return self.new_stream(self.get_device())

    @contextlib.contextmanager
    def use(self, stream: FakeStream) -> Iterator[FakeStream]:
        streams = self._streams()
        dev = self.get_device()
        prev = streams.get(dev)
        streams[dev] = stream
        try:
            yield stream
        finally:
            if prev is None:
                del streams[dev]
            else:
                streams[dev] = prev

    def launch(self, seconds: float = 0.0, stream: FakeStream | None = None) -> None:
        """A kernel on ``stream``, by default the calling thread's current stream."""
        s = stream or self.current_stream()
        self.worker(s.ptr, s.device_id).commands.put(float(seconds))

    def synchronize(self) -> None:
        self.current_stream().synchronize()

    def close(self) -> None:
        for w in self.workers.values():
            w.commands.put(None)


def _make_fake(devices: int = 1) -> FakeCuda:
    return FakeCuda(devices)


def _available() -> kprof.plugin.BackendInfo:
    return kprof.plugin.BackendInfo(
        library="fakecupy", library_version="0", devices=("CUDA 0 (Fake GPU)",)
    )


class FakeMemoryHook:
    """CuPy's ``cupy.cuda.memory_hook.MemoryHook`` as documented: registered per thread by
    ``with`` under its ``name`` (twice is a KeyError), its ``*_postprocess`` methods called
    with keyword arguments."""

    name = "FakeMemoryHook"
    registered = threading.local()

    @classmethod
    def hooks(cls) -> dict[str, FakeMemoryHook]:
        if not hasattr(cls.registered, "hooks"):
            cls.registered.hooks = {}
        return cls.registered.hooks  # type: ignore[no-any-return]

    def __enter__(self) -> FakeMemoryHook:
        hooks = self.hooks()
        if self.name in hooks:
            raise KeyError(f"MemoryHook {self.name} already exists")
        hooks[self.name] = self
        return self

    def __exit__(self, *exc: Any) -> None:
        del self.hooks()[self.name]

    def malloc_postprocess(self, **kwargs: Any) -> None:
        pass

    def free_postprocess(self, **kwargs: Any) -> None:
        pass


_fake_pointers = itertools.count(0x7F0000000000, 0x10000)


def fake_cupy_module(fake: FakeCuda) -> types.ModuleType:
    """A stand-in for the ``cupy`` module: ``ndarray.get``/``set``, ``asarray``/``array``,
    and ``cuda.memory_hook.MemoryHook``, called as CuPy's pool calls it: a block rounded up
    to 512 bytes per array, given back when the array goes."""
    mod = types.ModuleType(MODULE)

    class ndarray:  # mirrors cupy.ndarray
        def __init__(self, nbytes: int) -> None:
            self.nbytes = nbytes
            self._block = (next(_fake_pointers), -(-max(nbytes, 1) // 512) * 512)
            self._device = fake.get_device()
            ptr, size = self._block
            for h in list(FakeMemoryHook.hooks().values()):
                h.malloc_postprocess(
                    device_id=self._device, size=nbytes, mem_size=size, mem_ptr=ptr, pmem_id=ptr
                )

        def __del__(self) -> None:
            ptr, size = self._block
            for h in list(FakeMemoryHook.hooks().values()):
                h.free_postprocess(device_id=self._device, mem_size=size, mem_ptr=ptr, pmem_id=ptr)

        def get(
            self, stream: Any = None, order: str = "C", out: Any = None, blocking: bool = True
        ) -> np.ndarray:
            fake.launch(0.002, stream)  # the copy
            if blocking:
                (stream or fake.current_stream()).synchronize()
            return np.zeros(self.nbytes, dtype=np.uint8)

        def set(self, arr: Any, stream: Any = None) -> None:
            if arr is None:
                raise ValueError("set: no array")
            fake.launch(0.002, stream)

    def asarray(a: Any, dtype: Any = None) -> Any:
        if isinstance(a, ndarray):
            return a
        fake.launch(0.002)
        return ndarray(np.asarray(a).nbytes)

    def array(obj: Any, dtype: Any = None) -> Any:
        fake.launch(0.002)
        return ndarray(np.asarray(obj).nbytes)

    mod.ndarray = ndarray  # type: ignore[attr-defined]
    mod.cuda = types.SimpleNamespace(  # type: ignore[attr-defined]
        memory_hook=types.SimpleNamespace(MemoryHook=FakeMemoryHook)
    )
    mod.asarray = asarray  # type: ignore[attr-defined]
    mod.array = array  # type: ignore[attr-defined]
    return mod


class FakeNvtx:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str | None, str]] = []

    def push_range(
        self, message: str | None = None, color: Any = None, domain: str | None = None
    ) -> None:
        self.calls.append(("push", message, threading.current_thread().name))

    def pop_range(self, domain: str | None = None) -> None:
        self.calls.append(("pop", None, threading.current_thread().name))


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> Iterator[types.SimpleNamespace]:
    """Only the ``fakecuda`` backend: a CudaPlugin on a FakeCuda with one device."""
    yield from _env(monkeypatch, devices=1)


def _env(
    monkeypatch: pytest.MonkeyPatch, devices: int, nvtx: Any = None
) -> Iterator[types.SimpleNamespace]:
    monkeypatch.delenv(ENV_PLUGINS, raising=False)
    monkeypatch.setenv(ENV_DISABLE_AUTOLOAD, "1")
    registry.reset()
    fake = _make_fake(devices)
    mod = fake_cupy_module(fake)
    monkeypatch.setitem(sys.modules, MODULE, mod)
    plugin = CudaPlugin(
        api=lambda: fake,
        module=MODULE,
        describe=_available,
        nvtx=(lambda: nvtx) if nvtx is not None else (lambda: None),
    )
    backend = kprof.register_backend(plugin, "fakecuda")
    try:
        yield types.SimpleNamespace(fake=fake, plugin=plugin, backend=backend, mod=mod)
    finally:
        registry.reset()
        fake.close()


def kern(fake: FakeCuda, name: str, seconds: float) -> Any:
    def launch() -> None:
        fake.launch(seconds)

    launch.__name__ = name
    return kprof_cuda.kernel(launch)


# -- timing -------------------------------------------------------------------------------------


def test_kernel_wrapper_times_on_the_device_and_places_exactly(env: Any) -> None:
    fake = env.fake
    k = kern(fake, "spin", 0.003)
    with kprof.profile() as p:
        for _ in range(3):
            k()
    ks = p.kernels
    assert [x.name for x in ks] == ["spin"] * 3
    for x in ks:
        assert (x.backend, x.device, x.queue, x.kind) == (
            "fakecuda",
            "CUDA 0 (Fake GPU)",
            "legacy default stream",
            "kernel",
        )
        assert not x.host_timed and x.error is None
        assert x.duration_ns >= 3_000_000  # the kernel slept that long between the events
        assert x.start_ns >= x.launch_start_ns
    for a, b in itertools.pairwise(ks):  # one stream, in order
        assert b.start_ns >= a.end_ns
    [c] = p.clocks.values()
    assert c.method == clock.METHOD
    assert c.error_ns is not None and c.error_ns > 0


def test_alignment_matches_the_device_clock_within_its_bound(env: Any) -> None:
    # The fake stamps events with perf_counter_ns: the placement must agree within the bound.
    fake, plugin, b = env.fake, env.plugin, env.backend
    with kprof.profile():
        q = plugin.current_queue(b)
        assert q is not None
        stamps = []
        for _ in range(5):
            fake.launch(0.001)
            stamps.append(plugin.record_timestamp(b))
        fake.synchronize()
        for s in stamps:
            a = plugin.align_clock(b, s, (0, 0))
            truth = fake.events[s.ptr].time_ns
            assert abs(a.host_ns - truth) <= a.error_ns, (a, truth)
            assert a.error_ns < 50_000_000
        for s in stamps:
            plugin.release_timestamp(b, s)


def test_calibration_brackets_the_event() -> None:
    fake = _make_fake()
    plugin = CudaPlugin(api=lambda: fake, module=MODULE, describe=_available)
    cal = plugin.clock.calibrate(0)
    truth = fake.events[cal.stamp.ptr].time_ns
    assert truth is not None and abs(cal.host_ns - truth) <= cal.error_ns
    fake.close()


def test_align_interpolates_a_drifting_device_clock() -> None:
    # Device clock runs 1% fast against the host; calibrations at host 0 and 1e9.
    class S:
        def __init__(self, dev_ns: int) -> None:
            self.dev_ns = dev_ns

    first = clock.Calibration(S(0), 0, 1000)  # type: ignore[arg-type]
    last = clock.Calibration(S(1_010_000_000), 1_000_000_000, 1000)  # type: ignore[arg-type]
    token_dev = 505_000_000  # host 500 ms
    a = clock.align(lambda s: token_dev - s.dev_ns, first, last)
    assert abs(a.host_ns - 500_000_000) <= 1
    assert a.error_ns >= 1000
    only_last = clock.align(lambda s: token_dev - s.dev_ns, None, last)
    assert only_last.host_ns == 1_000_000_000 - 505_000_000


def test_range_times_the_current_stream_without_synchronizing(env: Any) -> None:
    fake = env.fake
    with kprof.profile() as p:
        with kprof.range("block"):
            fake.launch(0.02)
            fake.launch(0.02)
        # The range returned before its work was done: its stop event is still pending.
        rec = kprof.plugin.active()
        assert rec is not None
        stop = next(
            e[STOP] for e in reversed(rec._incoming) if e[SLOT] is not None
        )  # a device entry
        assert fake.event_query(stop.ptr) == NOT_READY
    [r] = p.device_ranges
    assert (r.name, r.backend, r.queue, r.kind) == (
        "block",
        "fakecuda",
        "legacy default stream",
        "range",
    )
    assert r.duration_ns >= 40_000_000
    assert [h.name for h in p.ranges] == ["block"]


# -- the pool -----------------------------------------------------------------------------------


def test_no_event_is_created_per_launch_once_warm(
    env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Recorder, "harvest_every", 8)
    fake, plugin = env.fake, env.plugin
    k = kern(fake, "k", 0.0)
    peak = 0

    def batch(n: int) -> None:
        nonlocal peak
        with kprof.profile() as p:
            for _ in range(n):
                k()
                fake.synchronize()  # every pending entry is done when the harvest comes
                peak = max(peak, plugin.stats().in_use)
        assert len(p.kernels) == n

    batch(200)
    warm = plugin.stats()
    assert warm.in_use == 0  # every event came back
    # Harvested while the profile ran: live events stayed near 2 per pending entry.
    assert peak <= 2 * 8 + 2 + 3
    assert warm.created <= 2 * 8 + 2 + 3 + 3  # not 400
    records = fake.records
    batch(200)
    assert plugin.stats().created == warm.created  # the second batch created none
    assert fake.records - records >= 400  # yet recorded two per launch


def test_pool_counts_and_trim() -> None:
    from kprof_cuda.events import EventPool

    made: list[int] = []

    class Ev:
        def __init__(self, device: int) -> None:
            self.ptr = 100 + len(made)
            made.append(device)

    pool = EventPool(Ev)
    a, b = pool.take(0), pool.take(1)
    assert (a.device, b.device, made) == (0, 1, [0, 1])
    pool.give(a)
    assert pool.take(0) is a  # reused, not created
    assert pool.stats() == kprof_cuda.PoolStats(created=2, in_use=2, free=0)
    pool.give(a)
    pool.give(b)
    c = pool.take(0)
    d = pool.take(0)  # pool of device 0 is empty again: a new one
    pool.give(c)
    pool.give(d)
    assert pool.stats(0) == kprof_cuda.PoolStats(created=2, in_use=0, free=2)
    assert pool.trim(1) == 1
    assert pool.stats(0) == kprof_cuda.PoolStats(created=2, in_use=0, free=1)
    assert pool.stats(7) == kprof_cuda.PoolStats(0, 0, 0)


# -- streams, threads, devices ------------------------------------------------------------------


def test_threads_on_their_own_streams_are_separate_rows_side_by_side(env: Any) -> None:
    fake = env.fake
    # Each stream's kernel runs until all three are running (not for a fixed time, which a
    # loaded machine can serialize): they overlap whatever the scheduling.
    running = threading.Barrier(3, timeout=60)

    def work() -> None:
        s = fake.current_stream()
        fake.worker(s.ptr, s.device_id).commands.put(running.wait)

    k = kprof_cuda.kernel(work)
    barrier = threading.Barrier(3)

    def worker() -> None:
        with fake.use(fake.stream()):
            barrier.wait()
            k()
            fake.synchronize()

    with kprof.profile() as p:
        threads = [threading.Thread(target=kprof.propagate(worker), name=f"t{i}") for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    ks = p.kernels
    assert len(ks) == 3
    assert sorted(x.queue for x in ks) == ["stream 1", "stream 2", "stream 3"]
    assert {x.thread for x in ks} == {"t0", "t1", "t2"}
    assert {x.device for x in ks} == {"CUDA 0 (Fake GPU)"}
    # Placed side by side: the three intervals overlap in time.
    assert max(x.start_ns for x in ks) < min(x.end_ns for x in ks)


def test_default_streams_are_labelled_and_per_thread_ones_kept_apart(env: Any) -> None:
    fake = env.fake
    k = kern(fake, "k", 0.0)

    def on_ptds() -> None:
        with fake.use(fake.ptds):
            k()

    with kprof.profile() as p:
        k()  # the legacy default stream
        for i in range(2):
            t = threading.Thread(target=kprof.propagate(on_ptds), name=f"p{i}")
            t.start()
            t.join()
    labels = sorted(x.queue for x in p.kernels)
    assert labels == [
        "legacy default stream",
        "per-thread default stream (p0)",
        "per-thread default stream (p1)",
    ]


def test_each_device_is_its_own_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    for env in _env(monkeypatch, devices=2):
        fake = env.fake
        k = kern(fake, "k", 0.002)
        with kprof.profile() as p:
            k()
            with fake.using_device(1):
                k()  # the same Stream.null object, on another device
        ks = p.kernels
        assert sorted((x.queue, x.device) for x in ks) == [
            ("legacy default stream", "CUDA 0 (Fake GPU)"),
            ("legacy default stream", "CUDA 1 (Fake GPU)"),
        ]
        assert all(x.error is None and x.duration_ns >= 2_000_000 for x in ks)
        assert len(p.clocks) == 2


# -- waiting, errors ----------------------------------------------------------------------------


def test_elapsed_time_waits_cooperatively(env: Any) -> None:
    fake, plugin, b = env.fake, env.plugin, env.backend
    with kprof.profile():
        plugin.current_queue(b)
        start = plugin.record_timestamp(b)
        fake.launch(0.05)
        stop = plugin.record_timestamp(b)
        assert plugin.timestamp_done(b, stop) is False
        ticks = 0
        done = threading.Event()

        def ticker() -> None:  # runs while the main thread waits: the wait does not hold it
            nonlocal ticks
            while not done.is_set():
                ticks += 1
                time.sleep(0.001)

        t = threading.Thread(target=ticker)
        t.start()
        ns = plugin.elapsed_time(b, start, stop)
        done.set()
        t.join()
        assert ns >= 50_000_000 and isinstance(ns, int)
        assert ticks >= 5
        plugin.release_timestamp(b, start)
        plugin.release_timestamp(b, stop)


def test_a_failed_event_is_an_error_not_a_wait(env: Any) -> None:
    fake, plugin, b = env.fake, env.plugin, env.backend
    # A device error costs the record, not the backend: one warning, no "disabled".
    with (
        pytest.warns(RuntimeWarning, match="timestamp_done raised FakeCudaError"),
        kprof.profile() as p,
    ):
        plugin.current_queue(b)
        tok = plugin.record_timestamp(b)
        fake.synchronize()
        fake.events[tok.ptr].status = LAUNCH_FAILED
        with pytest.raises(FakeCudaError):
            plugin.timestamp_done(b, tok)
        fake.events[tok.ptr].status = 0
        plugin.release_timestamp(b, tok)
        k = kern(fake, "bad", 0.01)
        k()
        # The stop event of the last launch will report a failure.
        pending = list(kprof.plugin.active()._incoming)  # type: ignore[union-attr]
        fake.events[pending[-1][8].ptr].status = LAUNCH_FAILED
    [x] = p.kernels
    assert x.error is not None and "fakeError719" in x.error
    assert b.broken is None


def test_no_cupy_import_no_queue(env: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, MODULE)
    with kprof.profile() as p:
        with kprof.range("r"):
            pass
        kern(env.fake, "k", 0.0)()
    assert [x for x in p.kernels if x.backend == "fakecuda"] == []
    assert env.plugin.stats().created == 0
    assert env.fake.records == 0


# -- copies -------------------------------------------------------------------------------------


def test_copies_are_captured_and_capture_is_removed_exactly(env: Any) -> None:
    mod, fake = env.mod, env.fake
    originals = (mod.ndarray.__dict__["get"], mod.ndarray.__dict__["set"], mod.asarray, mod.array)
    host = np.zeros(1000, dtype=np.float32)
    with kprof.profile() as p:
        a = mod.asarray(host)  # host to device
        b = mod.asarray(a)  # device array: no copy, not recorded
        assert b is a
        mod.array([1, 2, 3])  # a list: not a plain copy, not recorded
        a.set(host)
        out = a.get()
        assert out.nbytes == 4000
        a.get(fake.stream(), blocking=False)
        with pytest.raises(ValueError):
            a.set(None)  # the original's error reaches the caller; nothing recorded
    copies = sorted((x.name, x.kind, x.nbytes) for x in p.kernels)
    assert copies == sorted(
        [(H2D, "copy", 4000), (H2D, "copy", 4000), (D2H, "copy", 4000), (D2H, "copy", 4000)]
    )
    assert all(x.duration_ns >= 2_000_000 and x.error is None for x in p.kernels)
    queues = sorted({x.queue for x in p.kernels})
    assert queues == ["legacy default stream", "stream 1"]
    after = (mod.ndarray.__dict__["get"], mod.ndarray.__dict__["set"], mod.asarray, mod.array)
    assert all(x is y for x, y in zip(originals, after))
    assert env.plugin.stats().in_use == 0


# -- NVTX ---------------------------------------------------------------------------------------


def test_a_finished_range_costs_one_event_query(env: Any) -> None:
    """Reading a finished range asks cudaEventQuery once (is its stop done?), not five times:
    cudaEventElapsedTime says NOT_READY itself (measured: ~2.6 µs per query on an H200 host)."""
    fake = env.fake
    recorded: set[int] = set()
    queries = 0
    record, query = fake.event_record, fake.event_query

    def recording(ptr: int, stream: int) -> None:
        recorded.add(ptr)
        record(ptr, stream)

    def counted(ptr: int) -> int:
        nonlocal queries
        queries += ptr in recorded  # the ranges' events, not the clock calibration's
        return query(ptr)

    n = 50
    with kprof.profile() as p:
        fake.event_record = recording
        for _ in range(n):
            with kprof.range("r"):
                pass
        fake.event_record = record
        fake.synchronize()  # every event is done before the profile's end reads them
        fake.event_query = counted
    assert len(p.device_ranges) == n
    assert queries == n  # before: 5 per range


def test_ranges_and_kernels_are_mirrored_to_nvtx(monkeypatch: pytest.MonkeyPatch) -> None:
    from kprof_cuda import nvtx as nvtx_mod

    fake_nvtx = FakeNvtx()
    monkeypatch.setitem(sys.modules, "nvtx", fake_nvtx)  # type: ignore[arg-type]
    for env in _env(monkeypatch, devices=1, nvtx=nvtx_mod.load()):
        k = kern(env.fake, "k", 0.0)
        with kprof.profile():
            with kprof.range("outer"):
                k()
                with kprof.range("inner"):
                    pass
        main = threading.current_thread().name
        assert fake_nvtx.calls == [
            ("push", "outer", main),
            ("push", "k", main),
            ("pop", None, main),
            ("push", "inner", main),
            ("pop", None, main),
            ("pop", None, main),
        ]


def test_nvtx_absent_means_no_mirroring(monkeypatch: pytest.MonkeyPatch) -> None:
    from kprof_cuda import nvtx as nvtx_mod

    monkeypatch.setitem(sys.modules, "nvtx", None)  # type: ignore[arg-type]
    assert nvtx_mod.load() is None


def test_nvtx_without_a_tool_means_no_mirroring(monkeypatch: pytest.MonkeyPatch) -> None:
    """``nvtx`` hands back its dummy domain when no tool (Nsight Systems) is injected: then
    nobody sees the ranges, and kprof does not pay two calls per range for them."""
    from kprof_cuda import nvtx as nvtx_mod

    class DummyDomain:
        pass

    class Domain:
        pass

    fake_nvtx = FakeNvtx()
    monkeypatch.setitem(sys.modules, "nvtx", fake_nvtx)  # type: ignore[arg-type]
    fake_nvtx.get_domain = lambda name: DummyDomain()  # type: ignore[attr-defined]
    assert nvtx_mod.load() is None
    fake_nvtx.get_domain = lambda name: Domain()  # type: ignore[attr-defined]
    assert nvtx_mod.load() is not None


# -- device memory through CuPy's memory hook ----------------------------------------------------


def test_cupys_pool_blocks_are_allocations_and_frees(env: Any) -> None:
    mod = env.mod
    dev = "fakecuda CUDA 0 (Fake GPU)"
    with kprof.profile() as p:
        a = mod.ndarray(1000)  # a 1024-byte block
        b = mod.ndarray(4096)
        del a
        c = mod.ndarray(1)  # 512
    assert [(e.kind, e.nbytes) for e in p.memory.events] == [
        ("alloc", 1024),
        ("alloc", 4096),
        ("free", 1024),
        ("alloc", 512),
    ]
    assert p.memory.peak == {dev: 5120} and p.memory.live_bytes_at_end == {dev: 4608}
    assert [x.address for x in p.memory.live_at_end] == [b._block[0], c._block[0]]
    assert FakeMemoryHook.hooks() == {}  # left at the end
    del b, c
    with kprof.profile() as p2:  # entered again for the next profile
        d = mod.ndarray(10)
    assert [e.nbytes for e in p2.memory.events] == [512]
    del d


def test_without_cupy_imported_no_memory_is_reported(
    env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delitem(sys.modules, MODULE)
    with kprof.profile() as p:
        env.mod.ndarray(100)
    assert not p.memory and FakeMemoryHook.hooks() == {}


def test_cupys_pool_blocks_keep_their_sites(env: Any) -> None:
    """``profile(sites=True)``: a block's site is the innermost frame that is not kprof's or a
    library's. Here that is the fake's ``ndarray.__init__`` (it lives in this test module);
    with CuPy itself (``cupy`` is skipped) it is the user's line that made the array."""
    with kprof.profile(sites=True) as p:
        a = env.mod.ndarray(1000)
    with open(__file__) as f:
        (line,) = [
            i + 1 for i, ln in enumerate(f) if "h.malloc_postprocess(" in ln and "def" not in ln
        ]
    [event] = p.memory.events
    assert event.site == f"test_cuda_fake.py:{line} fake_cupy_module.<locals>.ndarray.__init__"
    del a
