"""Benchmark ``memory`` (``python bench/run.py --only memory``): what device-memory tracking
costs per allocation (issue 23: at most 1 µs with memory hooks, nothing without)."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from harness import on_path, opencl, recorder_paths


def _paired(variants: dict[str, Callable[[], float]], rounds: int) -> dict[str, list[float]]:
    """Each variant once per round, in alternating order; every round's figures kept."""
    runs: dict[str, list[float]] = {k: [] for k in variants}
    for r in range(rounds):
        items = list(variants.items())
        for k, v in items[::-1] if r % 2 else items:
            runs[k].append(v())
    return runs


def bench(quick: bool) -> dict[str, Any]:
    """Three pairs, each the median over rounds of a per-round difference or ratio.

    ``record_ns_<path>``: kprof's cost per reported event, ``kprof.plugin.allocated`` in a
    profile minus the same call outside one (which returns at once), per recorder path.
    ``opencl_buffer_delta_ns``: a PyOpenCL ``Buffer`` made and released in a profile (the
    tracking subclass, two events) minus the same outside any profile (PoCL). ``no_hooks_ratio``:
    the test backend's allocation and free in a profile of a backend without memory hooks
    (``testnots``) over the same with no profile: nothing is installed, so ~1.
    """
    from kprof_testbackend import device

    import kprof
    from kprof import plugin as kp

    n = 20_000 if quick else 200_000
    rounds = 7 if quick else 21
    backend = kprof.get_backend("testdev")
    allocated = kp.allocated

    clock = time.perf_counter_ns

    def report_loop() -> float:
        t0 = clock()
        for i in range(n):
            allocated(backend, "testdev 0", i, 64)
        return (clock() - t0) / n

    def in_profile(sites: bool = False) -> float:
        with kprof.profile(backends="testdev", sites=sites) as p:
            ns = report_loop()
        assert len(p.memory) == n
        return ns

    def empty(*args: Any) -> None:
        pass

    def call_loop() -> float:  # the machine's speed: an empty Python call with the same args
        t0 = time.perf_counter_ns()
        for i in range(n):
            empty(backend, "testdev 0", i, 64)
        return (time.perf_counter_ns() - t0) / n

    out: dict[str, Any] = {"events_per_round": n, "rounds": rounds}
    out["empty_call_ns"] = statistics.median(call_loop() for _ in range(rounds))
    for label, compiled in recorder_paths().items():
        runs = _paired({"on": on_path(compiled, in_profile), "off": report_loop}, rounds)
        out[f"record_ns_{label}"] = statistics.median(
            a - b for a, b in zip(runs["on"], runs["off"])
        )
    clock = time.thread_time_ns
    for label, compiled in recorder_paths().items():
        runs = _paired(
            {
                "on": on_path(compiled, in_profile),
                "sites": on_path(compiled, lambda: in_profile(True)),
                "off": report_loop,
            },
            rounds,
        )
        for key, variant in (("record_ns", "on"), ("record_ns_sites", "sites")):
            out[f"{key}_{label}_cpu"] = statistics.median(
                a - b for a, b in zip(runs[variant], runs["off"])
            )
    clock = time.perf_counter_ns

    cl, ctx, *_ = opencl()
    os.environ["KPROF_OPENCL_MEMORY"] = "1"  # buffer reporting is off unless asked
    m = 2_000 if quick else 20_000
    flags = cl.mem_flags.READ_WRITE

    def buffers() -> float:
        make = cl.Buffer  # looked up per round: the tracking subclass while a profile runs
        t0 = time.perf_counter_ns()
        for _ in range(m):
            make(ctx, flags, 4096).release()
        return (time.perf_counter_ns() - t0) / m

    def buffers_profiled() -> float:
        with kprof.profile(backends="opencl") as p:
            ns = buffers()
        assert len(p.memory) == 2 * m
        return ns

    runs = _paired({"on": buffers_profiled, "off": buffers}, rounds)
    out["opencl_buffer_ns"] = statistics.median(runs["off"])
    out["opencl_buffer_delta_ns"] = statistics.median(
        a - b for a, b in zip(runs["on"], runs["off"])
    )

    def allocs() -> float:
        alloc = device.alloc
        t0 = clock()
        for _ in range(n):
            alloc(64).free()
        return (clock() - t0) / n

    def allocs_no_hooks() -> float:
        with kprof.profile(backends="testnots") as p:
            ns = allocs()
        assert not p.memory
        return ns

    runs = _paired({"on": allocs_no_hooks, "off": allocs}, rounds)
    out["no_hooks_alloc_ns"] = statistics.median(runs["off"])
    out["no_hooks_ratio"] = statistics.median(a / b for a, b in zip(runs["on"], runs["off"]))
    clock = time.thread_time_ns
    runs = _paired({"on": allocs_no_hooks, "off": allocs}, rounds)
    out["no_hooks_ratio_cpu"] = statistics.median(a / b for a, b in zip(runs["on"], runs["off"]))
    return out
