"""Raw launches: on the compiled path the dispatch-table hook hands each enqueue made from C to
the recorder as a ``KprofRawLaunch`` (``_layout.h``), kept in a C batch (``_batch.c``, one pending
entry per batch) with its cl_event, and no Python object made per launch. These tests check
that the batch is what the harvest takes, that its rows are those the token path
(``rec.launch`` with an ``Event`` per launch) makes, and that every event it holds is given
back whatever route its records take (column-wise, one by one, dropped)."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

import kprof
from kprof_core.low_level.layout import A_RECORD, ENTRY_LAUNCH_BATCH, KIND
from kprof_core.recording import harvest_batch
from kprof_core.recording.recorder import Recorder
from kprof_opencl import hook

cl = pytest.importorskip("pyopencl")

import kprof_opencl  # noqa: E402

sys.path.insert(0, str(Path(__file__).with_name("opencl_clib")))
from clib import CLib  # noqa: E402


@pytest.fixture(scope="module")
def queue() -> Any:
    dev = kprof_opencl.default_device()
    if dev is None:
        pytest.skip("OpenCL finds no device here (pip install pocl-binary-distribution)")
    ctx = cl.Context([dev])
    return cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)


@pytest.fixture
def raw() -> Any:
    """The hook, where it hands launches over raw (compiled recorder, a hookable platform)."""
    mod = hook.module()
    if mod is None or kprof.plugin.raw_launch_capsule() is None:
        pytest.skip("the compiled hook or recorder is not in use (KPROF_PURE_PYTHON=1)")
    if not any(p.table is not None for p in hook.survey()):
        pytest.skip("no OpenCL platform here can be hooked")
    return mod


def batches(rec: Recorder) -> list[Any]:
    return [e[A_RECORD] for e in rec.rows.incoming if e[KIND] == ENTRY_LAUNCH_BATCH]


def kc(p: kprof.Profile) -> list[Any]:
    return [k for k in p.kernels if k.name == "kc_tiny"]


def test_c_launches_wait_in_one_batch_and_every_event_comes_back(
    raw: Any, clib: CLib, queue: Any
) -> None:
    clib.loop(queue.int_ptr, 1)  # the program and kernel made outside the profile
    before = raw.stats()["events"]
    with kprof.profile(backends=["opencl"]) as p:
        rec = kprof.plugin.active()
        assert isinstance(rec, Recorder)
        clib.loop(queue.int_ptr, 100)
        # One pending entry holds all of them, and the pending count says 100.
        [batch] = batches(rec)
        assert len(batch) == 100 and len(rec.rows.incoming) == 1
        assert rec._pending() == 100
        assert raw.stats()["events"] == before + 100  # raw references, no Event objects
    rows = kc(p)
    assert len(rows) == 100 and not p.unresolved
    assert all(r.duration_ns > 0 for r in rows)
    assert raw.stats()["events"] == before


def test_raw_launches_make_the_rows_the_token_path_makes(
    raw: Any, clib: CLib, queue: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def profile() -> list[tuple[Any, ...]]:
        with kprof.profile(backends=["opencl"], sites=True) as p:
            clib.loop(queue.int_ptr, 50)
        assert not p.unresolved
        # (Not the queue's label: each profile names the queues it meets, in its own order.)
        return [(r.name, r.kind, r.thread, r.nbytes, r.site, r.config) for r in kc(p)]

    clib.loop(queue.int_ptr, 1)
    with_batches = profile()
    # The hook bound without the recorder's capsule: an Event token per launch, rec.launch.
    monkeypatch.setattr(hook.kp, "raw_launch_capsule", lambda: None)
    with_tokens = profile()
    assert len(with_batches) == 50
    assert with_batches == with_tokens
    site = with_batches[0][4]
    assert site is not None and site.function == "CLib.loop"  # the Python line that called C


def test_the_pending_count_bounds_a_batch_as_entries_are_bounded(
    raw: Any, clib: CLib, queue: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Recorder, "harvest_every", 16)
    monkeypatch.setattr(Recorder, "max_pending", 64)
    clib.loop(queue.int_ptr, 1)
    before = raw.stats()["events"]
    with kprof.profile(backends=["opencl"]) as p:
        rec = kprof.plugin.active()
        clib.loop(queue.int_ptr, 1000)
    assert len(kc(p)) == 1000 and not p.unresolved
    # Harvested as it went: never more than max_pending launches (and the one coming in).
    assert isinstance(rec, Recorder)
    assert 16 <= rec.pending_high_water <= Recorder.max_pending + 1
    assert raw.stats()["events"] == before


def test_a_batch_given_to_the_one_by_one_route_keeps_every_row(
    raw: Any, clib: CLib, queue: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``explode``: the batch's records become the entries ``rec.launch`` makes."""
    monkeypatch.setattr(harvest_batch, "take", lambda *a: harvest_batch.REST)
    clib.loop(queue.int_ptr, 1)
    before = raw.stats()["events"]
    with kprof.profile(backends=["opencl"]) as p:
        clib.loop(queue.int_ptr, 40)
    assert len(kc(p)) == 40 and not p.unresolved
    assert raw.stats()["events"] == before


