"""A training loop's launches under kprof's CUPTI reader, against the CUPTI test double.

One command, JSON out (the last line of stdout)::

    python bench/cupti_loop.py [--quick] > cupti_loop.json

It builds the double (tests/cupti_double), then runs, for each reader (the compiled
``kprof_cuda._cupti`` and the pure-Python one, each in a child process of its own: CUPTI takes
one reader per process):

- ``loop``: W µs of Python work (W = 2, 7, 20, 100) plus one simulated launch per iteration.
  The work is a fixed count of loop steps, calibrated once to take W µs unprofiled, not a spin
  until a deadline: time the launching thread loses to kprof's threads (the GIL) during the
  work then shows in the iteration's time, as it would in a real program. Each launch is
  ``cuptidouble_launch`` through ctypes, which releases the GIL, writes the launch's CUPTI
  records and a kernel record of 5 to 10 µs on the device clock. Profile off and on are
  measured in alternating rounds (the machine is shared: paired rounds, the median of the
  per-round ratios is the figure). Per configuration: per-iteration mean, p99 and max,
  iterations over 1 ms and over 5 ms, the launching thread's GIL wait (its clock after ctypes
  returned minus the double's at return), buffers decoded during the loop and in all,
  records dropped, and the end of the profile (flush, take, rows).
- ``sustained``: 600,000 launches at the fastest rate (W = 0) in one profile: drops, memory
  growth (resident memory at the loop's end and with the profile kept), the end of the
  profile.
- ``buffer_to_row``: launches written into one 128 MiB buffer and read at the profile's end:
  host CPU (all threads) and wall time from a completed buffer to rows in kprof's tables, per
  kernel.
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
WORK_US = (2, 7, 20, 100)


def rss_mb() -> float:
    """The process's resident memory now, in MiB."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


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
    u64 = ctypes.c_uint64
    lib.cuptidouble_launch.restype = ctypes.c_uint32
    lib.cuptidouble_launch.argtypes = [ctypes.c_char_p, ctypes.c_uint32, u64, ctypes.c_void_p]
    launch = lib.cuptidouble_launch
    exit_ns = u64(0)
    exit_ref = ctypes.addressof(exit_ns)
    name = b"_Z6kernelPfi"
    now = time.perf_counter_ns

    registry.reset()
    fake = tcf.FakeCuda(1)
    sys.modules[tcf.MODULE] = tcf.fake_cupy_module(fake)
    kprof.register_backend(
        CudaPlugin(api=lambda: fake, module=tcf.MODULE, describe=tcf._available, nvtx=lambda: None),
        "cuda",
    )

    def steps_for(work_ns: int) -> int:
        """How many empty loop steps take ``work_ns`` here, unprofiled (the fastest of a few
        timings: the work's own cost, without what else the machine did meanwhile)."""
        k = 100_000
        best = min(_timed(k) for _ in range(7))
        return max(1, round(work_ns * k / best))

    def _timed(k: int) -> int:
        t = now()
        for _ in range(k):
            pass
        return now() - t

    def loop(n: int, steps: int) -> tuple[list[int], list[int]]:
        """n iterations: a fixed amount of Python work (``steps`` loop steps), then one
        launch."""
        times = [0] * n
        gil = [0] * n
        t_prev = now()
        for i in range(n):
            for _ in range(steps):
                pass
            launch(name, 13, 5000 + (i % 6) * 1000, exit_ref)
            t = now()
            gil[i] = t - exit_ns.value
            times[i] = t - t_prev
            t_prev = t
        return times, gil

    def stats_of(times: list[int], gil: list[int]) -> dict[str, float]:
        s = sorted(times)
        return {
            "mean_us": round(statistics.fmean(times) / 1e3, 3),
            "p99_us": round(s[int(len(s) * 0.99)] / 1e3, 2),
            "max_us": round(s[-1] / 1e3, 1),
            "over_1ms": sum(t > 1_000_000 for t in times),
            "over_5ms": sum(t > 5_000_000 for t in times),
            "gil_wait_mean_us": round(statistics.fmean(gil) / 1e3, 3),
        }

    def reader_stats() -> dict[str, int]:
        r = activity._reader
        return {} if r is None else dict(r.stats())

    out: dict[str, Any] = {"reader": None, "loop": {}, "machine": os.uname().nodename}
    rounds = 3 if quick else 5
    for w in WORK_US:
        n = max(2000, min(100_000, int(0.4e6 / (w + 3)))) // (4 if quick else 1)
        steps = steps_for(w * 1000)
        loop(min(n, 2000), steps)  # warm
        ratios, offs, ons = [], [], []
        for _ in range(rounds):
            t_off, g_off = loop(n, steps)
            before = reader_stats()
            with kprof.profile() as p:
                t_on, g_on = loop(n, steps)
                during = reader_stats()
                t_end = now()
            end_ms = (now() - t_end) / 1e6
            after = reader_stats()
            assert len(p.kernels) == n or p.dropped, (len(p.kernels), n)
            so, sn = stats_of(t_off, g_off), stats_of(t_on, g_on)
            sn["buffers_decoded_during_loop"] = during.get("decoded", 0) - before.get("decoded", 0)
            sn["buffers_in_all"] = after.get("buffers", 0) - before.get("buffers", 0)
            sn["records_dropped"] = sum(v[0] for v in p.dropped.values())
            sn["end_of_profile_ms"] = round(end_ms, 2)
            sn["rows"] = len(p.kernels)
            ratios.append(sn["mean_us"] / so["mean_us"])
            offs.append(so)
            ons.append(sn)
        med = sorted(range(rounds), key=lambda i: ratios[i])[rounds // 2]
        out["loop"][f"W={w}us"] = {
            "iterations": n,
            "work_steps": steps,
            "rounds": rounds,
            "ratio_on_off_median": round(statistics.median(ratios), 3),
            "ratios": [round(r, 3) for r in ratios],
            "off": offs[med],
            "on": ons[med],
        }
    out["reader"] = "compiled" if activity._reader.compiled else "pure Python"

    # Sustained: 600k launches as fast as the loop goes.
    n = 600_000 // (4 if quick else 1)
    rss0 = rss_mb()
    before = reader_stats()
    t_start = now()
    with kprof.profile() as p:
        for i in range(n):
            launch(name, 13, 5000 + (i % 6) * 1000, None)
        t_loop = now()
        during = reader_stats()
        rss_loop = rss_mb()
    t_end = now()
    after = reader_stats()
    out["sustained"] = {
        "launches": n,
        "loop_s": round((t_loop - t_start) / 1e9, 2),
        "rows": len(p.kernels),
        "records_dropped": sum(v[0] for v in p.dropped.values()),
        "buffers_decoded_during_loop": during.get("decoded", 0) - before.get("decoded", 0),
        "buffers_in_all": after.get("buffers", 0) - before.get("buffers", 0),
        "end_of_profile_s": round((t_end - t_loop) / 1e9, 3),
        "rss_growth_at_loop_end_mb": round(rss_loop - rss0, 1),
        "rss_growth_with_the_profile_mb": round(rss_mb() - rss0, 1),
        "bytes_per_row_kept": round((rss_mb() - rss0) * 2**20 / max(1, len(p.kernels))),
    }
    # Completed buffer -> rows: everything in one buffer, read at the end.
    activity.BUFFER_SIZE = 1 << 27
    n = 100_000 // (4 if quick else 1)
    costs, cpu = [], []
    for _ in range(3):
        with kprof.profile() as p:
            for _i in range(n):
                launch(name, 13, 5000, None)
            t0 = now()
            c0 = time.process_time()
        # Wall time, and CPU time of every thread of the process (the machine is shared:
        # wall time includes waiting for a core).
        costs.append((now() - t0) / n / 1e3)
        cpu.append((time.process_time() - c0) / n * 1e6)
        assert len(p.kernels) == n
    out["buffer_to_row"] = {
        "launches": n,
        "records_per_launch": 3,
        "wall_us_per_kernel_median": round(statistics.median(costs), 3),
        "wall_us_per_kernel": [round(c, 3) for c in costs],
        "cpu_us_per_kernel_median": round(statistics.median(cpu), 3),
        "cpu_us_per_kernel": [round(c, 3) for c in cpu],
    }
    activity.BUFFER_SIZE = 1 << 20

    return out


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    if "--child" in argv:
        libdir = Path(argv[argv.index("--child") + 1])
        print(json.dumps(child(libdir, quick)))
        return 0
    sys.path.insert(0, str(ROOT / "tests" / "cupti_double"))
    import build

    libdir = Path(tempfile.mkdtemp(prefix="kprof-cupti-bench-"))
    build.build(libdir)
    results: dict[str, Any] = {
        "command": "python bench/cupti_loop.py" + (" --quick" if quick else ""),
        "note": "against the CUPTI test double, no GPU; shared machine: off/on paired rounds",
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
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
