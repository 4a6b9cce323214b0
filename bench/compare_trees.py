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
import gc
import json
import os
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
    if os.environ.get("KPROF_COMPARE_OPENCL") == "1":
        out.update(child_opencl())
    return out


def child_opencl() -> dict[str, float]:
    """With ``--opencl``: tiny PyOpenCL launches on PoCL, thread CPU time of the launching thread
    per launch (PoCL's workers are not counted): unprofiled; in a profile with no harvest
    during the loop ("loop"); the same with the profile's start and end, its harvest and
    resolve, counted ("total"); a kprof.range around a kernel ("range"), against the kernel
    between two native markers in the same kind of profile ("markers"; "markers_read": their
    times read after ``finish`` too)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from harness import opencl

    import kprof
    import kprof_opencl
    from kprof_core.low_level import native
    from kprof_core.recording.recorder import Recorder

    cl, _ctx, q, _prg, tiny, _busy, _big, _np, buf = opencl()
    marker = cl._cl._enqueue_marker_with_wait_list
    start_info, end_info = cl.profiling_info.START, cl.profiling_info.END
    g, n, tt = (64,), 4000, time.thread_time_ns
    with kprof.profile(backends=["opencl"]):  # capture's first install
        tiny(q, g, None, buf)
    q.finish()
    out: dict[str, float] = {}

    def plain() -> None:
        t0 = tt()
        for _ in range(n):
            tiny(q, g, None, buf)
        out["cl_plain"] = (tt() - t0) / n
        q.finish()

    def markers() -> None:
        # In a profile (compiled path, no harvest in the loop), as bench_range's baseline: the
        # kernel's capture is in both, the range's own cost is the difference.
        native.use_compiled(True)
        saved = Recorder.harvest_every, Recorder.max_pending
        Recorder.harvest_every = Recorder.max_pending = 10**9
        try:
            with kprof.profile(backends=["opencl"]):
                t0 = tt()
                pairs = []
                for _ in range(n):
                    m0 = marker(q, None)
                    tiny(q, g, None, buf)
                    pairs.append((m0, marker(q, None)))
                t1 = tt()
                q.finish()
                t2 = tt()
                times = [
                    b.get_profiling_info(end_info) - a.get_profiling_info(start_info)
                    for a, b in pairs
                ]
                del pairs
                t3 = tt()
        finally:
            Recorder.harvest_every, Recorder.max_pending = saved
        out["cl_markers"] = (t1 - t0) / n
        out["cl_markers_read"] = (t1 - t0 + t3 - t2) / n
        assert len(times) == n

    def launches(label: str, compiled: bool) -> None:
        native.use_compiled(compiled)
        saved = Recorder.harvest_every, Recorder.max_pending
        Recorder.harvest_every = Recorder.max_pending = 10**9
        try:
            t0 = tt()
            with kprof.profile(backends=["opencl"]):
                t1 = tt()
                for _ in range(n):
                    tiny(q, g, None, buf)
                t2 = tt()
                q.finish()
                t3 = tt()
            t4 = tt()
        finally:
            Recorder.harvest_every, Recorder.max_pending = saved
        out[f"cl_launch_loop_{label}"] = (t2 - t1) / n
        out[f"cl_launch_total_{label}"] = (t2 - t0 + t4 - t3) / n
        # The profile's start and end alone (the end's harvest, resolve and release of the
        # launches): without the loop's PoCL noise.
        out[f"cl_launch_ends_{label}"] = (t1 - t0 + t4 - t3) / n

    def ranges(label: str, compiled: bool) -> None:
        native.use_compiled(compiled)
        rng = kprof.range
        saved = Recorder.harvest_every, Recorder.max_pending
        Recorder.harvest_every = Recorder.max_pending = 10**9
        try:
            with kprof.profile(backends=["opencl"]) as p, kprof_opencl.use_queue(q):
                t0 = tt()
                for _ in range(n):
                    with rng("r"):
                        tiny(q, g, None, buf)
                t1 = tt()
                q.finish()
        finally:
            Recorder.harvest_every, Recorder.max_pending = saved
        assert len(p.device_ranges) == n
        out[f"cl_range_loop_{label}"] = (t1 - t0) / n

    def wrapper() -> None:
        """The compiled launch wrapper (``_clnative.Launcher``) and the recorder's launch,
        around a stand-in for the native enqueue (a C callable taking any arguments): kprof's
        own work per launch, without PoCL's (whose threads share the cores). The stand-in
        returns an object the collector does not track, as PyOpenCL's events are not (a
        tracked token, ``itertools.chain``'s, made young collections walk the pending ones)."""
        from kprof_opencl import capture

        class Obj:
            pass

        kernel, queue = Obj(), Obj()
        kernel._kprof_name = "k"  # type: ignore[attr-defined]
        queue._kprof_profiles = True  # type: ignore[attr-defined]
        native.use_compiled(True)
        backend = kprof.get_backend("opencl")
        launch = capture._compiled("".format, lambda *a: None, backend)
        saved = Recorder.harvest_every, Recorder.max_pending
        Recorder.harvest_every = Recorder.max_pending = 10**9
        try:
            with kprof.profile(backends=["opencl"]):
                rec = kprof.plugin.active()
                assert rec is not None
                t0 = tt()
                for _ in range(n):
                    launch(queue, kernel, g, None, None, None, False, False)
                t1 = tt()
                assert len(rec._incoming) == n
                rec._incoming.clear()  # the stand-in tokens are no events to read
                rec._live_queues.clear()
        finally:
            Recorder.harvest_every, Recorder.max_pending = saved
        out["cl_wrapper_compiled"] = (t1 - t0) / n

    steps = [plain, markers, wrapper]
    for label, compiled in (("compiled", True), ("pure", False)):
        steps.append(lambda label=label, compiled=compiled: launches(label, compiled))
        steps.append(lambda label=label, compiled=compiled: ranges(label, compiled))
    for _ in range(2):  # the second pass is kept
        for step in steps:
            # Each step from a full collection: else where the collector's next full pass
            # falls (~15 ms, at a point set by all that ran before) decides which step pays it.
            gc.collect()
            step()
    native.use_compiled(True)
    for label in ("compiled", "pure"):
        out[f"cl_range_minus_markers_{label}"] = out[f"cl_range_loop_{label}"] - out["cl_markers"]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("old", nargs="?")
    ap.add_argument("new", nargs="?")
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--opencl", action="store_true", help="PoCL launches and ranges too")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child)))
        return 0
    if not (args.old and args.new):
        ap.error("give the two trees: OLD_TREE NEW_TREE")
    trees = {"old": args.old, "new": args.new}
    if args.opencl:
        os.environ["KPROF_COMPARE_OPENCL"] = "1"
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
        if key.startswith("cl_range_minus"):  # a difference: compared as one
            diffs = [n[key] - o[key] for o, n in zip(runs["old"], runs["new"], strict=True)]
            old = statistics.median(o[key] for o in runs["old"])
            new = statistics.median(n[key] for n in runs["new"])
            print(
                f"| {key} | {old:.0f} | {new:.0f} | new - old {statistics.median(diffs):+.0f} | |"
            )
            continue
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
