"""Before and after a refactor: the recorder's own cost in two source trees, paired.

    python bench/compare_trees.py OLD_TREE NEW_TREE [--rounds 40]

For example, a worktree of the commit before a change against this checkout::

    git worktree add --detach /tmp/old <commit>
    cp kprof_core/low_level/*.so /tmp/old/kprof_core/low_level/   # if the C sources are equal
    python bench/compare_trees.py /tmp/old .

Each round runs one fresh process per tree (the order flipped every other round), importing
kprof from that tree only. A process times, in CPU time of its own thread (so that waiting for
a core on a shared machine is not counted), a launch (``rec.launch``, tokens given), an empty
``kprof.range`` and a ``kprof.mark`` inside a profile, on both recorder paths, against a backend
that does nothing (no device, no harvest during the loop). Printed: each figure's median in
each tree, and the median (and quartiles) of the per-round ratios new / old. Nothing of PoCL
runs: this isolates kprof's Python and C, not the launch it wraps (``bench/run.py`` does that).
The compiled parts must be built in each tree (or copied, where the C sources are the same).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

N = 20000


def child(tree: str) -> dict[str, float]:
    """In a process of its own: the figures of one tree, in ns of thread CPU time per call."""
    # Only this tree's packages: an editable install's finder would import another checkout's.
    sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
    sys.path.insert(0, tree)
    import kprof
    import kprof_core
    from kprof_core.low_level import native
    from kprof_core.recording.recorder import Recorder

    if not Path(kprof_core.__file__).resolve().is_relative_to(Path(tree).resolve()):
        raise SystemExit(f"kprof_core came from {kprof_core.__file__}, not from {tree}")

    class Null:
        """Timestamps that are never read: the loop only records."""

        @kprof.plugin.hookimpl
        def current_queue(self, backend: Any) -> Any:
            return None

        @kprof.plugin.hookimpl
        def record_timestamp(self, backend: Any) -> Any:
            return None

        @kprof.plugin.hookimpl
        def elapsed_time(self, backend: Any, start: Any, stop: Any) -> int:
            return 0

    backend = kprof.register_backend(Null(), "compare_trees_null")
    Recorder.harvest_every = Recorder.max_pending = 10**9  # no harvest inside the loops
    tt = time.thread_time_ns
    kernel = kprof.plugin.KERNEL
    queue = object()
    out: dict[str, float] = {}
    # Each path twice; the second pass is kept (the first warms caches and allocators).
    for label, compiled in (("compiled", True), ("pure", False)) * 2:
        native.use_compiled(compiled)
        with kprof.profile(backends=["compare_trees_null"]):
            rec = kprof.plugin.active()
            assert rec is not None
            launch = rec.launch
            t0 = tt()
            for _ in range(N):
                launch(backend, kernel, "k", queue, 1, 2, 3, 4)
            t1 = tt()
            for _ in range(N):
                with kprof.range("r"):
                    pass
            t2 = tt()
            for _ in range(N):
                kprof.mark("m")
            t3 = tt()
            rec._incoming.clear()  # the stand-in tokens are not the backend's to read
        out[f"launch_{label}"] = (t1 - t0) / N
        out[f"range_{label}"] = (t2 - t1) / N
        out[f"mark_{label}"] = (t3 - t2) / N
    native.use_compiled(True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("old", nargs="?")
    ap.add_argument("new", nargs="?")
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child)))
        return 0
    if not (args.old and args.new):
        ap.error("give the two trees: OLD_TREE NEW_TREE")
    trees = {"old": args.old, "new": args.new}
    runs: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
    for r in range(args.rounds):
        for which in ("old", "new") if r % 2 == 0 else ("new", "old"):
            cmd = [sys.executable, __file__, "--child", trees[which]]
            done = subprocess.run(cmd, capture_output=True, text=True, check=True)
            runs[which].append(json.loads(done.stdout))
    print(f"{args.rounds} rounds, ns of thread CPU time per call; ratio: new / old, paired")
    print("| figure | old | new | ratio (median) | quartiles |")
    print("| --- | --- | --- | --- | --- |")
    for key in runs["old"][0]:
        ratios = [n[key] / o[key] for o, n in zip(runs["old"], runs["new"], strict=True)]
        q1, _, q3 = statistics.quantiles(ratios, n=4)
        old = statistics.median(o[key] for o in runs["old"])
        new = statistics.median(n[key] for n in runs["new"])
        print(
            f"| {key} | {old:.0f} | {new:.0f} | {statistics.median(ratios):.3f} | "
            f"{q1:.3f} to {q3:.3f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
