"""The cost per launch of CUPTI's launch sites (the callback API's entry callback), against the
CUPTI test double: the launching thread's CPU time per simulated launch, with a profile that
keeps no sites, one that keeps sites, and one that keeps stacks (depth 32), in interleaved
rounds; the figure is the median over rounds of the paired differences and ratios.

One command, JSON out (the last line of stdout)::

    flock /work/bench.lock python bench/cupti_sites.py [--quick]

Each reader (compiled ``kprof_cuda._cupti``, pure Python) runs in a child process of its own
(CUPTI takes one reader per process). A launch is ``cuptidouble_launch`` through ctypes, which
releases the GIL as CuPy does, calls kprof's subscriber at the call's entry (when a sites
profile enabled it), and writes the launch's CUPTI records. CPU time: ``time.thread_time_ns``
of the launching thread (the machine is shared; wall time would measure the neighbours).
"""

from __future__ import annotations

import ctypes
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MODES = ("off", "sites", "stacks")


def child(libdir: Path, quick: bool) -> dict[str, Any]:
    os.environ["KPROF_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    ctypes.CDLL(str(libdir / "libcuda.so.1"), mode=ctypes.RTLD_GLOBAL)
    lib = ctypes.CDLL(glob.glob(str(libdir / "libcupti.so.*"))[0], mode=ctypes.RTLD_GLOBAL)
    sys.path.insert(0, str(ROOT / "tests"))
    import warnings

    import test_cuda_fake as tcf

    import kprof
    from kprof_core.host.discovery import registry
    from kprof_cuda import activity
    from kprof_cuda.plugin import CudaPlugin

    warnings.simplefilter("ignore")
    lib.cuptidouble_launch.restype = ctypes.c_uint32
    lib.cuptidouble_launch.argtypes = [ctypes.c_char_p, ctypes.c_uint32, ctypes.c_uint64]
    lib.cuptidouble_launch.argtypes.append(ctypes.c_void_p)
    launch = lib.cuptidouble_launch
    name = b"_Z6kernelPfi"

    registry.reset()
    fake = tcf.FakeCuda(1)
    sys.modules[tcf.MODULE] = tcf.fake_cupy_module(fake)
    kprof.register_backend(
        CudaPlugin(api=lambda: fake, module=tcf.MODULE, describe=tcf._available, nvtx=lambda: None),
        "cuda",
    )

    def loop(n: int) -> int:
        t0 = time.thread_time_ns()
        for _ in range(n):
            launch(name, 13, 5000, None)
        return time.thread_time_ns() - t0

    def nested(n: int, depth: int) -> int:  # a few user frames above the launch loop
        return loop(n) if depth == 0 else nested(n, depth - 1)

    def profile(mode: str) -> Any:
        if mode == "off":
            return kprof.profile(backends=["cuda"])
        if mode == "sites":
            return kprof.profile(backends=["cuda"], sites=True)
        return kprof.profile(backends=["cuda"], stacks=True)

    n = 5_000 if quick else 20_000
    rounds = 5 if quick else 11
    per: dict[str, list[float]] = {m: [] for m in MODES}
    with_sites: dict[str, int] = {}
    for mode in MODES:  # warm: each mode once
        with profile(mode):
            nested(1000, 5)
    for r in range(rounds):
        order = MODES if r % 2 == 0 else MODES[::-1]
        for mode in order:
            with profile(mode) as p:
                ns = nested(n, 5)
            per[mode].append(ns / n)
            assert len(p.kernels) == n, (mode, len(p.kernels))
            with_sites[mode] = sum(1 for i in range(len(p.table)) if p.table.site[i] >= 0)
    out: dict[str, Any] = {
        "reader": "compiled" if activity._reader.compiled else "pure Python",
        "launches_per_round": n,
        "rounds": rounds,
        "rows_with_a_site": with_sites,
        "callback_stats": dict(activity._reader.callback_stats()),
    }
    for mode in MODES:
        out[f"{mode}_ns_per_launch_median"] = round(statistics.median(per[mode]), 1)
    for mode in ("sites", "stacks"):
        diffs = [a - b for a, b in zip(per[mode], per["off"])]
        ratios = [a / b for a, b in zip(per[mode], per["off"])]
        out[f"{mode}_minus_off_ns_median"] = round(statistics.median(diffs), 1)
        out[f"{mode}_over_off_ratio_median"] = round(statistics.median(ratios), 3)
    return out


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    if "--child" in argv:
        libdir = Path(argv[argv.index("--child") + 1])
        print(json.dumps(child(libdir, quick)))
        return 0
    sys.path.insert(0, str(ROOT / "tests" / "cupti_double"))
    import build

    libdir = Path(tempfile.mkdtemp(prefix="kprof-cupti-sites-"))
    build.build(libdir)
    results: dict[str, Any] = {
        "command": "python bench/cupti_sites.py" + (" --quick" if quick else ""),
        "note": "against the CUPTI test double, no GPU; launching thread's CPU time, "
        "interleaved paired rounds",
        "loadavg": os.getloadavg(),
    }
    for label, env in (("compiled", {}), ("pure", {"KPROF_PURE_PYTHON": "1"})):
        e = {k: v for k, v in os.environ.items() if not k.startswith("KPROF_")}
        e.update(env)
        cmd = [sys.executable, __file__, "--child", str(libdir)] + (["--quick"] if quick else [])
        proc = subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=1800)
        if proc.returncode != 0:
            results[label] = {"error": proc.stderr[-2000:]}
            continue
        results[label] = json.loads(proc.stdout.strip().splitlines()[-1])
    results["loadavg_after"] = os.getloadavg()
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
