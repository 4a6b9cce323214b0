"""The device-time tree (ranges, launch sites, kernels) as data: where each launch lands, its
totals against the summary's; built from tables with known times (no device needed)."""

from __future__ import annotations

import inspect
from array import array
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import kprof
from kprof_core.data.records import (
    HOST_TIMED,
    KERNEL,
    PLACED,
    RANGE,
    UNRESOLVED,
    QueueRecord,
    ThreadRecord,
)
from kprof_core.data.sites import Site
from kprof_core.data.tree import TreeNode, device_tree
from kprof_core.low_level import native

HERE = str(Path(__file__))

T0 = 1_000_000
X1, Y2 = Site("/src/x.py", 1, "f"), Site("/src/y.py", 2, "g")


def built() -> kprof.Profile:
    """Two threads; thread 0 has ranges "step" (twice) with "inner" nested in the second,
    thread 1 none. Kernels a, b, copies none; one host-timed, one unresolved, one range row."""
    p = kprof.Profile(backends=["testdev"])
    p.names = ["a", "b", "step", "inner"]
    p.queues = [QueueRecord("testdev", "dev", "queue 1", "testdev:0")]
    p.threads = [ThreadRecord(1, "MainThread"), ThreadRecord(2, "helper")]
    p.sites = [X1, Y2]
    rows = [
        # (name, thread, launch at, duration, site, flags, kind)
        (0, 0, 100, 1000, 0, PLACED, KERNEL),  # step > x.py:1 > a
        (1, 0, 200, 3000, 1, PLACED, KERNEL),  # step > y.py:2 > b
        (0, 0, 1100, 500, 0, PLACED, KERNEL),  # step (2nd) > x.py:1 > a
        (0, 0, 1300, 70, 1, PLACED, KERNEL),  # step > inner > y.py:2 > a
        (1, 0, 1400, 9, 1, HOST_TIMED, KERNEL),  # step > inner > y.py:2 > b *
        (0, 0, 1500, 0, 1, UNRESOLVED, KERNEL),  # left out: no device time
        (2, 0, 1000, 800, 1, PLACED, RANGE),  # a range's device row: not counted again
        (0, 1, 150, 20, -1, PLACED, KERNEL),  # no range, no site > a
        (1, 0, 5000, 4, 0, PLACED, KERNEL),  # after every range: x.py:1 > b
    ]
    for name, thread, at, dur, site, flags, kind in rows:
        s = T0 + at
        p.table.append(name, kind, 0, thread, s, s + 10, s + 20, dur, -1, flags, site)
    p.host.append(2, 0, 0, T0 + 50, T0 + 900, 0)  # step
    p.host.append(3, 0, 0, T0 + 1250, T0 + 1450, 1)  # inner, inside the 2nd step
    p.host.append(2, 0, 0, T0 + 1000, T0 + 1600, 0)  # step
    p.host.append(2, 0, 1, T0 + 5000, T0 + 6000, 0)  # a range of thread 1 around nothing of it
    p.start_ns, p.end_ns = T0, T0 + 10_000
    return p


def shape(node: TreeNode) -> list[object]:
    return [node.kind, node.name, node.total_ns, node.calls, [shape(c) for c in node.children]]


def test_launches_land_under_their_ranges_then_sites_then_names() -> None:
    root = device_tree(built())
    assert shape(root) == [
        "root", "all device work", 4603, 7, [
            ["range", "step", 4579, 5, [
                ["site", "y.py:2 g", 3000, 1, [["kernel", "b", 3000, 1, []]]],
                ["site", "x.py:1 f", 1500, 2, [["kernel", "a", 1500, 2, []]]],
                ["range", "inner", 79, 2, [
                    ["site", "y.py:2 g", 79, 2, [
                        ["kernel", "a", 70, 1, []], ["kernel", "b *", 9, 1, []],
                    ]],
                ]],
            ]],
            ["kernel", "a", 20, 1, []],
            ["site", "x.py:1 f", 4, 1, [["kernel", "b", 4, 1, []]]],
        ],
    ]  # fmt: skip
    assert root.children[0].children[0].site == Y2
    assert root.share == 100.0
    assert root.children[0].share == 100.0 * 4579 / 4603


def test_the_trees_totals_are_the_summarys() -> None:
    p = built()
    root = device_tree(p)
    device = p.summary().device
    assert root.total_ns == sum(r.total_ns for r in device)
    assert root.calls == sum(r.calls for r in device)
    leaves: dict[str, list[int]] = {}
    for node in root.walk():
        assert node.children == [] or node.total_ns == sum(c.total_ns for c in node.children)
        if node.kind == "kernel":
            got = leaves.setdefault(node.name, [0, 0])
            got[0] += node.total_ns
            got[1] += node.calls
    assert leaves == {r.label: [r.total_ns, r.calls] for r in device}


