"""The device-time tree as text (``Profile.tree()``, ``kprof show --tree``): one line per
node of ``kprof_core.data.tree.device_tree``, with its device time, share and calls, and the
branches drawn as a file tree's are."""

from __future__ import annotations

from kprof_core.data.timefmt import format_time
from kprof_core.data.tree import KERNEL_NODE, RANGE_NODE, TreeNode

TITLE = "Device time as a tree (ranges > lines of code, outermost first > kernels):"
HEAD = [" Device time   Share  Calls  Where", " ───────────  ──────  ─────  ─────"]


def _name(node: TreeNode) -> str:
    if node.kind == RANGE_NODE:
        return f"range {node.name}"
    if node.kind == KERNEL_NODE:
        return f"kernel {node.name}"
    return node.name


def tree_lines(root: TreeNode, min_share: float = 0.0) -> list[str]:
    """The tree under ``root`` as lines (not escaped: ``terminal.lines`` does), each node's
    children largest first; children under ``min_share`` percent of the root's device time
    are left out, counted on a line."""
    if not root.children:
        return [TITLE, " No device work with a device time was recorded."]
    out = [TITLE, *HEAD]
    # Depth first without recursion (stacks may be 256 frames deep): (node or a count of
    # children left out, its branch, the indent of its children).
    todo: list[tuple[TreeNode | int, str, str]] = [(root, "", "")]
    while todo:
        node, branch, indent = todo.pop()
        if isinstance(node, int):
            out.append(f" {'':>11}  {'':>6}  {'':>5}  {branch}({node} more under {min_share:g}%)")
            continue
        out.append(
            f" {format_time(node.total_ns):>11}  {node.share:>5.1f}%  {node.calls:>5}  "
            f"{branch}{_name(node)}"
        )
        shown: list[TreeNode | int] = [c for c in node.children if c.share >= min_share]
        if len(shown) < len(node.children):
            shown.append(len(node.children) - len(shown))
        for k in range(len(shown) - 1, -1, -1):
            last = k == len(shown) - 1
            todo.append(
                (shown[k], indent + ("└─ " if last else "├─ "), indent + ("   " if last else "│  "))
            )
    return out
