"""kprof's benchmarks: one command, side-by-side figures, on PoCL's CPU OpenCL device.

    python bench/run.py            # everything (a few minutes on 2 cores)
    python bench/run.py --quick    # smaller counts, for a smoke run
    python bench/run.py --only launch,range

Every ratio is measured in one run, alternating the variants so that drift on a shared
machine hits them alike; each figure is the median over repeats. Benchmarks report, they never
gate: targets are printed beside the figures. Results also go to bench/results.json.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the benchmarks import harness; running a file puts it there too

from targets import targets_table  # noqa: E402

#: The benchmarks in the order they run; any other ``bench_*.py`` runs after them, by name.
ORDER = (
    "queue",
    "launch",
    "parts",
    "gap",
    "idle",
    "range",
    "accuracy",
    "scale",
    "startup",
    "hook",
    "floor",
    "approximate",
)


def benches() -> dict[str, Callable[[bool], dict[str, Any]]]:
    """Every ``bench/bench_<name>.py``'s ``bench`` function, by name, in running order."""
    found = sorted(p.stem.removeprefix("bench_") for p in HERE.glob("bench_*.py"))
    names = [n for n in ORDER if n in found] + [n for n in found if n not in ORDER]
    return {n: importlib.import_module(f"bench_{n}").bench for n in names}


def main() -> int:
    found = benches()
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", help="comma-separated: " + ",".join(found))
    ap.add_argument("--out", default=str(HERE / "results.json"))
    args = ap.parse_args()
    chosen = args.only.split(",") if args.only else list(found)
    unknown = [n for n in chosen if n not in found]
    if unknown:
        ap.error(f"no benchmark named {', '.join(unknown)}; there are: {', '.join(found)}")
    out = Path(args.out)
    # --only updates its benchmarks in the results file and keeps the others' figures (each
    # with the date it was measured in "measured"), rather than dropping them.
    results: dict[str, Any] = json.loads(out.read_text()) if args.only and out.exists() else {}
    measured = results.pop("measured", {}) if isinstance(results.get("measured"), dict) else {}
    results |= {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "command": "python bench/run.py"
        + (" --quick" if args.quick else "")
        + (f" --only {args.only}" if args.only else ""),
    }
    try:
        import pyopencl

        results["pyopencl"] = ".".join(map(str, pyopencl.VERSION))  # no VERSION_TEXT in 2026.1
        results["device"] = ", ".join(
            f"{p.version} / {d.name}" for p in pyopencl.get_platforms() for d in p.get_devices()
        )
    except Exception as exc:
        print(f"OpenCL is not available: {exc}", file=sys.stderr)
        return 1
    for name in chosen:
        print(f"== {name}", flush=True)
        results[name] = found[name](args.quick)
        measured[name] = time.strftime("%Y-%m-%d %H:%M")
        print(json.dumps(results[name], indent=2), flush=True)
    from kprof_core.low_level import native

    results["recorder"] = native.describe()
    results["measured"] = measured
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")
    print(
        f"\n== targets ({results['date']}, {results['machine']}; {results['device']}; "
        f"recorder: {results['recorder']})"
    )
    print("\n".join(targets_table(results)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
