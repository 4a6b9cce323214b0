"""What timing every tiny launch from C costs in wall time, against the hand-written floor and
Intel's opencl-intercept-layer, at several profile lengths.

Every launch comes from C (tests/opencl_clib/clib.c, 64-work-item kernels on PoCL's CPU
device, a PyOpenCL queue with profiling on), never from Python. Variants, each in a fresh
worker process (this file re-invoked with ``--worker``) that warms up, then times one loop of
N launches with ``time.perf_counter_ns`` (process start-up and set-up not counted):

- ``plain``: ``kc_loop``: N launches with no event, then clFinish; unprofiled;
- ``events``: ``kc_loop_events``: the floor an application would write itself: an event per
  launch, START and END read after clFinish, each event released, all inside the timing;
- ``kprof``: ``kc_loop`` inside ``kprof.profile(backends=["opencl"])``, the whole block timed
  (the profile's end, where device times are read, included); then checked to hold N
  ``kc_tiny`` kernels and nothing unresolved;
- ``intercept``: ``kc_loop`` through Intel's layer (``bench/build_intercept.sh`` builds it):
  the C library opens the interceptor in place of the loader, with ``DevicePerformanceTiming``
  on; the layer reads each event's times at clFinish, inside the timing. Its report at exit
  (to stderr, outside the timing) is checked to count every launch. Skipped, saying why, when
  the build is absent.

The order of the variants is flipped every other round. Per length: the median ns per launch
of each, and the medians of ratios and differences paired within a round (variant / plain,
variant - plain, kprof / intercept, kprof / events). JSON on stdout; progress on stderr.

    bench/build_intercept.sh                # once: Intel's layer, into ~/.cache/kprof-bench
    python bench/bench_floor.py [--quick]   # or: python bench/run.py --only floor
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CLIB = ROOT / "tests" / "opencl_clib"

VARIANTS = ("plain", "events", "kprof", "intercept")
LENGTHS = (2000, 20000, 100000)
QUICK_LENGTHS = (2000, 20000)
ROUNDS, QUICK_ROUNDS = 21, 3
WARMUP = 200  # launches before the timed loop: kernel build, PoCL's threads, the hook's install

#: Where bench/build_intercept.sh puts Intel's interceptor.
INTERCEPT_DIR = Path(
    os.environ.get("KPROF_INTERCEPT_DIR") or Path.home() / ".cache" / "kprof-bench" / "intercept"
)


def intercept_env(real_loader: str) -> dict[str, str]:
    """The layer's controls (docs/controls.md), as its ``CLI_`` environment variables: device
    timing of every command, the real loader by absolute path (the layer's own soname is
    libOpenCL.so.1 too, so a bare name could open itself), and nothing written while it runs:
    no logging at all, no report file; the report goes to stderr once, at exit."""
    return {
        "CLI_DevicePerformanceTiming": "1",
        "CLI_OpenCLFileName": real_loader,
        "CLI_SuppressLogging": "1",
        "CLI_ReportToFile": "0",
        "CLI_ReportToStderr": "1",
    }


# -- worker: one variant, one timed loop, in a process of its own ---------------------------------


def worker(variant: str, n: int, so: str, loader_path: str) -> dict[str, Any]:
    import pyopencl as cl

    import kprof_opencl

    sys.path.insert(0, str(CLIB))
    from clib import CLib

    lib = CLib(Path(so), loader_path)
    dev = kprof_opencl.default_device()
    ctx = cl.Context([dev])
    q = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
    qp = q.int_ptr
    if variant == "events":
        lib.loop_events(qp, WARMUP)
        t0 = time.perf_counter_ns()
        lib.loop_events(qp, n)
        ns = time.perf_counter_ns() - t0
    elif variant == "kprof":
        import kprof

        lib.loop(qp, WARMUP)
        with kprof.profile(backends=["opencl"]):  # the hook's first install, untimed
            lib.loop(qp, WARMUP)
        t0 = time.perf_counter_ns()
        with kprof.profile(backends=["opencl"]) as p:
            lib.loop(qp, n)
        ns = time.perf_counter_ns() - t0
        names = [k.name for k in p.kernels]  # outside the timing: records built on demand
        assert len(names) == n and set(names) == {"kc_tiny"}, (len(names), set(names), n)
        assert not p.unresolved, p.unresolved[:3]
    else:  # plain, intercept: which loader the library opened is all that differs
        lib.loop(qp, WARMUP)
        t0 = time.perf_counter_ns()
        lib.loop(qp, n)
        ns = time.perf_counter_ns() - t0
    return {"variant": variant, "n": n, "ns": ns}


def run_worker(variant: str, n: int, so: Path, loader_path: str, env: dict[str, str]) -> float:
    """Wall ns per launch of one worker's timed loop."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", variant, str(n), str(so)]
    cmd.append(loader_path)
    got = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    if got.returncode != 0:
        raise RuntimeError(f"{variant} worker (n={n}) failed:\n{got.stderr[-3000:]}")
    out = json.loads(got.stdout.strip().splitlines()[-1])
    if variant == "intercept":
        # The layer's report at exit: kc_tiny's device-time count must be every launch.
        m = re.search(r"^\s*kc_tiny,\s*(\d+),", got.stderr, re.M)
        calls = int(m.group(1)) if m else None
        assert calls == WARMUP + n, f"intercept timed {calls} of {WARMUP + n}:\n{got.stderr}"
    return out["ns"] / n


