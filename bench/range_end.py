"""The end of a profile of ranges around tiny kernels on PoCL, in two source trees, paired
(issue 28: a range's one entry, read in the launches' batch):

    python bench/range_end.py OLD_TREE NEW_TREE ROUNDS

Each round runs one fresh process per tree (the order flipped every other round); a process
records 5 profiles of 4,000 ``kprof.range`` blocks each around a tiny kernel (no harvest during
the loop), waits for the queue, then times the profile's end (harvest, resolve, placement) in
the launching thread's CPU time. Printed: the median ns per range in each tree and the median
(quartiles) of the per-round ratios new / old.
"""

from __future__ import annotations

import gc
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path


def child(tree: str) -> float:
    """In a process of its own: the median ns of the end per range, importing ``tree``."""
    sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
    sys.path.insert(0, tree)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from harness import opencl

    import kprof
    import kprof_opencl
    from kprof_core.recording.recorder import Recorder

    _cl, _ctx, q, _prg, tiny, _busy, _big, _np, buf = opencl()
    g = (64,)
    with kprof.profile(backends=["opencl"]):  # capture's first install
        tiny(q, g, None, buf)
    q.finish()
    Recorder.harvest_every = Recorder.max_pending = 10**9
    tt, n, out = time.thread_time_ns, 4000, []
    for _ in range(5):
        gc.collect()
        prof = kprof.profile(backends=["opencl"])
        with kprof_opencl.use_queue(q):
            p = prof.__enter__()
            for _ in range(n):
                with kprof.range("r"):
                    tiny(q, g, None, buf)
            q.finish()
            t0 = tt()
            prof.__exit__(None, None, None)
            t1 = tt()
        assert len(p.device_ranges) == n and len(p.ranges) == n
        out.append((t1 - t0) / n)
    return statistics.median(out)


def main() -> None:
    if sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2])))
        return
    trees = {"old": sys.argv[1], "new": sys.argv[2]}
    runs: dict[str, list[float]] = {"old": [], "new": []}
    for i in range(int(sys.argv[3])):
        for which in ("old", "new") if i % 2 == 0 else ("new", "old"):
            cmd = [sys.executable, __file__, "--child", trees[which]]
            done = subprocess.run(cmd, capture_output=True, text=True, check=True)
            runs[which].append(json.loads(done.stdout))
    ratios = [b / a for a, b in zip(runs["old"], runs["new"], strict=True)]
    q1, _, q3 = statistics.quantiles(ratios, n=4)
    print(
        f"the end per range, ns of thread CPU: old {statistics.median(runs['old']):.0f}, "
        f"new {statistics.median(runs['new']):.0f}; ratio new / old "
        f"{statistics.median(ratios):.3f} (quartiles {q1:.3f} to {q3:.3f})"
    )


if __name__ == "__main__":
    main()
