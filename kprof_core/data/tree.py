"""Device time as a tree: ranges, then launch sites (outermost frame first), then kernels.

What the HTML page's collapsible tree and flame graph, and the notebook view, are drawn from:
each kernel or copy with a device time is put under the ``kprof.range`` blocks its launch ran
inside (on its thread, innermost last), then under the frames of its launch (``frames_of``:
outermost first; the launch site alone when no stack was recorded), then under its name.
Ranges' own device rows are not counted: their time is the work's, counted already.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import and_, eq, lt, ne, not_, sub

from kprof_core.data.records import (
    APPROXIMATE,
    HOST_TIMED,
    MARKS,
    RANGE,
    UNRESOLVED,
    HostTable,
)
from kprof_core.data.sites import Site
from kprof_core.data.stacks import Records, frames_of

#: Kinds of nodes, from the root down.
ROOT, RANGE_NODE, SITE_NODE, KERNEL_NODE = "root", "range", "site", "kernel"


@dataclass
class TreeNode:
    """One node of the device-time tree (``kprof_core.data.tree.device_tree``).

    ``kind``: ``"root"``, ``"range"`` (a ``kprof.range`` name), ``"site"`` (a frame of the
    launches' Python stack, ``site`` set) or ``"kernel"`` (a kernel's or copy's name, as the
    summary labels it: ``*`` host-timed, ``~`` approximate); ``name``: what a view shows;
    ``total_ns``: device time of the kernels and copies under it; ``calls``: how many;
    ``share``: ``total_ns`` in percent of the root's; ``children``: largest total first.
    """

    kind: str
    name: str
    site: Site | None = None
    total_ns: int = 0
    calls: int = 0
    share: float = 0.0
    children: list[TreeNode] = field(default_factory=list)

    def walk(self) -> list[TreeNode]:
        """This node and every node under it, depth first, parents before children."""
        out, todo = [], [self]
        while todo:
            node = todo.pop()
            out.append(node)
            todo.extend(reversed(node.children))
        return out


#: Per thread: its host ranges' starts sorted (outer before inner at equal starts), their
#: ends, each one's enclosing range (-1: none), path of names (outermost first) and host row.
Ranges = tuple[list[int], list[int], list[int], list[tuple[str, ...]], list[int]]
NO_RANGES: Ranges = ([], [], [], [], [])


def _ranges(h: HostTable, names: Sequence[str]) -> dict[int, Ranges]:
    by_thread: dict[int, list[tuple[int, int, int]]] = {}
    for i, (kind, thread, s, e) in enumerate(zip(h.kind, h.thread, h.start, h.end)):
        if kind == HostTable.RANGE:
            by_thread.setdefault(thread, []).append((s, -e, i))
    out = {}
    for thread, ranges in by_thread.items():
        ranges.sort()
        starts: list[int] = []
        ends: list[int] = []
        parents: list[int] = []
        paths: list[tuple[str, ...]] = []
        rows: list[int] = []
        stack: list[int] = []  # the enclosing ranges, innermost last
        for j, (s, neg_e, i) in enumerate(ranges):
            e = -neg_e
            # Sorted by start: the top encloses this one when it ends no earlier.
            while stack and e > ends[stack[-1]]:
                stack.pop()
            parent = stack[-1] if stack else -1
            starts.append(s)
            ends.append(e)
            parents.append(parent)
            paths.append((*(paths[parent] if parent >= 0 else ()), names[h.name[i]]))
            rows.append(i)
            stack.append(j)
        out[thread] = (starts, ends, parents, paths, rows)
    return out


def _enclosing(ranges: Ranges, s: int, e: int) -> tuple[str, ...]:
    """The names of the ranges around ``[s, e]``, outermost first."""
    starts, ends, parents, paths, _rows = ranges
    j = bisect_right(starts, s) - 1
    # The ranges of one thread nest: one around [s, e] starts no later than range j, the last
    # to start before s, so it is j or encloses j; up j's parents to the first that ends late
    # enough (a few steps: the nesting depth, however many ranges there were).
    while j >= 0 and ends[j] < e:
        j = parents[j]
    return paths[j] if j >= 0 else ()


def device_tree(data: Records) -> TreeNode:
    """The device-time tree of a profile (see the module's docstring). Its root's
    ``total_ns`` and ``calls`` equal the per-name summary's device totals."""
    t, names = data.table, data.names
    ranges = _ranges(data.host, names)
    # Rows grouped by what decides their place (ranges, launch site, name): frames are
    # resolved once per group, not per row.
    # key -> [a row of the group, calls, device time]
    groups: dict[tuple[tuple[str, ...], int, int, int, int], list[int]] = {}
    stack_col: Iterable[int] = t.stack or repeat(-1)  # empty: no row has a stack
    for i, (nid, kind, flags, thread, ls, le, dur, site, stack) in enumerate(
        zip(
            t.name,
            t.kind,
            t.flags,
            t.thread,
            t.launch_start,
            t.launch_end,
            t.duration,
            t.site,
            stack_col,
        )
    ):
        if kind == RANGE or flags & UNRESOLVED:
            continue
        path = _enclosing(ranges.get(thread, NO_RANGES), ls, le)
        key = (path, stack, site, nid, flags & MARKS)
        group = groups.get(key)
        if group is None:
            groups[key] = [i, 1, dur]
        else:
            group[1] += 1
            group[2] += dur
    root = TreeNode(ROOT, "all device work")
    # (parent's id, kind, name, site) -> child: linear in a stack's depth (a path tuple rebuilt
    # at every level was quadratic: a crafted file 8,000 frames deep took 17 s).
    index: dict[tuple[int, str, str, Site | None], TreeNode] = {}
    for (path, _stack, _site, nid, marks), (row, calls, total) in groups.items():
        node = root
        steps: list[tuple[str, str, Site | None]] = [(RANGE_NODE, n, None) for n in path]
        steps += [(SITE_NODE, f.label, f) for f in frames_of(data, "device", row)]
        mark = " *" if marks & HOST_TIMED else " ~" if marks & APPROXIMATE else ""
        steps.append((KERNEL_NODE, names[nid] + mark, None))
        root.total_ns += total
        root.calls += calls
        for kind, name, site in steps:
            at = (id(node), kind, name, site)
            child = index.get(at)
            if child is None:
                child = index[at] = TreeNode(kind, name, site)
                node.children.append(child)
            child.total_ns += total
            child.calls += calls
            node = child
    for node in root.walk():
        node.share = 100.0 * node.total_ns / root.total_ns if root.total_ns else 0.0
        node.children.sort(key=lambda c: (-c.total_ns, c.kind, c.name))
    return root


def range_work(data: Records) -> dict[tuple[int, int], list[int]]:
    """The device time of each ``kprof.range`` instance (:func:`range_instances`), grouped by
    ``(name id, marks)``, one value per instance.

    One number per thing: the summary's device ranges, the diff, the HTML page and the
    notebook all take a range's device time from here; the span on the device (first work's
    start to last work's end, from the backends' timestamps) is a column of its own."""
    out: dict[tuple[int, int], list[int]] = {}
    names = data.host.name
    for row, marks, ns in range_instances(data):
        out.setdefault((names[row], marks), []).append(ns)
    return out


def range_instances(data: Records) -> list[tuple[int, int, int]]:
    """``(host row, marks, device ns)`` per ``kprof.range`` instance: the summed device time of
    the kernels and copies launched inside it on its thread, nested ranges' work included (what
    the tree's range nodes add up); marks: the ``HOST_TIMED`` and ``APPROXIMATE`` bits of any
    of its work. Every instance of a range name that has device work in some instance (one
    without any counts 0), in host-table order."""
    h, t = data.host, data.table
    nest = _ranges(h, data.names)  # the nesting the tree puts launches under
    if not nest:
        return []
    sums = {thread: [0] * len(n[0]) for thread, n in nest.items()}
    marks = {thread: [0] * len(n[0]) for thread, n in nest.items()}
    counts = {thread: [0] * len(n[0]) for thread, n in nest.items()}
    worked: set[int] = set()  # names with device work in some instance
    # Work rows (kernels and copies resolved), and their thread, column-wise (C-level maps).
    n_rows = len(t)
    usable = bytes(
        map(and_, map(ne, t.kind, repeat(RANGE)), map(not_, map(and_, t.flags, repeat(UNRESOLVED))))
    )
    one_thread = len(nest) == 1 and t.thread.count(next(iter(nest))) == n_rows
    for thread, (starts, ends, parents, _paths, _rows) in nest.items():
        m = usable if one_thread else bytes(map(and_, usable, map(eq, t.thread, repeat(thread))))
        ls = array("q", compress(t.launch_start, m))
        le = array("q", compress(t.launch_end, m))
        dur = array("q", compress(t.duration, m))
        # The last range to start at or before each launch; most enclose it (their end is no
        # earlier than the launch's), the others are walked up their parents.
        js = array("q", map(sub, map(bisect_right, repeat(starts), ls), repeat(1)))
        tail = [*ends, 1 << 62]  # js of -1 read the sentinel: no range, never walked
        for k in compress(range(len(js)), map(lt, map(tail.__getitem__, js), le)):
            j = js[k]
            while j >= 0 and ends[j] < le[k]:
                j = parents[j]
            js[k] = j
        acc, cnt = sums[thread], counts[thread]
        for j, d in zip(js, dur):
            if j >= 0:
                acc[j] += d
                cnt[j] += 1
        flagged = array("q", map(and_, compress(t.flags, m), repeat(MARKS)))
        if any(flagged):
            mk = marks[thread]
            for j, f in zip(js, flagged):
                if j >= 0:
                    mk[j] |= f
    found: list[tuple[int, int, int]] = []
    for thread, (_starts, _ends, parents, _paths, rows) in nest.items():
        acc, mk, cnt = sums[thread], marks[thread], counts[thread]
        for j in range(len(rows) - 1, -1, -1):  # children come after their parents
            p = parents[j]
            if p >= 0:
                acc[p] += acc[j]
                mk[p] |= mk[j]
                cnt[p] += cnt[j]
            if cnt[j]:
                worked.add(h.name[rows[j]])
        found += [(i, mk[j], acc[j]) for j, i in enumerate(rows)]
    return sorted(x for x in found if h.name[x[0]] in worked)