# -- the parent: builds, alternates, pairs -------------------------------------------------------


def real_loader_path(name: str) -> str:
    """The absolute path of the loader ``name`` (a soname) opens to, from this process's maps."""
    import ctypes

    ctypes.CDLL(name)
    for line in Path("/proc/self/maps").read_text().splitlines():
        fields = line.split(maxsplit=5)  # address, perms, offset, dev, inode, path
        if len(fields) == 6 and Path(fields[5]).name.startswith("libOpenCL.so"):
            return fields[5]
    raise RuntimeError(f"cannot tell where {name} was loaded from")


def bench(quick: bool) -> dict[str, Any]:
    sys.path.insert(0, str(CLIB))
    from clib import build, loader

    so = build(Path(tempfile.mkdtemp(prefix="kprof-bench-floor-")))
    if so is None:
        return {"skipped": "no C compiler to build tests/opencl_clib/clib.c"}
    system_loader = loader()
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("CLI_")}
    interceptor = INTERCEPT_DIR / "lib" / "libOpenCL.so"
    variants = list(VARIANTS)
    intercept: dict[str, Any] = {"library": str(interceptor)}
    env = {v: base_env for v in variants}
    if interceptor.exists():
        controls = intercept_env(real_loader_path(system_loader))
        env["intercept"] = base_env | controls
        intercept["controls"] = controls
        commit = INTERCEPT_DIR / "commit"
        if commit.exists():
            intercept["commit"] = commit.read_text().strip()
    else:
        variants.remove("intercept")
        intercept["skipped"] = f"{interceptor} is absent: run bench/build_intercept.sh"
    lengths = QUICK_LENGTHS if quick else LENGTHS
    rounds = QUICK_ROUNDS if quick else ROUNDS
    runs: dict[tuple[int, str], list[float]] = {(n, v): [] for n in lengths for v in variants}
    load = [os.getloadavg()[0]]  # wall time on a shared machine: say how shared it was
    for r in range(rounds):
        print(f"floor: round {r + 1}/{rounds}", file=sys.stderr, flush=True)
        for n in lengths:
            for v in variants[::-1] if r % 2 else variants:
                path = str(interceptor) if v == "intercept" else system_loader
                runs[n, v].append(run_worker(v, n, so, path, env[v]))

    def paired(a: str, b: str, n: int, op: Any) -> float:
        return statistics.median(op(x, y) for x, y in zip(runs[n, a], runs[n, b]))

    def ratio(x: float, y: float) -> float:
        return x / y

    def minus(x: float, y: float) -> float:
        return x - y

    by_length: dict[str, Any] = {}
    for n in lengths:
        others = [v for v in variants if v != "plain"]
        row: dict[str, Any] = {
            "ns_per_launch": {v: statistics.median(runs[n, v]) for v in variants},
            "ratio_to_plain": {v: paired(v, "plain", n, ratio) for v in others},
            "added_ns": {v: paired(v, "plain", n, minus) for v in others},
            "kprof/events": paired("kprof", "events", n, ratio),
        }
        if "intercept" in variants:
            row["kprof/intercept"] = paired("kprof", "intercept", n, ratio)
        by_length[str(n)] = row
    load.append(os.getloadavg()[0])
    print_table(by_length, variants)
    return {
        "wall": "ns per launch, the timed loop of a fresh process (start-up not counted)",
        "rounds": rounds,
        "warmup_launches": WARMUP,
        "load_average_1min": {"start": load[0], "end": load[1]},
        "intercept": intercept,
        "by_length": by_length,
    }


def print_table(by_length: dict[str, Any], variants: list[str]) -> None:
    """A markdown table of the figures, to stderr (the JSON goes to stdout)."""
    head = [f"{v} ns" for v in variants]
    head += [f"{v}/plain" for v in variants[1:]] + ["kprof/events"]
    head += ["kprof/intercept"] if "intercept" in variants else []
    lines = ["| launches | " + " | ".join(head) + " |", "|---" * (len(head) + 1) + "|"]
    for n, row in by_length.items():
        cells = [f"{row['ns_per_launch'][v]:.0f}" for v in variants]
        cells += [f"{row['ratio_to_plain'][v]:.2f}" for v in variants[1:]]
        cells += [f"{row['kprof/events']:.2f}"]
        cells += [f"{row['kprof/intercept']:.2f}"] if "intercept" in variants else []
        lines.append(f"| {int(n):,} | " + " | ".join(cells) + " |")
    print("\n".join(lines), file=sys.stderr, flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        variant, n, so, loader_path = sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
        print(json.dumps(worker(variant, n, so, loader_path)), flush=True)
    else:
        print(json.dumps(bench("--quick" in sys.argv), indent=2))