def test_an_empty_profile_is_a_bare_root() -> None:
    root = device_tree(kprof.Profile())
    assert shape(root) == ["root", "all device work", 0, 0, []] and root.share == 0.0


def test_a_launch_stack_is_a_chain_of_site_nodes_outermost_first() -> None:

    p = built()
    main, loop = Site("/src/main.py", 9, "main"), Site("/src/loop.py", 4, "run")
    p.stacks = ((main, loop, X1), (main, Y2))
    # Rows 0 and 2 (a under x.py:1) came through main > run; row 1 (b) from main directly.
    p.table.stack = array("q", [0, 1, 0, -1, -1, -1, -1, -1, -1])
    step = device_tree(p).children[0]
    assert shape(step)[:4] == ["range", "step", 4579, 5]
    [outer, inner] = step.children
    assert shape(outer) == [
        "site", "main.py:9 main", 4500, 3, [
            ["site", "y.py:2 g", 3000, 1, [["kernel", "b", 3000, 1, []]]],
            ["site", "loop.py:4 run", 1500, 2, [
                ["site", "x.py:1 f", 1500, 2, [["kernel", "a", 1500, 2, []]]],
            ]],
        ],
    ]  # fmt: skip
    assert inner.name == "inner" and outer.site == main


def test_the_html_page_and_the_notebook_show_the_tree(tmp_path: Path) -> None:
    import re

    p = built()
    nb = p._repr_html_()
    assert nb is not None
    page = tmp_path / "t.html"
    p.export_html(page)
    for text in (nb, page.read_text()):
        lines = re.findall(r'data-kind="(\w+)" data-ns="(\d+)" data-calls="(\d+)"', text)
        nodes = [(n.kind, str(n.total_ns), str(n.calls)) for n in device_tree(p).walk()]
        assert lines == nodes, "the tree lists every node, parents first"
        assert text.count('class="kprof-box"') == 11  # the nodes of at least 0.1 %
        assert '<h3 class="kprof-tree-title">Device time by range, line and kernel</h3>' in text
    # Nothing to split (no ranges, no sites): no tree, the device table says it all.
    plain = built()
    plain.host = type(plain.host)()
    plain.table.site = array("q", [-1] * len(plain.table))
    assert "kprof-tree" not in (plain._repr_html_() or "")


@pytest.fixture(params=["compiled", "pure"])
def path(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "compiled" and native.compiled() is None:
        pytest.skip("the compiled recorder is not built here")
    native.use_compiled(request.param == "compiled")
    try:
        yield request.param
    finally:
        native.use_compiled(True)


def inner(q: Any) -> None:
    q.launch("k", 50)  # inner's launch


def outer(q: Any) -> None:
    inner(q)  # first call
    inner(q)  # second call


def test_a_captured_stack_is_a_chain_from_the_range_to_the_kernel(
    path: str, testbackends: Any, tdq: Callable[..., Any]
) -> None:
    q = tdq()
    with kprof.profile(stacks=True) as p, q:
        with kprof.range("step"):
            outer(q)  # the test's call
    root = device_tree(p)
    assert root.total_ns == sum(r.total_ns for r in p.summary().device) and root.calls == 2
    [step] = root.children
    # Down the frames outside this file (pytest's) to this test's line.
    node = step
    while not (node.site and node.site.file == HERE):
        [node] = node.children
    here = "test_tree_views.py"

    def at(fn: Any, text: str) -> str:
        lines, first = inspect.getsourcelines(fn)
        return f"{here}:{first + next(i for i, s in enumerate(lines) if text in s)}"

    test = test_a_captured_stack_is_a_chain_from_the_range_to_the_kernel
    assert node.name == at(test, "the test's call") + f" {test.__name__}"
    launch = f"{at(inner, 'launch')} inner"
    got = [
        (c.name, [(g.name, [(k.kind, k.name, k.calls) for k in g.children]) for g in c.children])
        for c in node.children
    ]
    assert sorted(got) == [
        (f"{at(outer, 'first call')} outer", [(launch, [("kernel", "k", 1)])]),
        (f"{at(outer, 'second call')} outer", [(launch, [("kernel", "k", 1)])]),
    ]


def test_the_tree_in_a_notebook_is_the_html_tree() -> None:
    p = built()
    text = p.tree()._repr_html_()
    assert text.startswith("<style>") and '<details data-kind="root" data-ns="4603"' in text
    assert text.count('class="kprof-box"') == 11
    assert kprof.Profile().tree()._repr_html_() == (
        "<p>No device work with a device time was recorded.</p>"
    )
