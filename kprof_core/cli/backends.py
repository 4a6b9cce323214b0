"""``kprof backends``: the backend plugins, their devices, what they can time, and which
recorder runs."""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from typing import Any

from kprof_core.renderers.terminal import escape, print_text


def _backend_rows() -> list[dict[str, Any]]:
    from kprof_core.host.discovery import registry
    from kprof_core.low_level import native

    recorder = "compiled" if native.compiled() is not None else "pure Python"
    rows = []
    for b in registry.all():
        info = b.info()
        rows.append(
            {
                "name": b.name,
                "plugin": b.distribution or b.plugin_label,
                "plugin_version": b.version,
                "status": info.status,
                "timestamps": "device" if info.timestamps and b.has_timestamps else "host fallback",
                "devices": list(info.devices),
                "library": info.library,
                "library_version": info.library_version,
                "error": info.status[len("error: ") :] if info.status.startswith("error") else None,
                "detail": info.detail,
                # The launch path every backend's launches take (the same for all of them).
                "recorder": recorder,
                "recorder_detail": native.describe(),
                "capture": info.capture,
                "capture_detail": info.capture_detail,
            }
        )
    return rows


def command(args: argparse.Namespace) -> int:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rows = _backend_rows()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for w in caught:  # plugins' own text: escaped like every line written to a terminal
        print(escape(f"warning: {w.message}"), file=sys.stderr)
    if not rows:
        print_text("No kprof backend plugins are installed (entry-point group 'kprof.backends').")
        print_text("Install one, e.g.: pip install 'kprof[opencl]'")
        return 0
    table = [("Backend", "Plugin", "Library", "Devices", "Timestamps", "Status")]
    for r in rows:
        lib = (
            f"{r['library']} {r['library_version']}"
            if r["library_version"]
            else f"{r['library'] or '?'} (not installed)"
        )
        plugin = f"{r['plugin']} {r['plugin_version'] or ''}".strip()
        devices = "; ".join(r["devices"]) or "-"
        status = r["status"] + (f" ({r['detail']})" if r["detail"] else "")
        table.append((r["name"], plugin, lib, devices, r["timestamps"], status))
    widths = [max(len(row[i]) for row in table) for i in range(5)]
    for i, row in enumerate(table):
        print_text(escape("  ".join(c.ljust(w) for c, w in zip(row[:5], widths)) + "  " + row[5]))
        if i == 0:
            print_text("  ".join("─" * w for w in widths) + "  " + "─" * len("Status"))
    from kprof_core.low_level import native

    print_text(f"Recorder: {native.describe()}")  # which launch path runs (every backend's)
    captures = [r for r in rows if r["capture"]]
    if captures:
        print_text("")
        for r in captures:
            why = f": {r['capture_detail']}" if r["capture_detail"] else ""
            print_text(escape(f"{r['name']} captures with {r['capture']}{why}"))  # plugins' text
    return 0


def add_parser(sub: Any) -> None:
    """Register ``kprof backends``."""
    b = sub.add_parser(
        "backends", help="list backend plugins, their devices and what they can time"
    )
    b.add_argument("--json", action="store_true", help="print a JSON list of objects")
    b.set_defaults(func=command)
