"""Throughput the user says: ``kprof.range(name, flops=, bytes=)``, ``kprof.annotate`` by name
(applied at the profile's end) and on a kernel object (its callables given the call's
arguments, the values given to the kernel the call launched); GB/s and GFLOP/s in the
tables; kept through files, exports, merges and nesting; on both recorder paths, the test
backend and PoCL."""

from __future__ import annotations

import csv
import io
import re
import threading
from collections.abc import Iterator
from typing import Any

import pytest

import kprof
from kprof_core.io import storage
from kprof_core.low_level import native
from kprof_core.ranks.combine import combine
from kprof_core.recording.throughput import BY_NAME
from kprof_core.result import loads


@pytest.fixture(params=["compiled", "pure"])
def path(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "compiled" and native.compiled() is None:
        pytest.skip("the compiled recorder is not built here")
    native.use_compiled(request.param == "compiled")
    try:
        yield request.param
    finally:
        native.use_compiled(True)


@pytest.fixture(autouse=True)
def no_names() -> Iterator[None]:
    BY_NAME.clear()
    yield
    BY_NAME.clear()


def line_of(text: str, name: str) -> str:
    return next(ln for ln in text.splitlines() if ln.endswith(f"  {name}"))


def test_a_range_says_its_flops_and_bytes(path: str, testbackends: Any, tdq: Any) -> None:
    q = tdq()
    with kprof.profile() as p, q:
        for _ in range(3):
            with kprof.range("gemm", flops=2_000_000, bytes=3_000_000):
                q.launch("k", 50)
        with kprof.range("plain"):
            q.launch("k", 10)
    gemm = [r for r in p.device_ranges if r.name == "gemm"]
    assert [(r.flops, r.nbytes) for r in gemm] == [(2_000_000, 3_000_000)] * 3
    assert [(r.flops, r.nbytes) for r in p.device_ranges if r.name == "plain"] == [(None, None)]
    row = next(r for r in p.summary().device_ranges if r.name == "gemm")
    assert (row.flops, row.nbytes, row.calls) == (6_000_000, 9_000_000, 3)
    assert row.gflops == 6_000_000 / row.total_ns and row.gbps == 9_000_000 / row.total_ns
    assert all(k.flops is None for k in p.kernels)  # the kernels inside keep none
    text = p.report()
    ranges = text[text.index("Device-side ranges") :]
    assert "GFLOP/s" in ranges.splitlines()[1] and "Throughput" in ranges.splitlines()[1]
    assert f"{row.gflops:.3g}" in line_of(ranges, "gemm")
    # The device table has nothing said: no throughput columns there.
    device = text[text.index("Device-side activity") : text.index("Device-side ranges")]
    assert "GFLOP/s" not in device and "Throughput" not in device


def test_annotate_by_name_at_the_end(path: str, testbackends: Any, tdq: Any) -> None:
    kprof.annotate("k", flops=1000, bytes=4000)
    q = tdq()
    with kprof.profile() as p, q:
        for _ in range(5):
            q.launch("k", 20)
            q.launch("j", 20)
    assert [(r.name, r.flops, r.nbytes) for r in p.kernels[:2]] == [
        ("k", 1000, 4000),
        ("j", None, None),
    ]
    s = p.summary()
    assert (s.device_row("k").flops, s.device_row("k").nbytes) == (5000, 20000)
    assert s.device_row("j").flops is None
    header = p.report().splitlines()
    # Columns are as wide as their widest cell: a rate measured on a loaded machine may be
    # wider than its header, which is then padded (the test failed under load).
    assert any(re.search(r"Throughput +GFLOP/s", ln) for ln in header)
    kprof.annotate("k")  # forgotten
    with kprof.profile() as p2, q:
        q.launch("k", 20)
    assert p2.kernels[0].flops is None


def test_annotate_a_kernel_object_with_callables(path: str, testbackends: Any, tdq: Any) -> None:
    q = tdq()
    seen: list[tuple[Any, ...]] = []

    def flops(name: str, duration_us: float, **kw: Any) -> int:
        seen.append((name, duration_us, kw))
        return int(duration_us) * 10

    # A function that launches (q.launch is looked up at each call: capture patches it).
    launch = kprof.annotate(lambda *a, **k: q.launch(*a, **k), flops=flops, bytes=lambda *a, **k: 8)
    launch("k", 5)  # outside a profile: the call only, nothing evaluated
    assert seen == []
    other: list[Any] = []

    def elsewhere() -> None:
        for _ in range(20):
            q.launch("theirs", 1)  # another thread, launching meanwhile: not annotated

    with kprof.profile() as p, q:
        t = threading.Thread(target=kprof.propagate(elsewhere))
        t.start()
        launch("k", 100)
        q.launch("j", 10)  # not annotated
        launch("k", 50, grid=(2, 1, 1), block=(8, 1, 1))
        t.join()
    other = [k for k in p.kernels if k.name == "theirs"]
    assert len(other) == 20 and all(k.flops is None and k.nbytes is None for k in other)
    mine = [(k.name, k.flops, k.nbytes) for k in p.kernels if k.name != "theirs"]
    assert mine == [("k", 1000, 8), ("j", None, None), ("k", 500, 8)]
    assert seen == [("k", 100, {}), ("k", 50, {"grid": (2, 1, 1), "block": (8, 1, 1)})]
    assert p.summary().device_row("k").flops == 1500
    # By name and config too.
    by = {(r.name, r.config): r.flops for r in p.summary(by=("name", "config")).device}
    assert by[("k", None)] == 1000 and by[("k", "grid 2x1x1 block 8x1x1")] == 500


def test_a_callable_that_raises_is_said_once_and_costs_nothing_else(
    testbackends: Any, tdq: Any
) -> None:
    q = tdq()
    launch = kprof.annotate(lambda *a: q.launch(*a), flops=lambda *a, **k: 1 // 0)
    with pytest.warns(RuntimeWarning, match="kprof.annotate callable raised ZeroDivisionError"):
        with kprof.profile() as p, q:
            launch("k", 1)
            launch("k", 1)
    assert [k.flops for k in p.kernels] == [None, None]


def test_what_annotate_and_range_refuse() -> None:
    with pytest.raises(TypeError, match="a callable needs the launch's arguments"):
        kprof.annotate("k", flops=lambda: 1)
    with pytest.raises(TypeError, match="flops must be an int"):
        kprof.range("r", flops="many")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="bytes must be from 0"):
        kprof.range("r", bytes=-5)
    with pytest.raises(TypeError, match="takes a name or a kernel object"):
        kprof.annotate(42)
    assert kprof.range("r", flops=2.6).flops == 3  # a float is rounded


def test_saved_exported_merged_and_nested(
    path: str, testbackends: Any, tdq: Any, tmp_path: Any
) -> None:
    q = tdq()
    launch = kprof.annotate(
        lambda *a: q.launch(*a), flops=lambda name, us: 7, bytes=lambda name, us: 64
    )
    with kprof.profile() as outer, q:
        with kprof.profile() as inner:
            launch("k", 1)
        with kprof.range("r", flops=100):
            q.launch("j", 1)
    assert [k.flops for k in inner.kernels] == [7]
    assert {(k.name, k.flops) for k in outer.kernels} == {("k", 7), ("j", None)}
    data = storage.dumps(outer)
    assert storage.peek_version(data) == 5
    back = loads(data)
    assert list(back.table.flops) == list(outer.table.flops)
    assert list(back.table.nbytes) == list(outer.table.nbytes)
    rows = list(csv.DictReader(io.StringIO(outer.to_csv() or "")))
    assert sorted(r["flops"] for r in rows if r["record"] == "device") == ["", "100", "7"]
    both = combine([outer, inner])
    assert sorted(f for f in both.table.flops if f >= 0) == [7, 7, 100]
    # A profile nothing was said of stays as it was written before.
    with kprof.profile() as plain, q:
        q.launch("j", 1)
    assert storage.peek_version(storage.dumps(plain)) == 1


# -- real OpenCL (PoCL) ---------------------------------------------------------------------------

SOURCE = "__kernel void bump(__global float *x) { x[get_global_id(0)] += 1.0f; }"


def test_opencl_kernel_object_annotated(path: str) -> None:
    cl = pytest.importorskip("pyopencl")
    import kprof_opencl

    dev = kprof_opencl.default_device()
    if dev is None:
        pytest.skip("OpenCL finds no device here (pip install pocl-binary-distribution)")
    q = kprof_opencl.profiling_queue(dev)
    prg = cl.Program(q.context, SOURCE).build()
    buf = cl.Buffer(q.context, cl.mem_flags.READ_WRITE, 4 * 4096)
    bump = kprof.annotate(
        cl.Kernel(prg, "bump"),
        flops=lambda queue, gsize, lsize, x: gsize[0],
        bytes=lambda queue, gsize, lsize, x: 8 * gsize[0],
    )
    bump(q, (64,), None, buf)
    q.finish()
    with kprof.profile(backends=["opencl"]) as p:
        for n in (4096, 1024, 4096):
            bump(q, (n,), (64,), buf)
        q.finish()
    assert [(k.flops, k.nbytes, k.config) for k in p.kernels] == [
        (4096, 32768, "global 4096 local 64"),
        (1024, 8192, "global 1024 local 64"),
        (4096, 32768, "global 4096 local 64"),
    ]
    row = p.summary().device_row("bump")
    assert (row.flops, row.nbytes) == (9216, 73728)
    text = p.report()
    assert f"{row.gflops:.3g}" in line_of(text[text.index("Device-side activity") :], "bump")
