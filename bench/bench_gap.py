"""Benchmark ``gap`` (``python bench/run.py --only gap``): what host time between tiny launches
costs on PoCL beyond itself (issue 28).

    python bench/bench_gap.py [--rounds 20] [--n 4000] [--env POCL_MAX_PTHREAD_COUNT=1]

PoCL's CPU device runs each command on worker threads that sleep on a condition variable as
soon as the work queue is empty (``pthread_scheduler_get_work``: no spinning). A launch that
finds a worker still awake costs a lock and a queue append; one that finds them asleep also
pays the futex wake-up (``pthread_cond_signal`` -> ``futex_wake`` -> ``try_to_wake_up``), and
the woken worker pays its own switch back in. So host time spent between launches (kprof's
wrapper and recorder, or any other work) may cost more than itself: this measures how much.

Each round, in one process and in a rotated order: N tiny launches alone ("plain"); N launches
each followed by a known C-level busy wait (``deque(maxlen=0).extend(repeat(None, k))``: no
allocation per item, no system call) for each delay; the same busy waits alone; and N launches
in ``kprof.profile()`` (no harvest during the loop, and with the default harvests), with
kprof's own host work per launch (its compiled wrapper and recorder around a stand-in enqueue,
no PoCL) measured alone. Per variant: the launching thread's CPU time over the loop
(``thread_time_ns``), every thread's over the loop and ``q.finish()`` (``process_time_ns``),
and the context switches of each thread (``/proc/self/task/*/status``): the workers'
voluntary switches are their sleeps, so each one is a wake-up some launch paid for. The excess
of a delay is ``(launch + delay) - delay alone - plain``, per round (paired), median over
rounds.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections import deque
from itertools import repeat
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

#: Target busy waits between launches, ns (the exact cost of each is measured alone).
DELAYS_NS = (0, 100, 200, 300, 400, 600, 800, 1200, 2000, 3000)


def _switches() -> dict[int, tuple[int, int]]:
    """(voluntary, involuntary) context switches of each thread of this process, by tid."""
    out: dict[int, tuple[int, int]] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            text = Path(f"/proc/self/task/{tid}/status").read_text()
        except OSError:  # a thread that ended meanwhile
            continue
        vals = dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)
        out[int(tid)] = (
            int(vals["voluntary_ctxt_switches"]),
            int(vals["nonvoluntary_ctxt_switches"]),
        )
    return out


def _switch_delta(
    before: dict[int, tuple[int, int]], after: dict[int, tuple[int, int]], me: int
) -> dict[str, int]:
    d = {"self_vol": 0, "self_invol": 0, "others_vol": 0, "others_invol": 0}
    for tid, (v, i) in after.items():
        v0, i0 = before.get(tid, (0, 0))
        who = "self" if tid == me else "others"
        d[f"{who}_vol"] += v - v0
        d[f"{who}_invol"] += i - i0
    return d


def child(rounds: int, n: int) -> dict[str, Any]:
    """The measurement, in this process (``run`` starts it in a fresh one per setting)."""
    sys.path.insert(0, str(HERE))
    from harness import opencl

    import kprof
    from kprof_core.low_level import native
    from kprof_core.recording.recorder import Recorder

    cl, _ctx, q, _prg, tiny, _busy, _big, _np, buf = opencl()
    g = (64,)
    with kprof.profile(backends=["opencl"]):  # capture's first install: part of the set-up
        tiny(q, g, None, buf)
    q.finish()
    native.use_compiled(True)
    ext = deque(maxlen=0).extend  # consumes an iterator in C: the busy wait
    tt, pt = time.thread_time_ns, time.process_time_ns
    me = threading.get_native_id()

    # Items of the busy wait per ns: calibrated once (its cost is measured every round anyway).
    t0 = tt()
    for _ in range(20000):
        ext(repeat(None, 400))
    per_item = max((tt() - t0) / 20000 / 400, 0.1)
    items = {d: int(d / per_item) for d in DELAYS_NS}

    def measure(body: Any) -> dict[str, float]:
        gc.collect()
        s0, c0, t0 = _switches(), pt(), tt()
        loop = body()  # the loop's own thread time, where the body has more than its loop
        t1 = tt()
        q.finish()
        c1, s1 = pt(), _switches()
        out = {"thread_ns": (t1 - t0) / n, "all_ns": (c1 - c0) / n}
        out["loop_ns"] = out["thread_ns"] if loop is None else loop / n
        out.update({k: v / n for k, v in _switch_delta(s0, s1, me).items()})
        return out

    def plain() -> None:
        for _ in range(n):
            tiny(q, g, None, buf)

    def gap(k: int) -> Any:
        def body() -> None:
            for _ in range(n):
                tiny(q, g, None, buf)
                ext(repeat(None, k))

        return body

    def alone(k: int) -> Any:
        def body() -> None:
            for _ in range(n):
                ext(repeat(None, k))

        return body

    def in_profile(harvest: bool) -> Any:
        def body() -> int:
            saved = Recorder.harvest_every, Recorder.max_pending
            if not harvest:
                Recorder.harvest_every = Recorder.max_pending = 10**9
            try:
                with kprof.profile(backends=["opencl"]):
                    t0 = tt()
                    for _ in range(n):
                        tiny(q, g, None, buf)
                    t1 = tt()
                    q.finish()
            finally:
                Recorder.harvest_every, Recorder.max_pending = saved
            return t1 - t0

        return body

    def own() -> int:
        """kprof's compiled wrapper and recorder around a stand-in enqueue, no PoCL: kprof's
        own host time per launch. The stand-in (``"".format``: C, any arguments) returns an
        object the collector does not track, as PyOpenCL's events are not: a tracked one
        (``itertools.chain``) made each young collection walk every pending launch's token,
        1.5 us per launch at 20,000 launches."""
        from kprof_opencl import capture

        class Obj:
            pass

        kernel, queue = Obj(), Obj()
        kernel._kprof_name = "k"  # type: ignore[attr-defined]
        queue._kprof_profiles = True  # type: ignore[attr-defined]
        stand_in = "".format
        launch = capture._compiled(stand_in, lambda *a: None, kprof.get_backend("opencl"))
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
                rec._incoming.clear()  # the stand-in tokens are no events to read
                rec._live_queues.clear()
        finally:
            Recorder.harvest_every, Recorder.max_pending = saved
        return t1 - t0

    def events() -> int:
        """The hand-written event loop: every event kept, its END read after ``finish``."""
        t0 = tt()
        evs = [tiny(q, g, None, buf) for _ in range(n)]
        t1 = tt()
        q.finish()
        end = cl.profiling_info.END
        ends = [e.get_profiling_info(end) for e in evs]
        del evs, ends
        return t1 - t0

    variants: dict[str, Any] = {"plain": plain, "events": events, "kprof_own": own}
    variants["kprof_loop"] = in_profile(False)
    variants["kprof_harvests"] = in_profile(True)
    for d, k in items.items():
        variants[f"gap_{d}"] = gap(k)
        variants[f"alone_{d}"] = alone(k)
    runs: dict[str, list[dict[str, float]]] = {k: [] for k in variants}
    names = list(variants)
    for _ in range(2):  # warm-up pass, dropped
        for name in names:
            measure(variants[name])
    for r in range(rounds):
        shift = (r * 7) % len(names)
        order = names[shift:] + names[:shift]
        for name in order if r % 2 == 0 else order[::-1]:
            runs[name].append(measure(variants[name]))
    return {"runs": runs, "n": n, "rounds": rounds, "items_per_ns": 1 / per_item}


def summarise(res: dict[str, Any]) -> dict[str, Any]:
    """Medians of the per-round (paired) figures."""
    runs = res["runs"]
    rounds = res["rounds"]

    def med(name: str, key: str) -> float:
        return statistics.median(x[key] for x in runs[name])

    def col(name: str, key: str) -> list[float]:
        return [float(x[key]) for x in runs[name]]

    def paired(vals: list[float]) -> tuple[float, float, float]:
        q1, _, q3 = statistics.quantiles(vals, n=4) if len(vals) > 1 else [vals[0]] * 3
        return statistics.median(vals), q1, q3

    def excess(gap: str, alone: str, key: str) -> tuple[float, float, float]:
        g, a, p = col(gap, key), col(alone, key), col("plain", key)
        return paired([g[r] - a[r] - p[r] for r in range(rounds)])

    rows = []
    for d in DELAYS_NS:
        g, a = f"gap_{d}", f"alone_{d}"
        ex, ex_all = excess(g, a, "thread_ns"), excess(g, a, "all_ns")
        rows.append(
            {
                "delay_target_ns": d,
                "delay_alone_ns": med(a, "thread_ns"),
                "launch_plus_delay_thread_ns": med(g, "thread_ns"),
                "excess_thread_ns": ex[0],
                "excess_thread_quartiles": [ex[1], ex[2]],
                "launch_plus_delay_all_ns": med(g, "all_ns"),
                "excess_all_ns": ex_all[0],
                "excess_all_quartiles": [ex_all[1], ex_all[2]],
                "worker_sleeps_per_launch": med(g, "others_vol"),
                "self_vol_per_launch": med(g, "self_vol"),
                "self_invol_per_launch": med(g, "self_invol"),
            }
        )
    out: dict[str, Any] = {"n": res["n"], "rounds": rounds, "gap": rows}
    for name in ("plain", "events", "kprof_own", "kprof_loop", "kprof_harvests"):
        out[name] = {
            k: med(name, k)
            for k in ("thread_ns", "loop_ns", "all_ns", "others_vol", "self_vol", "self_invol")
        }
    for name in ("events", "kprof_loop", "kprof_harvests"):
        for key in ("thread_ns", "loop_ns", "all_ns"):
            v, p, e = col(name, key), col("plain", key), col("events", key)
            d = paired([v[r] - p[r] for r in range(rounds)])
            out[name][f"minus_plain_{key}"] = d[0]
            out[name][f"minus_plain_{key}_quartiles"] = [d[1], d[2]]
            out[name][f"ratio_{key}"] = paired([v[r] / p[r] for r in range(rounds)])[0]
            if name != "events":
                out[name][f"ratio_events_{key}"] = paired([v[r] / e[r] for r in range(rounds)])[0]
    # What the gap curve predicts for kprof: its own host time, plus that delay's excess
    # (interpolated between the two nearest measured delays).
    own = out["kprof_own"]["loop_ns"]
    pts = sorted(
        (row["delay_alone_ns"], row["excess_thread_ns"], row["excess_all_ns"]) for row in rows
    )
    lo = max((p for p in pts if p[0] <= own), default=pts[0])
    hi = min((p for p in pts if p[0] >= own), default=pts[-1])
    w = 0.0 if hi[0] == lo[0] else (own - lo[0]) / (hi[0] - lo[0])
    out["predicted_kprof_minus_plain_thread_ns"] = own + lo[1] + w * (hi[1] - lo[1])
    out["predicted_kprof_minus_plain_all_ns"] = own + lo[2] + w * (hi[2] - lo[2])
    return out


def run(rounds: int, n: int, env: dict[str, str] | None = None) -> dict[str, Any]:
    """The measurement in a fresh process (with ``env`` added), summarised."""
    cmd = [sys.executable, __file__, "--child", "--rounds", str(rounds), "--n", str(n)]
    done = subprocess.run(
        cmd, capture_output=True, text=True, check=True, env={**os.environ, **(env or {})}
    )
    out = summarise(json.loads(done.stdout))
    out["env"] = env or {}
    out["loadavg"] = os.getloadavg()
    return out


def table(s: dict[str, Any]) -> str:
    lines = [
        f"env {s['env'] or 'default'}; {s['rounds']} rounds x {s['n']} launches; "
        f"load average {', '.join(f'{x:.1f}' for x in s['loadavg'])}",
        "| delay alone | launch+delay, thread | excess, thread (quartiles) | excess, all threads "
        "| worker sleeps per launch |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in s["gap"]:
        q = row["excess_thread_quartiles"]
        lines.append(
            f"| {row['delay_alone_ns']:.0f} | {row['launch_plus_delay_thread_ns']:.0f} "
            f"| {row['excess_thread_ns']:+.0f} ({q[0]:+.0f} to {q[1]:+.0f}) "
            f"| {row['excess_all_ns']:+.0f} | {row['worker_sleeps_per_launch']:.2f} |"
        )
    for name in ("plain", "events", "kprof_own", "kprof_loop", "kprof_harvests"):
        v = s[name]
        extra = ""
        if "minus_plain_thread_ns" in v:
            extra = (
                f"; minus plain {v['minus_plain_loop_ns']:+.0f} loop, "
                f"{v['minus_plain_thread_ns']:+.0f} thread with start/end, "
                f"{v['minus_plain_all_ns']:+.0f} all; x plain {v['ratio_thread_ns']:.2f} thread, "
                f"{v['ratio_all_ns']:.2f} all"
            )
            if "ratio_events_thread_ns" in v:
                extra += (
                    f"; x events {v['ratio_events_thread_ns']:.2f} thread, "
                    f"{v['ratio_events_all_ns']:.2f} all"
                )
        lines.append(
            f"{name}: loop {v['loop_ns']:.0f} ns, thread {v['thread_ns']:.0f} ns, all {v['all_ns']:.0f} ns, worker sleeps "
            f"{v['others_vol']:.2f}/launch{extra}"
        )
    lines.append(
        f"predicted kprof minus plain from the gap curve (own + excess at own): "
        f"{s['predicted_kprof_minus_plain_thread_ns']:+.0f} loop (thread), "
        f"{s['predicted_kprof_minus_plain_all_ns']:+.0f} all"
    )
    return "\n".join(lines)


def bench(quick: bool) -> dict[str, Any]:
    """The gap curve, default PoCL settings (one fresh process)."""
    s = run(*((4, 1000) if quick else (20, 4000)))
    print(table(s))
    return s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--n", type=int, default=4000)
    ap.add_argument(
        "--env", action="append", default=[], help="NAME=VALUE for the measuring process"
    )
    ap.add_argument("--json", help="write the summary here too")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.rounds, args.n)))
        return 0
    env = dict(e.split("=", 1) for e in args.env)
    s = run(args.rounds, args.n, env)
    print(table(s))
    if args.json:
        Path(args.json).write_text(json.dumps(s, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
