"""``kprof.range``'s own cost with the OpenCL plugin's range hooks, without PoCL (issue 28):

    python bench/range_standin.py [TREE]

An empty ``kprof.range`` on a stand-in queue whose marker is a C callable put in place of
PyOpenCL's ``_enqueue_marker_with_wait_list`` (``dict.get``: one call, no OpenCL), so that
what is timed is kprof's work and the hooks' (``_clnative``'s C twins on the compiled path,
``kprof_opencl.plugin``'s functions on the pure one), in the launching thread's CPU time: on a
shared machine PoCL's worker threads make the real figure (``compare_trees.py --opencl``)
swing by more than the range costs. No harvest runs (the entries are dropped). TREE: a source
tree to import kprof from (its compiled parts built), as ``compare_trees.py`` does; prints the
median ns per range of 9 runs of 20,000, on each recorder path.
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import Any

if len(sys.argv) > 1:  # only that tree's packages (an editable install would win otherwise)
    sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
    sys.path.insert(0, sys.argv[1])

import pyopencl._cl as _cl

import kprof
import kprof_opencl
import kprof_opencl.plugin as cl_plugin
from kprof_core.low_level import native
from kprof_core.recording.recorder import Recorder


class Queue:
    """A stand-in queue: profiling on (the flag kprof caches on PyOpenCL's queues)."""

    def finish(self) -> None:
        pass


class Event:
    pass


def main() -> None:
    q, ev = Queue(), Event()
    q._kprof_profiles = True  # type: ignore[attr-defined]
    stand_in: Any = {q: ev}.get  # marker(q, None) -> ev, in C
    _cl._enqueue_marker_with_wait_list = stand_in
    cl_plugin._marker = None
    Recorder.harvest_every = Recorder.max_pending = 10**9
    tt, n = time.thread_time_ns, 20000
    out: dict[str, list[float]] = {"compiled": [], "pure": []}
    for _ in range(9):
        for label in out:
            native.use_compiled(label == "compiled")
            with kprof.profile(backends=["opencl"]), kprof_opencl.use_queue(q):
                rec = kprof.plugin.active()
                assert rec is not None
                t0 = tt()
                for _ in range(n):
                    with kprof.range("r"):
                        pass
                t1 = tt()
                rec._incoming.clear()  # stand-in events: nothing to read
                rec._live_queues.clear()
            out[label].append((t1 - t0) / n)
    native.use_compiled(True)
    print({k: round(statistics.median(v)) for k, v in out.items()})


if __name__ == "__main__":
    main()
