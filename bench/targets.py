"""The target rows BENCHMARKS.md quotes, from ``python bench/run.py``'s results."""

from __future__ import annotations

from typing import Any


def targets_table(r: dict[str, Any]) -> list[str]:
    """The target rows BENCHMARKS.md quotes, as markdown lines (figures are medians)."""
    rows: list[tuple[str, str, str, bool | None]] = []

    def add(what: str, target: str, value: float | None, fmt: str, ok: bool | None) -> None:
        rows.append((what, target, "n/a" if value is None else fmt.format(value), ok))

    la = r.get("launch")
    if la:
        ns = la["ns_per_launch"]
        for label in ("compiled", "pure"):
            if f"ratio_{label}" in la:
                add(
                    f"tiny launch, kprof {label} / unprofiled (loop + resolving; "
                    f"{ns[f'kprof_{label}']:.0f} vs {ns['unprofiled']:.0f} ns)",
                    "≤ 1.25" if label == "compiled" else "≤ 1.9",
                    la[f"ratio_{label}"],
                    "{:.2f}×",
                    la[f"ratio_{label}"] <= (1.25 if label == "compiled" else 1.9),
                )
        if "ratio_compiled_vs_event_loop" in la:
            v = la["ratio_compiled_vs_event_loop"]
            add(
                f"kprof compiled / hand-written event loop ({ns['native_event_loop']:.0f} ns)",
                "≤ 1.15",
                v,
                "{:.2f}×",
                v <= 1.15,
            )
        v = la.get("ratio_pure_vs_event_loop")
        if v is not None:
            add("kprof pure Python / hand-written event loop", "-", v, "{:.2f}×", None)
    idle = r.get("idle")
    if idle:
        add(
            "no profile running, kprof loaded / no kprof (wall"
            + (f"; CPU {idle['cpu_ratio']:.3f}×)" if "cpu_ratio" in idle else ")"),
            "≤ 1.02",
            idle["ratio"],
            "{:.2f}×",
            idle["ratio"] <= 1.02,
        )
    me = r.get("memory")
    if me:
        for label in ("compiled", "pure"):
            key = f"record_ns_{label}"
            if key in me:
                add(
                    f"memory event recorded (kprof.plugin.allocated in a profile minus outside), "
                    f"{label}",
                    "≤ 1000 ns",
                    me[key],
                    "{:.0f} ns",
                    me[key] <= 1000,
                )
        add(
            "allocation with a backend without memory hooks in a profile / no profile",
            "≤ 1.02",
            me["no_hooks_ratio"],
            "{:.2f}×",
            me["no_hooks_ratio"] <= 1.02,
        )
    ra = r.get("range")
    if ra:
        for label in ("compiled", "pure"):
            key = f"range_minus_markers_total_ns_{label}"
            if key in ra:
                most = ra["target_extra_ns"][label]
                add(
                    f"kprof.range around a kernel minus two native markers, until the times "
                    f"are known, {label}",
                    f"≤ {most} ns",
                    ra[key],
                    "{:+.0f} ns",
                    ra[key] <= most,
                )
                loop = ra[f"range_minus_markers_loop_ns_{label}"]
                add(f"the same, the loop only, {label}", "-", loop, "{:+.0f} ns", None)
    sc = r.get("scale")
    if sc:
        n = sc["launches"]
        add(
            f"{n:,} launches: Python memory per record",
            "≤ 80 B",
            sc["bytes_per_record"],
            "{:.2f} B",
            sc["bytes_per_record"] <= 80,
        )
        for label, t in sc["seconds"].items():
            add(
                f"{n:,} launches: end-of-profile resolution, {label}",
                "≤ 1 s",
                t["resolution"],
                "{:.2f} s",
                t["resolution"] <= 1,
            )
            add(
                f"{n:,} launches: summary, {label} run",
                "≤ 0.5 s",
                t["summary"],
                "{:.2f} s",
                t["summary"] <= 0.5,
            )
        add(
            f"{n:,} launches: Chrome trace ({sc['chrome_trace_mb']:.0f} MB)",
            "≤ 10 s",
            sc["seconds_chrome_trace"],
            "{:.1f} s",
            sc["seconds_chrome_trace"] <= 10,
        )
        add(
            "most pending entries (live events) seen",
            f"≤ {sc['pending_bound']:,}",
            sc["max_live_pending"],
            "{:,}",
            sc["max_live_pending"] <= sc["pending_bound"],
        )
    pf = r.get("perfetto")
    if pf:
        n = pf["launches"]
        b = pf["bytes_per_launch"]
        add(
            f"{n:,} launches: Perfetto trace, bytes per launch (JSON: {b['json']:.0f} B)",
            "≤ 120 B",
            b["pure"],
            "{:.0f} B",
            b["pure"] <= 120,
        )
        add(
            f"the same with 8-frame launch stacks ({pf['bytes_per_launch_sites']:.0f} B with "
            "sites alone)",
            "≤ 120 B",
            pf["bytes_per_launch_stacks"],
            "{:.0f} B",
            pf["bytes_per_launch_stacks"] <= 120,
        )
        if "json_over_compiled" in pf:
            add(
                f"{n:,} launches: Chrome JSON write time / Perfetto's, compiled "
                f"({pf['seconds']['json']:.1f} vs {pf['seconds']['compiled']:.1f} s)",
                "≥ 1",
                pf["json_over_compiled"],
                "{:.2f}×",
                pf["json_over_compiled"] >= 1,
            )
        add(
            "the same, Perfetto in pure Python / Chrome JSON",
            "-",
            pf["pure_over_json"],
            "{:.2f}×",
            None,
        )
    ac = r.get("accuracy")
    if ac:
        add(
            "captured launches whose time differs from their event's END − START",
            "0",
            ac["captured_mismatches"],
            "{}",
            ac["captured_mismatches"] == 0,
        )
        for key, rr in ac["ranges"].items():
            state = key.split("_")[1]
            rows.append(
                (
                    f"a range's device time vs its work ({rr['work_median_ns'] / 1e3:.0f} µs,"
                    f" queue {state}): within 1 % or 2 µs",
                    "all",
                    f"{rr['within_bound']}/{rr['ranges']} (median error "
                    f"{rr['error_median_ns'] / 1e3:.1f} µs)",
                    rr["within_bound"] == rr["ranges"],
                )
            )
    st = r.get("startup")
    if st:
        add(
            "import kprof",
            "≤ 150 ms",
            st["import_kprof_s"] * 1e3,
            "{:.0f} ms",
            st["import_kprof_s"] <= 0.150,
        )
        add(
            "kprof backends",
            "≤ 2 s",
            st["kprof_backends_s"],
            "{:.2f} s",
            st["kprof_backends_s"] <= 2,
        )
        kr = st.get("kprof_run")
        if kr:
            v = kr["kprof_run_minus_python_wall_s"]
            add(
                "`kprof run` on a script without GPU libraries, minus python (wall; "
                f"CPU {kr['kprof_run_minus_python_cpu_s']:.3f} s)",
                "≤ 0.15 s",
                v,
                "{:.3f} s",
                v <= 0.15,
            )
    sp = r.get("step")
    if sp:
        add(
            "kprof.step() outside any profile, minus an empty call (paired)",
            "-",
            sp["step_outside_minus_plain_call_ns"],
            "{:.0f} ns",
            None,
        )
        v = sp["loop_ratio_between_windows"]
        add(
            "tiny launch + kprof.step() between windows / unprofiled",
            "≤ 1.02",
            v,
            "{:.3f}×",
            v <= 1.02,
        )
        v = sp["memory_ratio_windows"]
        add(
            f"peak memory, {sp['memory_windows']} windows / 1 window",
            "≤ 1.2",
            v,
            "{:.2f}×",
            v <= 1.2,
        )
    lines = ["| what | target | measured | met? |", "| --- | --- | --- | --- |"]
    for what, target, value, ok in rows:
        met = "-" if ok is None else ("yes" if ok else "**no**")
        lines.append(f"| {what} | {target} | {value} | {met} |")
    if la:
        lines += [
            "",
            "| way of timing a tiny launch (loop + resolving) | ns per launch |",
            "| --- | --- |",
        ]
        for k, v in la["ns_per_launch"].items():
            lines.append(f"| {k} | {v:.0f} |")
    pa = r.get("parts")
    if pa:
        lines += [
            "",
            "| kprof's own work per launch (stand-in enqueue) | compiled | pure |",
            "| --- | --- | --- |",
        ]
        for k in ("wrapper_and_launch", "harvest", "end_of_profile"):
            cells = [f"{pa[p][k]:.0f} ns" if p in pa else "n/a" for p in ("compiled", "pure")]
            lines.append(f"| {k.replace('_', ' ')} | {cells[0]} | {cells[1]} |")
    return lines
