"""Ranges as raw records: on the compiled path, where the dispatch-table hook records a queue's
launches raw, ``kprof.range`` puts its timestamps on that queue in C (``_clhook.raw_stamp()``, a
``KprofRawStamp`` on the ``record_timestamp`` hook) and its device side joins the launches'
batch as one raw record (``_stamp.c``). These tests check that ranges and kernels then wait in
one batch, that the rows are those the Python hook's markers make, that every path that may end
a range (its exit, the profile's end, a queue the hook does not time) keeps it, and that every
event comes back."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import pytest

import kprof
from kprof_core.low_level.layout import A_RECORD, ENTRY_LAUNCH_BATCH, KIND
from kprof_core.recording.recorder import Recorder
from kprof_opencl import hook

cl = pytest.importorskip("pyopencl")

import kprof_opencl  # noqa: E402
from kprof_opencl import plugin  # noqa: E402

SRC = "__kernel void tiny(__global float *a) { a[get_global_id(0)] += 1.0f; }"


@pytest.fixture(scope="module")
def ctx() -> Any:
    dev = kprof_opencl.default_device()
    if dev is None:
        pytest.skip("OpenCL finds no device here (pip install pocl-binary-distribution)")
    return cl.Context([dev])


@pytest.fixture(scope="module")
def queue(ctx: Any) -> Any:
    return cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)


@pytest.fixture(scope="module")
def kernel(ctx: Any) -> Iterator[Any]:
    buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 64 * 4)
    k = cl.Program(ctx, SRC).build().tiny
    k.set_arg(0, buf)
    yield k
    del buf  # (a kernel's argument does not keep its buffer alive)


@pytest.fixture
def raw() -> Any:
    """The hook with its raw stamp, where ranges are recorded raw (compiled recorder and hook,
    a hookable platform)."""
    mod = hook.module()
    if mod is None or kprof.plugin.raw_launch_capsule() is None:
        pytest.skip("the compiled hook or recorder is not in use (KPROF_PURE_PYTHON=1)")
    if not any(p.table is not None for p in hook.survey()):
        pytest.skip("no OpenCL platform here can be hooked")
    assert getattr(plugin.record_timestamp, "kprof_raw_stamp", None) is not None
    return mod


def launch(queue: Any, kernel: Any) -> None:
    cl.enqueue_nd_range_kernel(queue, kernel, (64,), None)


def batches(rec: Recorder) -> list[Any]:
    return [e[A_RECORD] for e in rec.rows.incoming if e[KIND] == ENTRY_LAUNCH_BATCH]


def rows(p: kprof.Profile) -> tuple[list[Any], list[Any], list[Any]]:
    """What the two paths must agree on: device ranges, host ranges, kernels (not the times,
    nor the queue's label: each profile names the queues it meets, in its own order)."""
    device = [(r.name, r.kind, r.thread, r.site, r.flops, r.nbytes) for r in p.device_ranges]
    host = [(r.name, r.kind, r.thread, r.site) for r in p.ranges]
    kernels = [(r.name, r.thread, r.site) for r in p.kernels]
    return device, host, kernels


def test_ranges_and_their_kernels_wait_in_one_batch(raw: Any, queue: Any, kernel: Any) -> None:
    launch(queue, kernel)
    queue.finish()
    before = raw.stats()["events"]
    with kprof.profile(backends=["opencl"]) as p, kprof_opencl.use_queue(queue):
        rec = kprof.plugin.active()
        assert isinstance(rec, Recorder)
        for _ in range(20):
            with kprof.range("step", flops=10, bytes=256):
                launch(queue, kernel)
        # One pending entry: 20 kernels and 20 ranges, no Python token for a range's stop.
        [batch] = batches(rec)
        assert len(batch) == 40 and len(rec.rows.incoming) == 1
        assert rec._pending() == 40
    assert not p.unresolved
    ranges, kernels = p.device_ranges, p.kernels
    assert len(ranges) == 20 and len(kernels) == 20 and len(p.ranges) == 20
    assert {(r.flops, r.nbytes) for r in ranges} == {(10, 256)}
    for r, k in zip(ranges, kernels):  # each range's markers bracket its kernel on the queue
        assert r.start_ns <= k.start_ns and k.start_ns + k.duration_ns <= r.end_ns
    assert raw.stats()["events"] == before


def steps(queue: Any, kernel: Any) -> None:
    for i in range(6):
        with kprof.range("outer"):
            launch(queue, kernel)
            with kprof.range(f"inner{i % 2}", flops=i):
                launch(queue, kernel)
                launch(queue, kernel)


def test_raw_ranges_make_the_rows_the_python_hook_makes(
    raw: Any, queue: Any, kernel: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def profile() -> tuple[list[Any], list[Any], list[Any]]:
        with kprof.profile(backends=["opencl"], sites=True) as p, kprof_opencl.use_queue(queue):
            steps(queue, kernel)
        assert not p.unresolved
        return rows(p)

    launch(queue, kernel)
    before = raw.stats()["events"]
    stamped = profile()
    # Without the raw twin: the Python hook's PyOpenCL markers, a Python entry per range.
    monkeypatch.delattr(plugin.record_timestamp, "kprof_raw_stamp")
    hooked = profile()
    assert stamped == hooked
    device, host, kernels = stamped
    assert len(device) == 12 and len(host) == 12 and len(kernels) == 18
    assert raw.stats()["events"] == before


def test_a_range_open_at_the_profiles_end_is_cut_as_before(
    raw: Any, queue: Any, kernel: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its start is the plugin's Python token: the profile's end records it the Python way (on
    the host, up to the end) and gives the token back."""

    def profile() -> tuple[Any, ...]:
        r = kprof.range("open")
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            with kprof.profile(backends=["opencl"]) as p, kprof_opencl.use_queue(queue):
                launch(queue, kernel)
                r.__enter__()
                launch(queue, kernel)
        r.__exit__(None, None, None)  # after the end: nothing more recorded
        assert not p.unresolved
        return rows(p), [str(w.message) for w in said]

    launch(queue, kernel)
    before = raw.stats()["events"]
    stamped = profile()
    monkeypatch.delattr(plugin.record_timestamp, "kprof_raw_stamp")
    assert stamped == profile()
    (device, host, kernels), said = stamped
    assert (device, len(kernels)) == ([], 2) and [h[0] for h in host] == ["open"]
    assert any("still open when the profile ended" in m for m in said)
    assert raw.stats()["events"] == before


def test_where_launches_take_tokens_ranges_take_the_python_hook(
    raw: Any, queue: Any, kernel: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The raw stamp declines where the hook does not hand launches over raw (bound without
    the recorder's capsule): no batch, and the same rows."""

    def profile() -> tuple[list[Any], list[Any], list[Any]]:
        with kprof.profile(backends=["opencl"], sites=True) as p, kprof_opencl.use_queue(queue):
            rec = kprof.plugin.active()
            assert isinstance(rec, Recorder)
            steps(queue, kernel)
            got = batches(rec)
        assert not p.unresolved
        return rows(p), got

    launch(queue, kernel)
    stamped, got = profile()
    assert got
    monkeypatch.setattr(hook.kp, "raw_launch_capsule", lambda: None)
    tokens, got = profile()
    assert not got and tokens == stamped
