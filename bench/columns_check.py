"""What checking a column-wise activity batch costs (``kprof.plugin.deliver_columns``).

    python bench/columns_check.py [--rows N] [--rounds R]      (KPROF_PURE_PYTHON=1 for pure)

A batch of N rows (numpy int64 columns, one queue, one scope, 50 names, launch times, a
detail format: what the CUPTI reader hands over) is built (``ActivityColumns``) and made into
rows (``harvest_activity.take_activity_columns``), in alternating rounds with the value
checks on and replaced by what the route computed before them (the durations and the index
sets, no bounds): the figure is the median of the per-round ratios (the machine is shared).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from array import array
from operator import sub
from typing import Any

import numpy as np

os.environ["KPROF_PLUGINS"] = "testtrace"

import kprof
from kprof import plugin as kp
from kprof_core.low_level.layout import A_RECORD, A_SLOT, A_WHO
from kprof_core.recording import harvest_activity
from kprof_core.recording.harvest import Harvest
from kprof_core.recording.threads import who


def unchecked(cols: Any, n: int) -> tuple[array[int], set[int], set[int]]:
    return array("q", map(sub, cols.end, cols.begin)), set(cols.name), set(cols.queue)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=21)
    args = ap.parse_args()
    from kprof_testbackend.tracer import Stream

    b = kprof.get_backend("testtrace")
    n = args.rows
    r = np.arange(n, dtype=np.int64)
    t0 = 10**12
    fields: dict[str, Any] = dict(
        scope=np.ones(n, np.int64),
        kind=np.zeros(n, np.int64),
        name=r % 50,
        names=[f"k{i}" for i in range(50)],
        queue=np.zeros(n, np.int64),
        queues=[Stream("s")],
        begin=t0 + r * 1000,
        end=t0 + r * 1000 + 500,
        nbytes=np.full(n, -1, np.int64),
        launch_begin=t0 + r * 1000 - 300,
        launch_end=t0 + r * 1000 - 200,
        correlation=r,
        detail=("grid {0} block {1}", [r, r]),
        clock="bench",
    )
    w = who()

    def once(checked: bool) -> int:
        saved = harvest_activity.sane_columns, harvest_activity.within_limit
        if not checked:
            harvest_activity.sane_columns = unchecked  # type: ignore[assignment]
            harvest_activity.within_limit = lambda raw, non_negative=False: True
        try:
            h = Harvest([b], 1.0)
            t = time.perf_counter_ns()
            cols = kp.ActivityColumns(**fields)
            entry: list[Any] = [None] * 5
            entry[A_SLOT], entry[A_RECORD], entry[A_WHO] = b.slot, cols, {1: w}
            harvest_activity.take_activity_columns(h.delivered, tuple(entry))
            took = time.perf_counter_ns() - t
        finally:
            harvest_activity.sane_columns, harvest_activity.within_limit = saved
        assert len(h.tables.table) == n and not h.tables.errors
        return took

    on, off, ratios = [], [], []
    for i in range(args.rounds):
        if i % 2:  # alternate which goes first
            a, z = once(True), once(False)
        else:
            z, a = once(False), once(True)
        on.append(a)
        off.append(z)
        ratios.append(a / z)
    print(
        f"{kp.recorder_description()}: {n} rows; checked {statistics.median(on) / n:.0f} ns/row, "
        f"unchecked {statistics.median(off) / n:.0f} ns/row; median paired ratio "
        f"{statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f})"
    )


if __name__ == "__main__":
    main()
