"""Launch sites of CUPTI's rows on a real NVIDIA GPU (CUPTI's callback API; skipped without a
GPU, or where CUPTI cannot be used): CuPy's kernels, launched with the GIL released, each with
the test's line; a raw kernel's grid and block as its launch configuration; stacks; and the
host cost per launch with sites on and off (figures to ``KPROF_GPU_FIGURES``'s file, beside
``test_cuda_gpu.py``'s, when set)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import kprof
from kprof_core.data.stacks import frames_of

cupy = pytest.importorskip("cupy")
numpy = pytest.importorskip("numpy")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not cupy.cuda.is_available(), reason="needs a CUDA GPU"),
]

HERE = str(Path(__file__).resolve())
EMPTY = r"""extern "C" __global__ void empty_k() {}"""
FIGURES: dict[str, Any] = {}


def line(marker: str) -> int:
    for n, text in enumerate(Path(HERE).read_text().splitlines(), 1):
        if text.rstrip().endswith(f"# {marker}"):
            return n
    raise AssertionError(marker)


@pytest.fixture(scope="module")
def cuda() -> Iterator[kprof.plugin.Backend]:
    try:
        b = kprof.get_backend("cuda")
    except kprof.KprofError:
        import kprof_cuda.plugin

        b = kprof.register_backend(kprof_cuda.plugin.plugin, "cuda")
    from kprof_cuda.plugin import plugin

    if plugin.activity is None or plugin.activity.probe() is not None:
        pytest.skip("CUPTI cannot be used here: no CUPTI rows to give sites to")
    yield b
    path = os.environ.get("KPROF_GPU_FIGURES")
    if path and FIGURES:
        old: dict[str, Any] = {}
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                old = json.load(f)
        with open(path, "w", encoding="utf-8") as f:
            json.dump({**old, "cupti_sites": FIGURES}, f, indent=2)


@pytest.fixture(scope="module")
def empty() -> Any:
    k = cupy.RawKernel(EMPTY, "empty_k")
    k((1,), (1,), ())
    cupy.cuda.Device().synchronize()
    return k


def site_lines(p: kprof.Profile) -> list[tuple[str, int | None]]:
    out = []
    for i in range(len(p.table)):
        if p.table.kind[i] != 0:
            continue
        s = p.table.site[i]
        site = p.sites[s] if s >= 0 else None
        out.append(
            (
                p.names[p.table.name[i]],
                site.line if site is not None and site.file == HERE else None,
            )
        )
    return out


def test_cupy_kernels_have_the_tests_line(cuda: kprof.plugin.Backend, empty: Any) -> None:
    a = cupy.arange(1 << 16, dtype=cupy.float32)
    (a * 2).sum()  # compile outside the profile
    cupy.cuda.Device().synchronize()
    with kprof.profile(backends=["cuda"], sites=True) as p:
        b = a * 2  # gpu: multiply
        empty((3,), (64,), ())  # gpu: raw
        cupy.cuda.Device().synchronize()
    got = site_lines(p)
    assert got, "no kernel recorded"
    assert all(ln is not None for _, ln in got), got
    assert {ln for _, ln in got} == {line("gpu: multiply"), line("gpu: raw")}, got
    assert ("empty_k", line("gpu: raw")) in got, got
    # The raw kernel's launch configuration, from its CUPTI record.
    t = p.table
    configs = {p.configs[t.config[i]] for i in range(len(t)) if p.names[t.name[i]] == "empty_k"}
    assert configs == {"grid 3x1x1 block 64x1x1"}, configs
    FIGURES["sites"] = got
    del b


def inner(empty: Any) -> None:
    empty((1,), (1,), ())  # gpu stack: inner


def test_stacks(cuda: kprof.plugin.Backend, empty: Any) -> None:
    with kprof.profile(backends=["cuda"], stacks=True) as p:
        inner(empty)  # gpu stack: outer
        cupy.cuda.Device().synchronize()
    [i] = [i for i in range(len(p.table)) if p.names[p.table.name[i]] == "empty_k"]
    frames = [(f.function, f.line) for f in frames_of(p, "device", i)][-2:]
    assert frames == [
        ("test_stacks", line("gpu stack: outer")),
        ("inner", line("gpu stack: inner")),
    ], frames


def _per_launch_ns(fn: Any, n: int) -> float:
    cupy.cuda.Device().synchronize()
    t0 = time.thread_time_ns()
    for _ in range(n):
        fn()
    t1 = time.thread_time_ns()
    cupy.cuda.Device().synchronize()
    return (t1 - t0) / n


def test_cost_per_launch_sites_on_and_off(cuda: kprof.plugin.Backend, empty: Any) -> None:
    """The launching thread's CPU time per raw launch, CUPTI on, sites off and on, in
    interleaved rounds: the callback's cost (figures only; no bound asserted here)."""
    n, rounds = 2000, 5

    def raw() -> None:
        empty((1,), (1,), ())

    ratios, on_ns, off_ns = [], [], []
    for _ in range(rounds):
        with kprof.profile(backends=["cuda"]) as off_p:
            off = _per_launch_ns(raw, n)
        with kprof.profile(backends=["cuda"], sites=True) as on_p:
            on = _per_launch_ns(raw, n)
        assert len(off_p.kernels) == len(on_p.kernels) == n
        off_ns.append(off)
        on_ns.append(on)
        ratios.append(on / off)
    FIGURES["cost_per_launch"] = {
        "sites_off_ns": sorted(off_ns)[rounds // 2],
        "sites_on_ns": sorted(on_ns)[rounds // 2],
        "median_ratio": sorted(ratios)[rounds // 2],
    }
