"""Benchmark ``perfetto`` (``python bench/run.py --only perfetto``): Perfetto's native format
against the Chrome JSON trace of the same profile.

A profile of a million launches (100,000 with ``--quick``) is built directly in the tables, as
the recorder leaves them (deterministic, no device: the writers' cost is what is measured): one
thread and one queue, a launch every 3 µs whose kernel runs 500 ns later for 2 µs, a ``step``
range around every 10 launches. Written three ways, alternated, each to a file: the Chrome
trace, the Perfetto trace with the compiled encoder, and with the Python one. Figures: bytes
per launch of each, and per round the ratio of the two writers' times (median over rounds);
the bytes again with launch sites (1,000 lines) and with 8-frame stacks.
"""

from __future__ import annotations

import gc
import statistics
import time
from array import array
from typing import Any

from harness import HERE


def build(n: int, sites: bool = False, stacks: bool = False) -> Any:
    from kprof_core.data.records import KERNEL, PLACED, HostTable, QueueRecord, ThreadRecord
    from kprof_core.data.sites import Site
    from kprof_core.result import Profile

    p = Profile()
    p.meta = {"host": "bench", "pid": 1}
    p.names = ["step", "gemm", "softmax", "layernorm"]
    p.queues = [QueueRecord("testdev", "dev 0", "queue 1", "testdev:0")]
    p.threads = [ThreadRecord(1, "MainThread")]
    n_sites = 1000 if sites or stacks else 0
    if n_sites:
        p.sites = sorted(
            Site(
                f"/home/user/project/model/layer_{k // 10:03d}.py", 40 + k % 10, f"forward_{k % 7}"
            )
            for k in range(n_sites)
        )
    if stacks:  # 8 frames: 7 of the training loop's and the launch's own line
        outer = [Site("/home/user/project/train.py", 10 + k, f"outer_{k}") for k in range(7)]
        p.stacks = tuple((*outer, s) for s in p.sites)
    t0 = now = 1_000_000_000
    p.start_ns = t0
    for i in range(n):
        site = i % n_sites if n_sites else -1
        if i % 10 == 0:
            p.host.append(0, HostTable.RANGE, 0, now, now + 10 * 3000 - 500, site)
        p.table.append(1 + i % 3, KERNEL, 0, 0, now, now + 1000, now + 1500, 2000, -1, PLACED, site)
        now += 3000
    if stacks:
        p.table.stack = array("q", p.table.site)
        p.host.stack = array("q", p.host.site)
    p.end_ns = now + 5000
    return p


def bench(quick: bool) -> dict[str, Any]:
    from kprof_core.low_level import protowire

    n = 100_000 if quick else 1_000_000
    rounds = 1 if quick else 3
    p = build(n)
    out = {k: HERE / f"perfetto_bench.{k}" for k in ("json", "compiled", "pure")}
    compiled = protowire.encoder()
    writers = {
        "json": lambda: p.export_chrome_trace(out["json"]),
        "compiled": lambda: _with(compiled, lambda: p.export_perfetto(out["compiled"])),
        "pure": lambda: _with(protowire, lambda: p.export_perfetto(out["pure"])),
    }
    if compiled is protowire:
        del writers["compiled"]
    times: dict[str, list[float]] = {k: [] for k in writers}
    for _ in range(rounds):
        for k, write in writers.items():
            gc.collect()
            t = time.perf_counter()
            write()
            times[k].append(time.perf_counter() - t)
    size = {k: out[k].stat().st_size for k in writers}
    result: dict[str, Any] = {
        "launches": n,
        "rounds": rounds,
        "encoder": compiled.__name__,
        "seconds": {k: statistics.median(v) for k, v in times.items()},
        "bytes_per_launch": {k: v / n for k, v in size.items()},
    }
    if "compiled" in times:
        result["json_over_compiled"] = statistics.median(
            j / c for j, c in zip(times["json"], times["compiled"])
        )
    result["pure_over_json"] = statistics.median(
        q / j for q, j in zip(times["pure"], times["json"])
    )
    if "compiled" in size:
        assert out["compiled"].read_bytes() == out["pure"].read_bytes()
    for k in out.values():
        k.unlink(missing_ok=True)
    # Bytes with sites and with stacks (one write each: sizes do not vary).
    for label, kw in (("sites", {"sites": True}), ("stacks", {"stacks": True})):
        q = build(n, **kw)
        path = HERE / f"perfetto_bench_{label}.pftrace"
        q.export_perfetto(path)
        result[f"bytes_per_launch_{label}"] = path.stat().st_size / n
        path.unlink()
    return result


def _with(encoder: Any, fn: Any) -> Any:
    """``fn()`` with ``protowire.encoder()`` answering ``encoder``."""
    from kprof_core.low_level import protowire

    saved = protowire.encoder
    protowire.encoder = lambda: encoder
    try:
        return fn()
    finally:
        protowire.encoder = saved


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(bench("--quick" in sys.argv), indent=2))
