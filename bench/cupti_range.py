"""What an empty ``kprof.range`` costs with CUPTI on, against an empty NVTX range, against the
CUPTI test double.

One command, JSON out (the last line of stdout)::

    python bench/cupti_range.py [--quick] > cupti_range.json

It builds the double (tests/cupti_double) and runs, for each recorder path (compiled and
pure, each in a child process of its own), inside one profile whose CUDA backend records
through CUPTI (the double), with the ``nvtx`` package installed (``pip install kprof[nvtx]``)
and no tool collecting NVTX (so kprof mirrors nothing to it, and NVTX's calls are the
cheapest they get):

- ``nvtx``: N iterations of ``nvtx.push_range``/``pop_range`` in kprof's domain, the range a
  user writes by hand for Nsight Systems;
- ``kprof``: N iterations of ``with kprof.range(...): pass``, which records the range (with
  CUPTI on, no CUDA event: its device side is the work inside it, derived at the end);
- ``events``: the same ``kprof.range`` loop with CUPTI off (CUDA events time the range), on
  the fake CuPy whose events cost nothing: kprof's own work per range on that path.

Rounds alternate the loops (the machine is shared): the figure is the median over rounds of
(kprof − nvtx) per range, and of the ratio. No device work is launched: the ranges are empty.
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


def child(libdir: Path, quick: bool) -> dict[str, Any]:
    os.environ["KPROF_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    ctypes.CDLL(str(libdir / "libcuda.so.1"), mode=ctypes.RTLD_GLOBAL)
    ctypes.CDLL(glob.glob(str(libdir / "libcupti.so.*"))[0], mode=ctypes.RTLD_GLOBAL)
    sys.path.insert(0, str(ROOT / "tests"))
    import warnings

    import nvtx
    import test_cuda_fake as tcf

    import kprof
    from kprof_core.host.discovery import registry
    from kprof_cuda import nvtx as kprof_nvtx
    from kprof_cuda.plugin import CudaPlugin

    warnings.simplefilter("ignore")
    now = time.perf_counter_ns
    domain = kprof_nvtx.DOMAIN
    push, pop = nvtx.push_range, nvtx.pop_range

    def plugin(cupti: bool) -> Any:
        registry.reset()
        fake = tcf.FakeCuda(1)
        sys.modules[tcf.MODULE] = tcf.fake_cupy_module(fake)
        kw = {} if cupti else {"activity": lambda p: None}
        p = CudaPlugin(
            api=lambda: fake, module=tcf.MODULE, describe=tcf._available, nvtx=kprof_nvtx.load, **kw
        )
        kprof.register_backend(p, "cuda")
        return p

    def nvtx_loop(n: int) -> int:
        t = now()
        for _ in range(n):
            push(message="r", domain=domain)
            pop(domain=domain)
        return now() - t

    def range_loop(n: int) -> int:
        r = kprof.range
        t = now()
        for _ in range(n):
            with r("r"):
                pass
        return now() - t

    n = 5_000 if quick else 20_000
    rounds = 5 if quick else 15
    out: dict[str, Any] = {"n": n, "rounds": rounds}
    for cupti in (True, False):
        p = plugin(cupti)
        diffs, ratios, per = [], [], {"nvtx": [], "kprof": []}
        with kprof.profile() as prof:
            info = kprof.get_backend("cuda").info(refresh=True)
            range_loop(1000)  # warm: the stream's queue, the plan
            nvtx_loop(1000)
            for _ in range(rounds):
                a = nvtx_loop(n) / n
                b = range_loop(n) / n
                per["nvtx"].append(a)
                per["kprof"].append(b)
                diffs.append(b - a)
                ratios.append(b / a)
        key = "cupti" if cupti else "events"
        out[key] = {
            "capture": info.capture,
            "nvtx_us": round(statistics.median(per["nvtx"]) / 1e3, 3),
            "kprof_range_us": round(statistics.median(per["kprof"]) / 1e3, 3),
            "over_nvtx_us": round(statistics.median(diffs) / 1e3, 3),
            "over_nvtx_quartiles_us": [
                round(q / 1e3, 3) for q in statistics.quantiles(diffs, n=4)[::2]
            ],
            "ratio": round(statistics.median(ratios), 3),
            "events_created": p.stats().created,
            "device_ranges": len(prof.device_ranges),
            "ranges": len(prof.ranges),
        }
    return out


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    if "--child" in argv:
        print(json.dumps(child(Path(argv[argv.index("--child") + 1]), quick)))
        return 0
    sys.path.insert(0, str(ROOT / "tests" / "cupti_double"))
    import build  # the double's build script

    results: dict[str, Any] = {"command": "python bench/cupti_range.py" + (" --quick" * quick)}
    with tempfile.TemporaryDirectory() as tmp:
        libdir = Path(tmp)
        build.build(libdir)
        for path, pure in (("compiled", "0"), ("pure", "1")):
            # One BLAS thread: NumPy's (imported by the CUDA plugin) otherwise spin on a core.
            env = {**os.environ, "KPROF_PURE_PYTHON": pure, "OPENBLAS_NUM_THREADS": "1"}
            args = [sys.executable, __file__, "--child", str(libdir), *(["--quick"] * quick)]
            got = subprocess.run(args, capture_output=True, text=True, env=env, check=False)
            if got.returncode != 0:
                print(got.stderr, file=sys.stderr)
                return got.returncode
            results[path] = json.loads(got.stdout.strip().splitlines()[-1])
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
