"""Benchmark ``parts`` (``python bench/run.py --only parts``)."""

from __future__ import annotations

import statistics
import time
from typing import Any

from harness import opencl, recorder_paths


def bench(quick: bool) -> dict[str, Any]:
    """Where kprof's time per launch goes, without PoCL's noise: the capture wrapper and
    ``rec.launch`` around a stand-in for the native enqueue, the harvest of completed events
    (real ones, read back), and the placement at the end; per recorder path, ns per launch."""
    import kprof
    from kprof_core.recording.recorder import Recorder
    from kprof_opencl import capture as ocl_capture

    _cl_mod, _ctx, q, _prg, tiny, _busy, _big, _np, buf = opencl()
    n = 2000 if quick else 20000
    events = [tiny(q, (64,), None, buf) for _ in range(4096)]
    q.finish()
    ev = events[0]

    def native_stand_in(queue: Any, kernel: Any, *args: Any) -> Any:
        return ev

    from kprof_core.host.discovery import registry

    backend = registry.get("opencl")
    g = (64,)
    out: dict[str, Any] = {}
    for label, compiled in recorder_paths().items():

        def parts(compiled: bool = compiled) -> dict[str, float]:
            from kprof_core.low_level import native

            native.use_compiled(compiled)
            wrapper = ocl_capture.kernel_wrapper(native_stand_in, backend)  # compiled or not
            try:
                saved = Recorder.harvest_every, Recorder.max_pending
                Recorder.harvest_every = Recorder.max_pending = 10**9  # no harvest meanwhile
                with kprof.profile(backends=["opencl"]):
                    rec = kprof.plugin.active()
                    assert rec is not None
                    t0 = time.perf_counter_ns()
                    for _ in range(n):
                        native_stand_in(q, tiny, g, None, None, None, False, False)
                    t1 = time.perf_counter_ns()
                    for _ in range(n):
                        wrapper(q, tiny, g, None, None, None, False, False)
                    t2 = time.perf_counter_ns()
                    # The harvest, of real completed events (one per entry, as captured).
                    pending = rec._incoming
                    pending[:] = [
                        (*e[:7], events[i % 4096], events[i % 4096], *e[9:])
                        for i, e in enumerate(pending)
                    ]
                    t3 = time.perf_counter_ns()
                    rec.harvest(wait=False)
                    t4 = time.perf_counter_ns()
                    assert not pending
                t5 = time.perf_counter_ns()
                Recorder.harvest_every, Recorder.max_pending = saved
            finally:
                native.use_compiled(True)
            return {
                "wrapper_and_launch": (t2 - t1 - (t1 - t0)) / n,
                "harvest": (t4 - t3) / n,
                "end_of_profile": (t5 - t4) / n,
            }

        runs = [parts() for _ in range(3 if quick else 9)]
        out[label] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    out["launches_per_run"] = n
    return out