def test_a_batch_kprof_cannot_read_is_dropped_with_a_warning_and_its_events_back(
    raw: Any, clib: CLib, queue: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any) -> int:
        raise RuntimeError("a reader's bug")

    monkeypatch.setattr(harvest_batch, "take", broken)
    clib.loop(queue.int_ptr, 1)
    before = raw.stats()["events"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with kprof.profile(backends=["opencl"]) as p:
            clib.loop(queue.int_ptr, 30)
    said = [str(w.message) for w in caught if "dropped" in str(w.message)]
    assert len(said) == 1 and "a batch of 30 launches" in said[0], said
    assert "RuntimeError: a reader's bug" in said[0]
    assert not kc(p)
    assert raw.stats()["events"] == before


def test_pyopencl_launches_take_the_hook_as_their_one_capture_path(raw: Any, queue: Any) -> None:
    from kprof_core.host.discovery import registry

    prg = cl.Program(queue.context, "__kernel void k1(__global float *x) { x[0] += 1; }").build()
    k1 = cl.Kernel(prg, "k1")
    buf = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, 64)
    native = cl._cl.enqueue_nd_range_kernel
    with kprof.profile(backends=["opencl"]) as p:
        assert registry.get("opencl").state["kernels_hooked"]
        assert cl._cl.enqueue_nd_range_kernel is native  # no wrapper: the hook records them
        for _ in range(4):
            k1(queue, (16,), (4,), buf)
        rec = kprof.plugin.active()
        assert isinstance(rec, Recorder) and [len(b) for b in batches(rec)] == [4]
        assert kprof_opencl.current_queue() is queue  # the program's object, not the hook's
        queue.finish()
    rows = [k for k in p.kernels if k.name == "k1"]
    assert len(rows) == 4 and not p.unresolved
    assert {(r.queue, r.config) for r in rows} == {(queue._kprof_label, "global 16 local 4")}


def test_c_launches_carry_their_launch_configuration(raw: Any, clib: CLib, queue: Any) -> None:
    clib.loop(queue.int_ptr, 1)
    with kprof.profile(backends=["opencl"]) as p:
        clib.loop(queue.int_ptr, 3)
    assert [r.config for r in kc(p)] == ["global 64"] * 3  # kc_loop: 64 work-items, no local


def test_both_recorder_paths_record_pyopencl_launches_alike(raw: Any, queue: Any) -> None:
    """The compiled path (the hook, raw launches) and the pure one (PyOpenCL's capture)."""
    from kprof_core.low_level import native

    prg = cl.Program(queue.context, "__kernel void k2(__global float *x) { x[1] += 1; }").build()
    k2 = cl.Kernel(prg, "k2")
    buf = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, 64)
    got = []
    for compiled in (True, False):
        native.use_compiled(compiled)
        try:
            with kprof.profile(backends=["opencl"], sites=True) as p:
                for size in ((8,), (8,), (16,)):
                    k2(queue, size, None, buf)
                queue.finish()
        finally:
            native.use_compiled(True)
        rows = [k for k in p.kernels if k.name == "k2"]
        assert not p.unresolved and all(r.duration_ns > 0 for r in rows)
        got.append([(r.kind, r.thread, r.config, r.site and r.site.line) for r in rows])
    assert got[0] == got[1]
    assert [c for _, _, c, _ in got[0]] == ["global 8", "global 8", "global 16"]


@pytest.mark.parametrize("path", ["hook", "launcher", "pure"])
def test_every_path_records_what_was_enqueued(
    raw: Any, queue: Any, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``g_times_l`` and an empty range (``allow_empty_ndrange``: PyOpenCL enqueues a marker)
    are recorded as the dispatch-table hook sees them, on every capture path."""
    from kprof_core.low_level import native

    prg = cl.Program(queue.context, "__kernel void k3(__global float *x) { x[2] += 1; }").build()
    k3 = cl.Kernel(prg, "k3")
    buf = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, 64)  # alive while k3 uses it
    k3.set_arg(0, buf)
    if path == "launcher":  # the compiled wrapper: as where a platform cannot be hooked
        monkeypatch.setattr(hook, "records_every_kernel", lambda *a: False)
    native.use_compiled(path != "pure")
    try:
        with kprof.profile(backends=["opencl"]) as p:
            cl.enqueue_nd_range_kernel(queue, k3, (8,), (4,), None, None, True)  # by position
            cl.enqueue_nd_range_kernel(queue, k3, (2,), (4,), g_times_l=True)
            cl.enqueue_nd_range_kernel(queue, k3, (0,), None, allow_empty_ndrange=True)
            cl.enqueue_nd_range_kernel(queue, k3, (16,), None)
            queue.finish()
    finally:
        native.use_compiled(True)
    rows = [k for k in p.kernels if k.name == "k3"]
    assert [r.config for r in rows] == ["global 32 local 4", "global 8 local 4", "global 16"]
    assert not p.unresolved
