"""What timing every tiny launch costs in wall time, against the hand-written floor and
Intel's opencl-intercept-layer, at several profile lengths, for launches from C and from Python.

64-work-item kernels on PoCL's CPU device, a PyOpenCL queue with profiling on. Each variant
runs in a fresh worker process (this file re-invoked with ``--worker``) that warms up, then
times one loop of N launches with ``time.perf_counter_ns`` (process start-up and set-up not
counted).

Launches from C (tests/opencl_clib/clib.c), never from Python:

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

Launches from Python, through PyOpenCL's typed invoker (``knl(q, (64,), None, buf)``, scalar
argument dtypes set, as bench_hook.py's loop), then ``q.finish()``:

- ``py_plain``: N launches, their events dropped; unprofiled;
- ``py_events``: the floor a user would write: every returned event kept in a list, then after
  ``q.finish()`` START and END read with ``get_profiling_info`` (``ev.profile.start`` costs
  about 1 µs more per event: a Python getter object per read), then the list dropped (each
  event released), all inside the timing;
- ``py_kprof``: the py_plain loop inside ``kprof.profile(backends=["opencl"])``, the whole
  block timed; then checked to hold N ``tiny`` kernels and nothing unresolved;
- ``py_intercept``: the py_plain loop through Intel's layer. PyOpenCL's ``_cl`` extension
  binds the OpenCL entry points at load time to the loader it is linked to (the wheel's own
  ocl-icd, ``pyopencl/.libs/libOpenCL-<hash>.so``), so the worker starts with the layer in
  ``LD_PRELOAD``: its ``cl*`` symbols (versioned ``OPENCL_1.0``... like the loader's) come
  first and PyOpenCL's calls bind to them; ``CLI_OpenCLFileName`` names PyOpenCL's loader by
  path. The wheel's loader has no RPATH: it finds the bundled PoCL ICD (a bare
  ``libpocl-<hash>.so`` in its ``pocl.icd``) through the RPATH of ``_cl`` (``$ORIGIN/.libs``),
  which loaded it. Opened by the layer instead, it cannot, and no platform is found, so the
  worker also gets that folder in ``LD_LIBRARY_PATH``. The layer's report is checked as for
  ``intercept``: ``tiny`` counted at every launch, warm-up included.

The order of the variants is flipped every other round. Per length and per family: the median
ns per launch of each, and the medians of ratios and differences paired within a round
(variant / plain, variant - plain, kprof / intercept, kprof / events; for Python, plain is
py_plain and so on). JSON on stdout (C in ``by_length``, Python in ``python_by_length``); a
table of both on stderr, with the progress.

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
PY_VARIANTS = ("py_plain", "py_events", "py_kprof", "py_intercept")
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


def py_worker(variant: str, n: int) -> dict[str, Any]:
    """One Python-launch variant: the same kernel, queue and warm-up for each."""
    os.environ.pop("LD_PRELOAD", None)  # py_intercept: in this process only, not its children
    import pyopencl as cl

    import kprof_opencl

    dev = kprof_opencl.default_device()
    ctx = cl.Context([dev])
    q = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
    prg = cl.Program(ctx, "__kernel void tiny(__global float *x) { x[get_global_id(0)] += 1; }")
    knl = prg.build().tiny
    knl.set_scalar_arg_dtypes([None])
    buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 64 * 4)
    gsize = (64,)

    def loop(m: int) -> None:
        for _ in range(m):
            knl(q, gsize, None, buf)
        q.finish()

    def loop_events(m: int) -> list[tuple[int, int]]:
        start, end = cl.profiling_info.START, cl.profiling_info.END
        evs = []
        for _ in range(m):
            evs.append(knl(q, gsize, None, buf))
        q.finish()
        times = [(ev.get_profiling_info(start), ev.get_profiling_info(end)) for ev in evs]
        del evs  # every event released, inside the timing
        return times

    if variant == "py_events":
        loop_events(WARMUP)
        t0 = time.perf_counter_ns()
        times = loop_events(n)
        ns = time.perf_counter_ns() - t0
        assert len(times) == n and all(e >= s > 0 for s, e in times[:10])
    elif variant == "py_kprof":
        import kprof

        loop(WARMUP)
        with kprof.profile(backends=["opencl"]):  # the hook's first install, untimed
            loop(WARMUP)
        t0 = time.perf_counter_ns()
        with kprof.profile(backends=["opencl"]) as p:
            loop(n)
        ns = time.perf_counter_ns() - t0
        names = [k.name for k in p.kernels]  # outside the timing: records built on demand
        assert len(names) == n and set(names) == {"tiny"}, (len(names), set(names), n)
        assert not p.unresolved, p.unresolved[:3]
    else:  # py_plain, py_intercept: whether the layer is preloaded is all that differs
        loop(WARMUP)
        t0 = time.perf_counter_ns()
        loop(n)
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
    if variant in ("intercept", "py_intercept"):
        # The layer's report at exit: the kernel's device-time count must be every launch.
        kernel = "kc_tiny" if variant == "intercept" else "tiny"
        found = re.findall(rf"^\s*{kernel},\s*(\d+),", got.stderr, re.M)
        calls = int(found[0]) if len(found) == 1 else found
        assert calls == WARMUP + n, f"{variant} timed {calls} of {WARMUP + n}:\n{got.stderr}"
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


def pyopencl_loader() -> str:
    """The absolute path of the OpenCL loader PyOpenCL's ``_cl`` extension is linked to (the
    wheel bundles its own), from the maps of a fresh interpreter that imports only that."""
    code = (
        "import pyopencl._cl, pathlib\n"
        "maps = pathlib.Path('/proc/self/maps').read_text().splitlines()\n"
        "paths = {f[5] for f in (l.split(maxsplit=5) for l in maps) if len(f) == 6}\n"
        "print('\\n'.join(p for p in paths if pathlib.Path(p).name.startswith('libOpenCL')))"
    )
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    found = got.stdout.split()
    if len(found) != 1:
        raise RuntimeError(f"cannot tell which loader PyOpenCL uses: {found}\n{got.stderr}")
    return found[0]


def bench(quick: bool) -> dict[str, Any]:
    sys.path.insert(0, str(CLIB))
    from clib import build, loader

    so = build(Path(tempfile.mkdtemp(prefix="kprof-bench-floor-")))
    if so is None:
        return {"skipped": "no C compiler to build tests/opencl_clib/clib.c"}
    system_loader = loader()
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("CLI_")}
    interceptor = INTERCEPT_DIR / "lib" / "libOpenCL.so"
    variants = list(VARIANTS + PY_VARIANTS)
    intercept: dict[str, Any] = {"library": str(interceptor)}
    env = {v: base_env for v in variants}
    if interceptor.exists():
        controls = intercept_env(real_loader_path(system_loader))
        env["intercept"] = base_env | controls
        intercept["controls"] = controls
        # Python: the layer preloaded ahead of PyOpenCL's own loader (see the docstring).
        try:
            py_loader = pyopencl_loader()
        except RuntimeError as exc:  # no loader mapped (OpenCL linked in): nothing to preload over
            variants.remove("py_intercept")
            intercept["python_skipped"] = str(exc)
        else:
            paths = [str(Path(py_loader).parent), base_env.get("LD_LIBRARY_PATH", "")]
            preload = [str(interceptor), base_env.get("LD_PRELOAD", "")]
            py_controls = intercept_env(py_loader) | {
                "LD_PRELOAD": " ".join(p for p in preload if p),
                "LD_LIBRARY_PATH": ":".join(p for p in paths if p),
            }
            env["py_intercept"] = base_env | py_controls
            intercept["python_controls"] = py_controls
        commit = INTERCEPT_DIR / "commit"
        if commit.exists():
            intercept["commit"] = commit.read_text().strip()
    else:
        variants.remove("intercept")
        variants.remove("py_intercept")
        intercept["skipped"] = f"{interceptor} is absent: run bench/build_intercept.sh"
    lengths = QUICK_LENGTHS if quick else LENGTHS
    rounds = QUICK_ROUNDS if quick else ROUNDS
    runs: dict[tuple[int, str], list[float]] = {(n, v): [] for n in lengths for v in variants}
    load = [os.getloadavg()[0]]  # wall time on a shared machine: say how shared it was
    for r in range(rounds):
        print(f"floor: round {r + 1}/{rounds}", file=sys.stderr, flush=True)
        for n in lengths:
            for v in variants[::-1] if r % 2 else variants:
                if v.startswith("py_"):
                    so_arg, path = "-", "-"  # PyOpenCL alone: no C library, no loader to open
                else:
                    so_arg, path = str(so), str(interceptor) if v == "intercept" else system_loader
                runs[n, v].append(run_worker(v, n, Path(so_arg), path, env[v]))

    def paired(a: str, b: str, n: int, op: Any) -> float:
        return statistics.median(op(x, y) for x, y in zip(runs[n, a], runs[n, b]))

    def ratio(x: float, y: float) -> float:
        return x / y

    def minus(x: float, y: float) -> float:
        return x - y

    def figures(family: list[str], prefix: str) -> dict[str, Any]:
        """One family's figures per length; ``prefix`` names its variants (``py_kprof``)."""
        plain, kprof, events, icept = (
            prefix + v for v in ("plain", "kprof", "events", "intercept")
        )
        others = [v for v in family if v != plain]
        out: dict[str, Any] = {}
        for n in lengths:
            row: dict[str, Any] = {
                "ns_per_launch": {v: statistics.median(runs[n, v]) for v in family},
                "ratio_to_plain": {v: paired(v, plain, n, ratio) for v in others},
                "added_ns": {v: paired(v, plain, n, minus) for v in others},
                "kprof/events": paired(kprof, events, n, ratio),
            }
            if icept in family:
                row["kprof/intercept"] = paired(kprof, icept, n, ratio)
            out[str(n)] = row
        return out

    c_family = [v for v in variants if not v.startswith("py_")]
    py_family = [v for v in variants if v.startswith("py_")]
    by_length = figures(c_family, "")
    python_by_length = figures(py_family, "py_")
    load.append(os.getloadavg()[0])
    print_table({"C": by_length, "Python": python_by_length})
    print(f"load average (1 min): {load[0]:.2f} at start, {load[1]:.2f} at end", file=sys.stderr)
    return {
        "wall": "ns per launch, the timed loop of a fresh process (start-up not counted)",
        "rounds": rounds,
        "warmup_launches": WARMUP,
        "load_average_1min": {"start": load[0], "end": load[1]},
        "intercept": intercept,
        "by_length": by_length,
        "python_by_length": python_by_length,
    }


