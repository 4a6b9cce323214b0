"""``kprof demo``: the reference workload (KernelAbstractions #837's mul2/add) under a profile."""

from __future__ import annotations

import argparse
from typing import Any

from kprof_core.cli.common import EXIT_NOT_WRITTEN, add_output_options, write_outputs
from kprof_core.host.backend import Backend, KprofError
from kprof_core.host.discovery import registry
from kprof_core.profiler import profile
from kprof_core.recording.annotations import range as kprof_range
from kprof_core.renderers.terminal import print_text
from kprof_core.result import Profile


def pick_workload(backend: str | None, size: int) -> tuple[Backend, Any]:
    """The first available backend (or the one named) that offers a demo workload."""
    candidates = registry.usable([backend] if backend else None)
    if backend and not candidates:
        info = registry.get(backend).info()
        raise KprofError(
            f"backend {backend!r} is not available here: {info.status}"
            + (f" ({info.detail})" if info.detail else "")
        )
    for b in candidates:
        step = b.demo_workload(b, size)
        if step is not None:
            return b, step
    names = ", ".join(b.name for b in registry.all()) or "none installed"
    raise KprofError(
        "no available backend offers a demo workload (backends: " + names + "). "
        "Install the OpenCL CPU device, which works on any machine: pip install 'kprof[opencl]'"
    )


def run_demo(
    backend: str | None = None, steps: int = 10, size: int = 4 * 1024 * 1024, trace: bool = False
) -> Profile:
    if steps < 1 or size < 1:
        raise KprofError("--steps and --size must be positive")
    b, step = pick_workload(backend, size)
    step()  # warm up: the first launch of a kernel compiles it (PoCL: ~200 ms)
    with profile(trace=trace, backends=[b.name]) as p:
        for _ in range(steps):
            with kprof_range("step"):
                step()
    return p


def command(args: argparse.Namespace) -> int:
    p = run_demo(backend=args.backend, steps=args.steps, size=args.size, trace=args.print_trace)
    failed = write_outputs(p, args)  # files first: a reader that goes away must not cost them
    print_text(p.report())
    if args.tree:
        print_text("\n" + p.tree().report())
    return EXIT_NOT_WRITTEN if failed else 0


def add_parser(sub: Any) -> None:
    """Register ``kprof demo``."""
    d = sub.add_parser("demo", help="profile a reference workload on the first available backend")
    d.add_argument("--backend", help="the backend to run on (default: first available)")
    d.add_argument("--steps", type=int, default=10, help="steps (default 10)")
    d.add_argument("--size", type=int, default=4 * 1024 * 1024, help="elements (default 4M floats)")
    add_output_options(d)
    d.set_defaults(func=command)
