"""The device-time tree as a speedscope file (``Profile.export_speedscope``): speedscope's
published format (https://www.speedscope.app/file-format-schema.json), one "sampled" profile
whose samples are the tree's paths (ranges, lines of code outermost first, the kernel) and
whose weights are their device time in nanoseconds: speedscope's "Left Heavy" and "Sandwich"
views then show where in the code device time goes."""

from __future__ import annotations

import json
import os
from typing import IO, TYPE_CHECKING, Any

from kprof_core._version import __version__
from kprof_core.data.tree import KERNEL_NODE, RANGE_NODE, TreeNode, device_tree
from kprof_core.io.exports import open_text

if TYPE_CHECKING:
    from kprof_core.data.profile_data import ProfileData

SCHEMA = "https://www.speedscope.app/file-format-schema.json"


def speedscope(p: ProfileData, name: str = "kprof: device time") -> dict[str, Any]:
    """The speedscope file's data for ``p``: weights sum to the device time of its kernels and
    copies (the per-name summary's device total)."""
    frames: list[dict[str, Any]] = []
    index: dict[tuple[str, str, int], int] = {}
    samples: list[list[int]] = []
    weights: list[int] = []

    def frame(node: TreeNode) -> int:
        if node.site is not None:
            s = node.site
            key = (s.function, s.file, s.line)
            entry: dict[str, Any] = {"name": s.function, "file": s.file, "line": s.line}
        else:
            label = f"range {node.name}" if node.kind == RANGE_NODE else node.name
            key, entry = (label, "", -1), {"name": label}
        i = index.get(key)
        if i is None:
            i = index[key] = len(frames)
            frames.append(entry)
        return i

    root = device_tree(p)
    todo: list[tuple[TreeNode, list[int]]] = [(c, []) for c in reversed(root.children)]
    while todo:
        node, path = todo.pop()
        here = [*path, frame(node)]
        inner = sum(c.total_ns for c in node.children)
        if node.kind == KERNEL_NODE or node.total_ns > inner:
            # A kernel is a leaf; any other node's own time is none (all of it is its kernels').
            samples.append(here)
            weights.append(node.total_ns - inner)
        todo.extend((c, here) for c in reversed(node.children))
    return {
        "$schema": SCHEMA,
        "shared": {"frames": frames},
        "profiles": [
            {
                "type": "sampled",
                "name": name,
                "unit": "nanoseconds",
                "startValue": 0,
                "endValue": root.total_ns,
                "samples": samples,
                "weights": weights,
            }
        ],
        "name": name,
        "activeProfileIndex": 0,
        "exporter": f"kprof {__version__}",
    }


def write_speedscope(path: str | os.PathLike[str] | IO[str], p: ProfileData) -> None:
    """Write ``speedscope(p)`` as JSON to a path or an open text file."""
    with open_text(path, "speedscope file") as f:
        json.dump(speedscope(p), f, separators=(",", ":"))