def print_table(families: dict[str, dict[str, Any]]) -> None:
    """A markdown table of both families' figures, to stderr (the JSON goes to stdout). Columns
    are named as for C; in a Python row, plain is py_plain and so on; "-" where skipped."""
    base = ["plain", "events", "kprof", "intercept"]
    head = [f"{v} ns" for v in base] + [f"{v}/plain" for v in base[1:]]
    head += ["kprof +ns", "kprof/events", "kprof/intercept"]
    lines = ["| from | launches | " + " | ".join(head) + " |", "|---" * (len(head) + 2) + "|"]
    for family, by_length in families.items():
        prefix = "py_" if family == "Python" else ""
        for n, row in by_length.items():
            cells = [_cell(row["ns_per_launch"], prefix + v, ".0f") for v in base]
            cells += [_cell(row["ratio_to_plain"], prefix + v, ".2f") for v in base[1:]]
            cells += [_cell(row["added_ns"], prefix + "kprof", ".0f")]
            cells += [_cell(row, k, ".2f") for k in ("kprof/events", "kprof/intercept")]
            lines.append(f"| {family} | {int(n):,} | " + " | ".join(cells) + " |")
    print("\n".join(lines), file=sys.stderr, flush=True)


def _cell(figures: dict[str, float], key: str, fmt: str) -> str:
    return format(figures[key], fmt) if key in figures else "-"


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        variant, n, so, loader_path = sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
        if variant.startswith("py_"):
            print(json.dumps(py_worker(variant, n)), flush=True)
        else:
            print(json.dumps(worker(variant, n, so, loader_path)), flush=True)
    else:
        print(json.dumps(bench("--quick" in sys.argv), indent=2))
