"""The device-time tree in HTML: a collapsible tree and a flame graph, static markup.

Both are drawn from :func:`kprof_core.data.tree.device_tree` (ranges, then launch frames
outermost first, then kernels). The tree is nested ``<details>`` elements: it opens and closes
without a script, so it works in the HTML page, in a notebook's output and where scripts do not
run (an untrusted notebook, a notebook viewer). The flame graph is one box per node, the root at
the bottom, its children on it side by side: each box's width is its share of the device time
(left and width in percent of the graph), so it scales with the page; hovering shows a box's
title. In the HTML page a click on a box zooms the graph to it (its ancestors dimmed across the
width); a click on the bottom box shows all again. Boxes narrower than :data:`MIN_SHARE` percent are left out, with what is under them.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from kprof_core.data.timefmt import format_time
from kprof_core.data.tree import SITE_NODE, TreeNode, device_tree

if TYPE_CHECKING:
    from kprof_core.data.profile_data import ProfileData

#: Tree levels open when the page loads (the root is level 0).
OPEN_LEVELS = 2
#: The most children the tree lists under one node; the rest are summed on one line.
MAX_CHILDREN = 100
#: Flame graph boxes narrower than this (percent of the device time) are not drawn.
MIN_SHARE = 0.1
#: Height of a flame graph level, in pixels.
LEVEL_PX = 18

STYLE = """<style>
.kprof-tree { font-variant-numeric: tabular-nums; margin: 4px 0 10px; overflow-x: auto; }
.kprof-tree details, .kprof-tree .kprof-leaf { margin: 0; }
.kprof-tree summary { list-style: none; cursor: pointer; }
.kprof-tree summary::-webkit-details-marker { display: none; }
.kprof-tree .kprof-line { display: flex; gap: 10px; line-height: 18px; white-space: nowrap;
  width: max-content; min-width: 100%; }
