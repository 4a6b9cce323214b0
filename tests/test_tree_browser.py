"""The HTML page's device-time tree and flame graph, and the timeline's launch sites, in a real
headless Chromium: a probe script clicks tree nodes open and closed and reads what shows, the
flame graph's boxes' widths against their device time, and a launch's tooltip.

Chromium as in ``test_html_browser.py`` (skips without it unless ``KPROF_REQUIRE_BROWSER=1``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from test_html_browser import browse, chromium_fixture  # noqa: F401 (the fixture)
from test_tree_views import built

import kprof
from kprof_core.data.tree import device_tree
from kprof_core.low_level import native

HERE = str(Path(__file__))

PROBE = """
<script>
(function () {
  var out = {};
  function line(el) {  // what a tree line says: [time, share, calls, name]
    return Array.prototype.map.call(el.querySelectorAll(":scope > span, :scope > summary > span"),
                                    function (s) { return s.textContent; });
  }
  function shown() {  // the tree's lines a user sees, each as its name indented by depth
    var lines = document.querySelectorAll(".kprof-tree .kprof-line:not(.kprof-head)");
    return Array.prototype.filter.call(lines, function (el) {
      // (A closed <details> hides its content with content-visibility: the boxes stay.)
      return el.checkVisibility();
    }).map(function (el) {
      var name = el.querySelector(".kn");
      return (parseInt(name.style.paddingLeft || "0", 10) / 14) + " " + name.textContent;
    });
  }
  function node(kind, name, within) {  // the details element of a node by its name
    var all = (within || document).querySelectorAll('.kprof-tree details[data-kind="' + kind + '"]');
    for (var i = 0; i < all.length; i++) {
      if (all[i].querySelector(":scope > summary .kn").textContent === name) return all[i];
    }
    return null;
  }
  out.root = line(document.querySelector('.kprof-tree details[data-kind="root"]'));
  out.before = shown();
  var step = node("range", "step");
  node("site", "y.py:2 g", step).querySelector(":scope > summary").click();
  out.opened = shown();
  step.querySelector(":scope > summary").click();
  out.closed = shown();
  step.querySelector(":scope > summary").click();
  out.reopened = shown();
  // The flame graph: each box's pixel width and left edge, with its device time.
  var graph = document.querySelector(".kprof-flame").getBoundingClientRect();
  out.graph = graph.width;
  out.boxes = Array.prototype.map.call(document.querySelectorAll(".kprof-flame .kprof-box"),
    function (b) {
      var r = b.getBoundingClientRect();
      return [b.getAttribute("data-kind"), b.textContent, +b.getAttribute("data-ns"),
              r.width, r.left - graph.left, r.bottom - graph.top, b.title];
    });
  // Click "step": the graph zooms to it; click the root: all again.
  function visible() {
    return Array.prototype.filter.call(document.querySelectorAll(".kprof-flame .kprof-box"),
      function (b) { return b.style.display !== "none"; }).map(function (b) {
        var r = b.getBoundingClientRect();
        return [b.textContent, +b.getAttribute("data-ns"), r.width, r.left - graph.left,
                b.classList.contains("kprof-above")];
      });
  }
  var boxEls = document.querySelectorAll(".kprof-flame .kprof-box");
  function box(name) {
    return Array.prototype.filter.call(boxEls, function (b) { return b.textContent === name; })[0];
  }
  box("step").click();
  out.zoomed = visible();
  out.zoom = document.querySelector(".kprof-flame").getAttribute("data-zoom");
  box("all device work").click();
  out.unzoomed = visible();
  var el = document.createElement("pre");
  el.id = "kprof-probe";
  el.textContent = JSON.stringify(out);
  document.body.appendChild(el);
})();
</script>
"""


def probe(chromium: str, page: Path, tmp: Path, script: str) -> Any:
    page.write_text(page.read_text().replace("</body>", script + "</body>"))
    r = browse(chromium, page, tmp, "--dump-dom")
    m = re.search(r'<pre id="kprof-probe">(.*?)</pre>', r.stdout, re.S)
    assert m, r.stdout[-3000:]
    errors = re.search(r'data-errors="(\d+)"', r.stdout)
    assert errors and errors.group(1) == "0", r.stdout[-3000:]
    return json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&"))


def test_the_tree_opens_and_closes_and_the_flame_graph_follows_device_time(
    chromium: str, tmp_path: Path
) -> None:
    p = built()
    page = tmp_path / "tree.html"
    p.export_html(page)
    out = probe(chromium, page, tmp_path, PROBE)
    # The root line: the summary's device total (4603 ns over 7 calls), all of it.
    assert out["root"] == ["4.6 µs", "100.0 %", "7", "all device work"]
    assert sum(r.total_ns for r in p.summary().device) == 4603
    # Open at first: the root and its children; a site's kernels stay folded.
    assert out["before"] == [
        "0 all device work", "1 step", "2 y.py:2 g", "2 x.py:1 f", "2 inner", "1 a",
        "1 x.py:1 f", "2 b",
    ]  # fmt: skip
    assert out["opened"] == [
        "0 all device work", "1 step", "2 y.py:2 g", "3 b", "2 x.py:1 f", "2 inner", "1 a",
        "1 x.py:1 f", "2 b",
    ]  # fmt: skip
    assert out["closed"] == ["0 all device work", "1 step", "1 a", "1 x.py:1 f", "2 b"]
    assert out["reopened"] == out["opened"], "a node reopens as it was, its open child too"
    # Every box drawn is as wide as its device time, in the root's pixels per ns.
    boxes = out["boxes"]
    root = next(b for b in boxes if b[0] == "root")
    assert root[3] == pytest.approx(out["graph"], abs=1)
    per_ns = root[3] / root[2]
    for kind, name, ns, width, _left, _bottom, _title in boxes:
        assert width == pytest.approx(ns * per_ns, abs=1.0), (kind, name)
    # The tree's nodes of at least 0.1 % are the boxes; the 4 ns ones (0.09 %) are not drawn.
    tree = [n for n in device_tree(p).walk() if n.share >= 0.1]
    assert sorted((b[0], b[1], b[2]) for b in boxes) == sorted(
        (n.kind, n.name, n.total_ns) for n in tree
    )
    # Children sit on their parent, side by side from its left edge, largest first.
    by_name = {(b[1], b[2]): b for b in boxes}
    step, y2, x1 = by_name[("step", 4579)], by_name[("y.py:2 g", 3000)], by_name[("x.py:1 f", 1500)]
    assert y2[4] == pytest.approx(step[4], abs=1) and x1[4] == pytest.approx(y2[4] + y2[3], abs=1)
    assert step[5] - y2[5] == pytest.approx(18, abs=0.5), "one level above its parent"
    assert y2[6] == "y.py:2 g (/src/y.py:2): 3 µs, 65.2 % of the device time, 1 call"
    # Zoomed to "step": it spans the graph, the root below it dimmed, its descendants in
    # step's pixels per ns; the root's other children (a, 20 ns) hidden.
    assert out["zoom"] == "step"
    zoomed = {(name, ns): (width, left, above) for name, ns, width, left, above in out["zoomed"]}
    assert set(zoomed) == {
        ("all device work", 4603), ("step", 4579), ("y.py:2 g", 3000), ("b", 3000),
        ("x.py:1 f", 1500), ("a", 1500), ("inner", 79), ("y.py:2 g", 79), ("a", 70),
        ("b *", 9),
    }  # fmt: skip
    assert zoomed[("all device work", 4603)] == (pytest.approx(out["graph"], abs=1), 0, True)
    assert zoomed[("step", 4579)] == (pytest.approx(out["graph"], abs=1), 0, False)
    step_per_ns = out["graph"] / 4579
    for (name, ns), (width, _left, _above) in zoomed.items():
        if name not in ("all device work", "step"):
            assert width == pytest.approx(ns * step_per_ns, abs=1.0), name
    assert zoomed[("x.py:1 f", 1500)][1] == pytest.approx(3000 * step_per_ns, abs=1)
    assert sorted(b[:4] for b in out["unzoomed"]) == sorted(b[1:5] for b in boxes)


SITE_PROBE = """
<script>
(function () {
  var tl = window.kprofTimeline, canvas = document.getElementById("kprof-canvas");
  var tip = document.getElementById("kprof-tip"), r = canvas.getBoundingClientRect();
  var v = tl.view(), px = r.width / (v[1] - v[0]), out = {tips: {}};
  tl.rows.forEach(function (row) {
    var tr = row.tr;
    for (var i = 0; i < tr.s.length; i++) {
      if (tr.k[i] !== 1) continue;  // kernels
      var x = Math.round(r.left + (tr.s[i] + tr.d[i] / 2 - v[0]) * px);
      var y = Math.round(r.top + row.y + tl.PAD + tr.z[i] * tl.ROW + tl.ROW / 2);
      window.dispatchEvent(new MouseEvent("mousemove", {clientX: x, clientY: y}));
      var name = row.prof.names[tr.n[i]];
      out.tips[name] = (out.tips[name] || []).concat([tip.textContent]);
    }
  });
  var el = document.createElement("pre");
  el.id = "kprof-probe";
  el.textContent = JSON.stringify(out);
  document.body.appendChild(el);
})();
</script>
"""


@pytest.fixture(params=["compiled", "pure"])
def path(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "compiled" and native.compiled() is None:
        pytest.skip("the compiled recorder is not built here")
    native.use_compiled(request.param == "compiled")
    try:
        yield request.param
    finally:
        native.use_compiled(True)


def launch_twice(q: Any) -> None:
    q.launch("long_kernel", 400)  # first line
    q.launch("long_kernel", 200)  # second line


def test_a_captured_profiles_tree_and_tooltips_show_its_lines(
    path: str, chromium: str, testbackends: Any, tdq: Callable[..., Any], tmp_path: Path
) -> None:
    import inspect

    q = tdq()
    with kprof.profile(sites=True) as p, q:
        with kprof.range("step"):
            launch_twice(q)
        q.launch("short_kernel", 300)  # outside any range
    src, first = inspect.getsourcelines(launch_twice)
    l1 = first + next(i for i, s in enumerate(src) if "first line" in s)
    l2 = first + next(i for i, s in enumerate(src) if "second line" in s)
    root = device_tree(p)
    assert root.total_ns == sum(r.total_ns for r in p.summary().device)
    [step, outside] = sorted(root.children, key=lambda n: n.kind)
    # (Which line took longer on the device is the test device's wall clock: not asserted.)
    assert step.kind == "range" and sorted(c.name for c in step.children) == [
        f"test_tree_browser.py:{line} launch_twice" for line in (l1, l2)
    ]
    assert outside.site is not None and outside.site.file == HERE
    page = tmp_path / "captured.html"
    p.export_html(page)
    text = page.read_text()
    assert f'title="{HERE}:{l1}"' in text, "the tree's site names its file in full"
    out = probe(chromium, page, tmp_path, SITE_PROBE)
    tips = out["tips"]
    assert [t[t.index("site ") :] for t in tips["long_kernel"]] == [
        f"site test_tree_browser.py:{line} launch_twice {HERE}:{line}" for line in (l1, l2)
    ]
    [short] = tips["short_kernel"]
    assert f"site test_tree_browser.py:{outside.site.line} " in short
