"""Queues created while kprof captures get PROFILING_ENABLE; PyOpenCL's class stays itself.

``import kprof`` turns profiling on for every later queue (``kprof.on_import``); the tests here
turn that off first, to see what capture and ``enable_profiling`` do alone, and turn it back
on after the module. What the default does in a program is tested in fresh processes below."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import kprof

cl = pytest.importorskip("pyopencl")
cla = pytest.importorskip("pyopencl.array")

import kprof_opencl  # noqa: E402
from kprof_opencl import profiled_queues  # noqa: E402

PROFILING = cl.command_queue_properties.PROFILING_ENABLE
OUT_OF_ORDER = cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE
REAL = cl._cl.CommandQueue  # PyOpenCL's class itself, wherever the name points


@pytest.fixture(scope="module")
def ctx() -> Any:
    dev = kprof_opencl.default_device()
    if dev is None:
        pytest.skip("OpenCL finds no device here (pip install pocl-binary-distribution)")
    return cl.Context([dev])


@pytest.fixture(scope="module", autouse=True)
def default_off() -> Iterator[None]:
    kprof_opencl.disable_profiling()
    yield
    kprof_opencl.enable_profiling()


@pytest.fixture(autouse=True)
def nothing_left_bound(default_off: None) -> Iterator[None]:
    assert cl.CommandQueue is REAL
    yield
    kprof_opencl.disable_profiling()
    assert cl.CommandQueue is REAL


def profile() -> kprof.profile:
    return kprof.profile(backends=["opencl"])


def test_queues_created_in_a_profile_profile_whatever_properties_they_are_given(ctx: Any) -> None:
    dev = ctx.devices[0]
    with profile():
        made = {
            "plain": cl.CommandQueue(ctx),
            "device positional": cl.CommandQueue(ctx, dev),
            "properties positional": cl.CommandQueue(ctx, dev, 0),
            "out of order": cl.CommandQueue(ctx, properties=OUT_OF_ORDER),
            "already profiling": cl.CommandQueue(ctx, properties=PROFILING),
            "OpenCL 2 list": cl.CommandQueue(ctx, None, [0x1093, 0]),  # CL_QUEUE_PROPERTIES
            "OpenCL 2 empty list": cl.CommandQueue(ctx, None, []),
        }
    real = profiled_queues.real_properties
    for what, q in made.items():
        assert real(q) & PROFILING, what
        assert type(q) is REAL, what  # PyOpenCL's own objects
    # The program sees the properties it asked for.
    asked = {"out of order": OUT_OF_ORDER, "already profiling": PROFILING}
    assert {what: q.properties for what, q in made.items()} == {
        what: asked.get(what, 0) for what in made
    }
    assert made["out of order"].properties & OUT_OF_ORDER
    assert cl.CommandQueue is REAL  # the very same class once the profile ends
    assert not real(cl.CommandQueue(ctx)) & PROFILING


def test_the_program_sees_the_properties_it_asked_for(ctx: Any) -> None:
    info = cl.command_queue_info
    real = profiled_queues.real_properties
    with profile():
        plain = cl.CommandQueue(ctx)
        listed = cl.CommandQueue(ctx, None, [0x1093, int(OUT_OF_ORDER)])
        asked = cl.CommandQueue(ctx, properties=PROFILING)
    assert real(plain) == PROFILING and real(listed) == OUT_OF_ORDER | PROFILING
    for q, want in [(plain, 0), (listed, OUT_OF_ORDER), (asked, PROFILING)]:
        assert q.properties == want
        assert q.get_info(info.PROPERTIES) == want
        # Another wrapper of the same handle answers the same.
        assert cl.CommandQueue.from_int_ptr(q.int_ptr).properties == want
        assert q.get_info(info.PROPERTIES_ARRAY)[:2] == [0x1093, want]
    assert plain.get_info(info.DEVICE) == ctx.devices[0]  # other keys untouched
    # And its work is still timed exactly.
    with profile() as p:
        cl.enqueue_marker(plain)
        knl = cl.Program(ctx, "__kernel void k(__global int *x) { x[0] = 1; }").build().k
        buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 4)
        knl(plain, (1,), None, buf)
        plain.finish()
    assert [(r.name, r.approximate) for r in p.kernels] == [("k", False)]


def test_bad_properties_fail_as_they_do_without_kprof(ctx: Any) -> None:
    with pytest.raises(Exception) as plain:
        cl.CommandQueue(ctx, properties="bad")
    with profile(), pytest.raises(Exception) as profiled:
        cl.CommandQueue(ctx, properties="bad")
    assert type(profiled.value) is type(plain.value)
    assert str(profiled.value) == str(plain.value)
    assert profiled.value.__context__ is None  # not chained to kprof's attempt with the flag


def test_a_queue_at_a_freed_queues_address_answers_for_itself(ctx: Any) -> None:
    with profile():
        q = cl.CommandQueue(ctx)
    handle = q.int_ptr
    assert handle in profiled_queues._added
    del q
    assert handle not in profiled_queues._added  # forgotten with the object kprof made
    # OpenCL may hand the address straight to the next queue; it answers for itself.
    again = [REAL(ctx, None, PROFILING) for _ in range(3)]
    assert [q.properties for q in again] == [PROFILING] * 3


def test_kprof_keeps_no_queue_of_the_program_alive_after_a_profile(ctx: Any) -> None:
    import gc

    freed = []

    class Sentinel:
        def __del__(self) -> None:
            freed.append(True)

    knl = cl.Program(ctx, "__kernel void k(__global int *x) { x[0] = 1; }").build().k
    buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 4)
    with profile():
        q = cl.CommandQueue(ctx)
        q.sentinel = Sentinel()
        for _ in range(2):  # ranges time on the queue last launched on (a cached flag)
            with kprof.range("step"):
                knl(q, (1,), None, buf)
        q.finish()
    kprof_opencl.use_queue(None)  # the thread's current queue, kept by design until replaced
    del q
    gc.collect()
    assert freed == [True]


def test_the_stand_in_answers_for_pyopencls_class(ctx: Any) -> None:
    before = cl.CommandQueue(ctx)
    with profile():
        assert isinstance(before, cl.CommandQueue)
        assert issubclass(REAL, cl.CommandQueue)
        assert cl.CommandQueue.from_int_ptr is REAL.from_int_ptr
        assert cl.CommandQueue.__name__ == "CommandQueue"
        # pyopencl.array checks isinstance(cq, cl.CommandQueue) on queues made before.
        x = cla.Array(before, (3,), np.float32)
        assert x.queue is before
        assert isinstance(cl.CommandQueue(ctx), REAL | None)

        class MyQueue(cl.CommandQueue):  # a subclass made meanwhile is a real queue class
            pass

        mine = MyQueue(ctx)
    assert MyQueue.__mro__[1] is REAL
    assert isinstance(mine, REAL) and mine.finish() is None


def test_queues_made_by_pyopencl_itself_get_device_times(ctx: Any) -> None:
    from pyopencl.tools import match_dtype_to_c_struct

    dtype = np.dtype([("a", np.int32), ("b", np.float64)])
    with profile() as p:
        # Creates its own cl.CommandQueue(context) and runs a kernel on it.
        match_dtype_to_c_struct(ctx.devices[0], "pair", dtype, ctx)
    rows = [r for r in p.kernels if r.name == "get_size_and_offsets"]
    assert len(rows) == 1
    assert not rows[0].host_timed and rows[0].error is None


def test_enable_profiling_covers_queues_made_before_a_profile(ctx: Any) -> None:
    kprof_opencl.enable_profiling()
    kprof_opencl.enable_profiling()  # idempotent
    assert kprof_opencl.profiling_enabled()
    real = profiled_queues.real_properties
    q = cl.CommandQueue(ctx)
    assert real(q) & PROFILING and not q.properties & PROFILING
    with profile():
        pass
    # A profile ending does not undo what the program asked for.
    assert real(cl.CommandQueue(ctx)) & PROFILING
    kprof_opencl.disable_profiling()
    assert cl.CommandQueue is REAL
    assert not real(cl.CommandQueue(ctx)) & PROFILING


def test_a_profile_ending_inside_enable_profiling_keeps_it(ctx: Any) -> None:
    with profile():
        kprof_opencl.enable_profiling()
    assert profiled_queues.real_properties(cl.CommandQueue(ctx)) & PROFILING
    kprof_opencl.disable_profiling()
    assert cl.CommandQueue is REAL


def test_with_profiling_keeps_the_form_it_was_given() -> None:
    w = profiled_queues.with_profiling
    assert w(0) == 2 and w(1) == 3
    assert w(4) == 4  # CL_QUEUE_ON_DEVICE: left alone
    assert w([0x1093, 1]) == [0x1093, 3]
    assert w((0x1094, 16)) == (0x1094, 16, 0x1093, 2)
    assert w([0x1093, 4 | 1]) == [0x1093, 5]
    assert w("x") == "x" and w([1, 2, 3]) == [1, 2, 3]


def test_a_plain_queue_program_under_kprof_run_gets_device_times(tmp_path: Path) -> None:
    from test_cli_run import kprof_run

    if kprof_opencl.default_device() is None:
        pytest.skip("no OpenCL device")
    script = Path(__file__).parent / "scripts" / "opencl_plain_queue_script.py"
    out = tmp_path / "run.kprof"
    # A relative path, as typed: the script still sees an absolute __file__, as with python.
    r = kprof_run("--backends", "opencl", "-o", str(out), script.name, cwd=script.parent)
    assert r.returncode == 0, r.stderr
    assert f"__file__={script}" in r.stdout
    assert "profiling=False" in r.stdout  # what it asked for; kprof's own bit is not shown
    p = kprof.load(out)
    assert {r.name for r in p.kernels} >= {"axpb", "[copy host to device]", "[copy device to host]"}
    assert all(not r.host_timed and r.error is None for r in p.kernels)
    assert "ProfilingDisabledWarning" not in r.stderr


def _program(order: str, pure: bool) -> dict[str, Any]:
    import json
    import os
    import subprocess
    import sys

    if kprof_opencl.default_device() is None:
        pytest.skip("no OpenCL device")
    script = Path(__file__).parent / "scripts" / "queue_before_profile.py"
    env = {k: v for k, v in os.environ.items() if not k.startswith("KPROF_")}
    if pure:
        env["KPROF_PURE_PYTHON"] = "1"
    r = subprocess.run(
        [sys.executable, str(script), order], capture_output=True, text=True, env=env, timeout=120
    )
    assert r.returncode == 0, r.stderr
    return dict(json.loads(r.stdout.splitlines()[-1]))


EXACT = [["twice", False, False]] * 3 + [["[copy device to host]", False, False]]


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "pure"])
@pytest.mark.parametrize("order", ["kprof-first", "pyopencl-first", "plugin-first"])
def test_a_queue_made_before_the_profile_gets_exact_device_times(order: str, pure: bool) -> None:
    got = _program(order, pure)
    assert got["rows"] == EXACT
    assert got["properties"] == 0  # as asked: kprof's own bit is not shown
    assert got["warnings"] == []
    assert " ~" not in got["report"] and "approximate" not in got["report"]


@pytest.mark.parametrize("order", ["queue-before-kprof", "declined"])
def test_a_queue_kprof_could_not_reach_is_approximate_and_says_why(order: str) -> None:
    got = _program(order, pure=False)
    assert got["rows"] == [[name, True, False] for name, _a, _h in EXACT]
    assert not got["properties"] & PROFILING  # made as asked
    ours = [w for w in got["warnings"] if w.startswith("ProfilingDisabledWarning")]
    assert len(ours) == 1
