"""Timelines on a real OpenCL device (PoCL's CPU device): the trace rows and their nesting,
and a valid Chrome trace, for ``examples/opencl_pipeline.py``."""

from __future__ import annotations

import importlib.util
import io
import json
import os
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from tracecheck import validate_text

import kprof
from kprof_core.renderers.chrome import write_chrome_trace
from kprof_core.renderers.console import trace_rows

EXAMPLE = Path(__file__).parent.parent / "examples" / "opencl_pipeline.py"


@pytest.fixture(scope="module")
def pipeline() -> ModuleType:
    pytest.importorskip("pyopencl")
    import kprof_opencl

    if kprof_opencl.default_device() is None:
        pytest.skip("OpenCL finds no device here (pip install pocl-binary-distribution)")
    spec = importlib.util.spec_from_file_location("opencl_pipeline", EXAMPLE)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def profile(pipeline: ModuleType) -> kprof.Profile:
    pipeline.main(steps=1, n=1024)  # compile and warm up outside the profile
    os.environ["KPROF_OPENCL_MEMORY"] = "1"  # the buffers too: a memory counter track
    try:
        with kprof.profile(trace=True, backends=["opencl"]) as p:
            pipeline.main(steps=3, n=1 << 14)
    finally:
        del os.environ["KPROF_OPENCL_MEMORY"]
    return p


def test_trace_rows_and_nesting_on_pocl(profile: kprof.Profile) -> None:
    rows = trace_rows(profile)
    assert [r[0] for r in rows] == sorted(r[0] for r in rows)
    device = {on for _s, _d, on, _n, _z in rows if on.startswith("OpenCL ")}
    assert len(device) == 2, "one row per queue (and launching thread)"
    main_q = next(on for on in device if on.endswith(", thread 1"))
    side_q = next(on for on in device if on.endswith(", thread 2"))
    assert main_q.split(", ")[-2] != side_q.split(", ")[-2], "two different queues"

    def on(row: str) -> list[tuple[str, int]]:
        return [(name, depth) for _s, _d, o, name, depth in rows if o == row]

    # Host: each step encloses its launches; markers come between steps.
    host1 = on("thread 1")
    assert [x for x in host1 if x[1] == 0] == [("step", 0), ("◆ step done", 0)] * 3
    assert sorted({x for x in host1 if x[1] == 1}) == [
        ("[copy device to host]", 1),
        ("[copy host to device]", 1),
        ("add", 1),
        ("scale", 1),
    ]
    assert on("thread 2") == [("prepare y", 0), ("[copy host to device]", 1), ("scale", 1)] * 3
    # Device: the device time of each range encloses the work enqueued inside it, in order.
    assert (
        on(main_q)
        == [
            ("step", 0),
            ("[copy host to device]", 1),
            ("scale", 1),
            ("add", 1),
            ("[copy device to host]", 1),
        ]
        * 3
    )
    assert on(side_q) == [("prepare y", 0), ("[copy host to device]", 1), ("scale", 1)] * 3
    text = profile.report()
    assert "Device clocks placed on the host timeline:" in text
    (clock,) = profile.clocks.values()
    assert f"error ≤ {clock.error_ns} ns" in text or "unknown error bound" in text


def test_the_chrome_trace_is_valid_on_pocl(profile: kprof.Profile) -> None:
    f = io.StringIO()
    write_chrome_trace(f, [profile])
    c = validate_text(f.getvalue())
    kernels = c.all_slices("kernel") + c.all_slices("copy")
    assert len(kernels) == len(profile.kernels) == 3 * 6  # per step: 4 on main, 2 on side
    assert len(c.flows) == len(kernels), "an arrow from every launch to its device work"
    copies = c.all_slices("copy")
    assert {e["args"]["bytes"] for e in copies} == {(1 << 14) * 4}
    procs = sorted(c.processes.values())
    assert procs[0].startswith("OpenCL ") and procs[-1].startswith("host ")
    assert procs[1:-1] == ["device memory"]  # the pipeline's buffers
    labels: Any = [
        e["args"]["labels"]
        for e in json.loads(f.getvalue())["traceEvents"]
        if e["ph"] == "M" and e["name"] == "process_labels"
    ]
    assert any(x.startswith("clock: ") for x in labels)