.kprof-tree .kprof-line:hover { background: #f2f4f7; }
.kprof-tree .kt, .kprof-tree .ks { flex: 0 0 72px; text-align: right; }
.kprof-tree .kc { flex: 0 0 56px; text-align: right; }
.kprof-tree .kn { font-family: ui-monospace, monospace; }
.kprof-tree summary .kn::before { content: "\\25B8\\00A0"; color: #667085; }
.kprof-tree details[open] > summary .kn::before { content: "\\25BE\\00A0"; }
.kprof-tree .kprof-leaf .kn::before { content: "\\00A0\\00A0\\00A0"; }
.kprof-tree .kprof-head { font-weight: 600; border-bottom: 1px solid #d9dde5; }
.kprof-tree [data-kind="range"] > .kn, .kprof-tree [data-kind="range"] > summary .kn {
  font-weight: 600; }
.kprof-tree [data-kind="site"] > .kn, .kprof-tree [data-kind="site"] > summary .kn {
  color: #175cd3; }
.kprof-flame { position: relative; margin: 4px 0 14px; font-size: 11px; overflow: hidden; }
.kprof-flame .kprof-box { position: absolute; height: 17px; line-height: 17px; overflow: hidden;
  white-space: nowrap; text-overflow: ellipsis; text-indent: 3px; box-sizing: border-box;
  box-shadow: inset 0 0 0 1px #fff; font-family: ui-monospace, monospace;
  color: #101828; cursor: default; }
.kprof-flame .kprof-box[data-kind="root"] { background: #d0d5dd; }
.kprof-flame .kprof-box[data-kind="range"] { background: #fec84b; }
.kprof-flame .kprof-box[data-kind="site"] { background: #84caff; }
.kprof-flame .kprof-box[data-kind="kernel"] { background: #f97066; }
.kprof-flame .kprof-box.kprof-above { opacity: 0.55; }
.kprof-flame[data-zoomable] .kprof-box { cursor: zoom-in; }
</style>"""


def _title(node: TreeNode) -> str:
    where = f" ({node.site.location})" if node.kind == SITE_NODE and node.site else ""
    return (
        f"{node.name}{where}: {format_time(node.total_ns)}, {node.share:.1f} % of the device "
        f"time, {node.calls} call{'s' * (node.calls != 1)}"
    )


def _line(node: TreeNode, depth: int) -> str:
    indent = f' style="padding-left:{14 * depth}px"' if depth else ""
    title = f' title="{html.escape(node.site.location)}"' if node.site else ""
    return (
        f'<span class="kt">{format_time(node.total_ns)}</span>'
        f'<span class="ks">{node.share:.1f} %</span><span class="kc">{node.calls}</span>'
        f'<span class="kn"{indent}{title}>{html.escape(node.name)}</span>'
    )


def _tree(root: TreeNode, out: list[str]) -> None:
    """The tree as nested ``<details>``, depth first without recursion (a crafted file's
    stacks may be deeper than Python's recursion limit): each entry of ``todo`` is a node to
    write at its depth, or (``None``) the end of one, with the children past MAX_CHILDREN."""
    todo: list[tuple[TreeNode | None, int, list[TreeNode]]] = [(root, 0, [])]
    while todo:
        node, depth, rest = todo.pop()
        if node is None:
            if rest:
                ns, calls = sum(c.total_ns for c in rest), sum(c.calls for c in rest)
                share = sum(c.share for c in rest)
                out.append(
                    f'<div class="kprof-leaf kprof-line" data-kind="more" data-ns="{ns}" '
                    f'data-calls="{calls}"><span class="kt">{format_time(ns)}</span>'
                    f'<span class="ks">{share:.1f} %</span><span class="kc">{calls}</span>'
                    f'<span class="kn" style="padding-left:{14 * (depth + 1)}px">… {len(rest)} '
                    "more</span></div>"
                )
            out.append("</details>")
            continue
        attrs = f'data-kind="{node.kind}" data-ns="{node.total_ns}" data-calls="{node.calls}"'
        if not node.children:
            out.append(f'<div class="kprof-leaf kprof-line" {attrs}>{_line(node, depth)}</div>')
            continue
        opened = " open" if depth < OPEN_LEVELS else ""
        out.append(
            f'<details {attrs}{opened}><summary class="kprof-line">{_line(node, depth)}</summary>'
        )
        todo.append((None, depth, node.children[MAX_CHILDREN:]))
        todo.extend((child, depth + 1, []) for child in reversed(node.children[:MAX_CHILDREN]))


def _flame(root: TreeNode) -> str:
    """Boxes placed in percent of the graph's width; the root's level at the bottom."""
    boxes: list[tuple[int, float, float, TreeNode]] = []  # (level, left %, width %, node)
    todo = [(root, 0, 0.0)]
    while todo:
        node, level, left = todo.pop()
        width = node.share
        boxes.append((level, left, width, node))
        at = left
        for child in node.children:
            if child.share >= MIN_SHARE:
                todo.append((child, level + 1, at))
            at += child.share
    height = (max(b[0] for b in boxes) + 1) * LEVEL_PX
    out = [f'<div class="kprof-flame" style="height:{height}px">']
    for level, left, width, node in sorted(boxes, key=lambda b: (b[0], b[1])):
        place = f"left:{left:.4f}%;width:{width:.4f}%"
        out.append(
            f'<div class="kprof-box" data-kind="{node.kind}" data-ns="{node.total_ns}" '
            f'data-level="{level}" data-left="{left:.4f}" data-width="{width:.4f}" '
            f'style="{place};top:{height - (level + 1) * LEVEL_PX}px" '
            f'title="{html.escape(_title(node))}">{html.escape(node.name)}</div>'
        )
    out.append("</div>")
    return "".join(out)


def tree_html(p: ProfileData) -> str:
    """The profile's device time as a collapsible tree and a flame graph; empty when there is
    nothing to split (no device time, or neither ranges nor launch sites above the kernels)."""
    root = device_tree(p)
    if not root.total_ns or all(not c.children for c in root.children):
        return ""
    return root_html(root)


def root_html(root: TreeNode) -> str:
    """The tree under ``root`` (``kprof_core.data.tree.device_tree``) and its flame graph
    (``Profile.tree()`` in a notebook)."""
    if not root.total_ns:
        return "<p>No device work with a device time was recorded.</p>"
    out = [
        STYLE,
        '<h3 class="kprof-tree-title">Device time by range, line and kernel</h3>',
        '<div class="kprof-tree kprof-scroll"><div class="kprof-line kprof-head"><span class="kt">Time</span>'
        '<span class="ks">Share</span><span class="kc">Calls</span>'
        '<span class="kn">Range › line › kernel</span></div>',
    ]
    _tree(root, out)
    out.append("</div>")
    out.append(
        "<h3>Flame graph of device time</h3>"
        '<p class="note">Each box is as wide as its device time: ranges (yellow), lines of '
        "code (blue, outermost first), kernels and copies (red). Hover for times; in the page, "
        "click a box to zoom to it, the bottom one to show all.</p>"
    )
    out.append(_flame(root))
    return "\n".join(out)
