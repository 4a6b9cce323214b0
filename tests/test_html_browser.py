"""The HTML timeline: a self-contained file whose data matches the timeline model, rendered in
a real headless Chromium without script errors (rows checked in the DOM, a screenshot saved).

Chromium comes from Debian's ``chromium`` package (``apt-get install -y chromium``); without
it the browser tests skip, unless ``KPROF_REQUIRE_BROWSER=1`` (set by CI) makes them fail.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import struct
import subprocess
import threading
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from tracecheck import synthetic

import kprof
from kprof_core.renderers.html import write_html
from kprof_core.renderers.timeline import Timeline, thread_title
from kprof_core.result import Profile

DATA = re.compile(r'<script type="application/json" id="kprof-data">(.*?)</script>', re.S)


def embedded_data(text: str) -> Any:
    m = DATA.search(text)
    assert m, "the page embeds its data"
    return json.loads(m.group(1))


def expected_rows(p: Profile) -> list[str]:
    tl = Timeline(p)
    out = []
    for proc in tl.processes:
        for tr in proc.tracks:
            name = thread_title(p.threads[tr.thread], tr.name) if tr.kind == "thread" else tr.name
            if tr.kind == "thread" and tr.lane:
                name += f" (overlap {tr.lane})"
            out.append(name)
    return out


# -- the file --------------------------------------------------------------------------------------


def test_the_file_is_self_contained_and_its_data_matches_the_timeline(tmp_path: Path) -> None:
    p = synthetic(300, threads=2, queues_per_thread=2, host_timed_every=9, unresolved_every=11)
    p.names[1] = "evil</script><b>kernel"
    path = tmp_path / "t.html"
    p.export_html(path)
    text = path.read_text()
    assert "<script src" not in text and "<link" not in text
    assert "http://" not in text and "https://" not in text, "nothing is fetched from a network"
    assert text.count("</script>") == 3, "a name cannot close the data's script element"
    data = embedded_data(text)
    (prof,) = data["profiles"]
    assert prof["names"][1] == "evil</script><b>kernel"
    tracks = [tr for proc in prof["processes"] for tr in proc["tracks"]]
    assert [tr["name"] for tr in tracks] == expected_rows(p)
    n_items = 0
    for tr in tracks:
        n = len(tr["s"])
        n_items += n
        assert all(len(tr[c]) == n for c in ("d", "n", "k", "z"))
        assert tr["s"] == sorted(tr["s"]), "items are sorted by start, for the binary search"
        assert tr["md"] == max(tr["d"], default=0)
        assert max(tr["z"], default=0) + 1 == tr["depth"]
        assert min(tr["s"], default=0) >= 0 and min(tr["d"], default=0) >= 0
    resolved = sum(1 for f in p.table.flags if not f & 2)
    assert n_items == len(p.table) + resolved + len(p.host)
    assert "Host-side activity" in text and "Device-side activity" in text
    unresolved = len(p.table) - resolved
    assert unresolved > 1 and f"<p>{unresolved} device records could not be resolved" in text


def test_several_profiles_in_one_page(tmp_path: Path) -> None:
    a, b = synthetic(20, seed=1), synthetic(20, seed=2)
    b.meta["clock_offset_ns"] = 1000
    path = tmp_path / "m.html"
    write_html(path, [a, b], labels=["rank 0", "rank 1"])
    data = embedded_data(path.read_text())
    assert [proc["name"] for prof in data["profiles"] for proc in prof["processes"]] == [
        "rank 0",
        "rank 0: testdev synth 0",
        "rank 1",
        "rank 1: testdev synth 0",
    ]
    assert "<h2>rank 1</h2>" in path.read_text()


# -- in a browser ------------------------------------------------------------------------------------


@pytest.fixture(scope="module", name="chromium")
def chromium_fixture() -> str:
    """The path of Chromium (skips without it, or fails if KPROF_REQUIRE_BROWSER is set)."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    if os.environ.get("KPROF_REQUIRE_BROWSER"):
        pytest.fail(
            "KPROF_REQUIRE_BROWSER is set but chromium is not installed "
            "(apt-get install -y --no-install-recommends chromium)"
        )
    pytest.skip("chromium is not installed (apt-get install -y --no-install-recommends chromium)")


def browse(
    chromium: str, page: Path, tmp: Path, *args: str, size: tuple[int, int] = (1400, 900)
) -> subprocess.CompletedProcess[str]:
    cmd = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tmp / 'chromium-profile'}",
        "--enable-logging=stderr",
        "--v=0",
        f"--window-size={size[0]},{size[1]}",
        *args,
        page.as_uri(),
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    return r


class _Dom(HTMLParser):
    """The status element's attributes and the row/process labels of the rendered page."""

    def __init__(self) -> None:
        super().__init__()
        self.status: dict[str, str | None] = {}
        self.rows: list[str] = []
        self.procs: list[str] = []
        self._into: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id") == "kprof-status":
            self.status = a
        cls = (a.get("class") or "").split()
        self._into = (
            self.rows if "kprof-row" in cls else self.procs if "kprof-proc" in cls else None
        )

    def handle_data(self, data: str) -> None:
        if self._into is not None:
            self._into.append(data)
            self._into = None


def rendered(chromium: str, page: Path, tmp: Path) -> _Dom:
    dom = _Dom()
    dom.feed(browse(chromium, page, tmp, "--dump-dom").stdout)
    return dom


def screenshot(chromium: str, page: Path, tmp: Path) -> Path:
    png = tmp / (page.stem + ".png")
    browse(chromium, page, tmp, f"--screenshot={png}")
    head = png.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", head[16:24]) == (1400, 900)
    artifacts = os.environ.get("KPROF_ARTIFACTS")
    if artifacts:
        Path(artifacts).mkdir(parents=True, exist_ok=True)
        shutil.copy(png, Path(artifacts) / png.name)
    return png


def test_a_real_profile_renders_its_rows_without_script_errors(
    chromium: str, testbackends: Any, tdq: Callable[..., Any], tmp_path: Path
) -> None:
    q1, q2 = tdq(), tdq()

    def worker() -> None:
        with q2:
            for _ in range(3):
                with kprof.range("worker step"):
                    q2.launch("k2", 300)

    with kprof.profile() as p:
        with q1:
            for _ in range(3):
                with kprof.range("step"):
                    t = threading.Thread(target=kprof.propagate(worker), name="helper")
                    t.start()
                    q1.launch("k1", 200)
                    kprof.mark("launched")
                    q1.launch("longer_kernel_name", 400)
                    t.join()
    page = tmp_path / "timeline.html"
    p.export_html(page)
    dom = rendered(chromium, page, tmp_path)
    assert dom.status.get("data-errors") == "0", dom.status
    assert dom.status.get("data-state") == "ready", dom.status
    rows = expected_rows(p)
    assert dom.rows == rows
    assert dom.status.get("data-rows") == str(len(rows))
    assert dom.procs == [f"host {p.meta['host']} pid {p.meta['pid']}", "testdev 0"]
    assert "thread 1 (MainThread)" in rows and f"queue {q1.index}, thread 1" in rows
    assert int(dom.status.get("data-drawn") or 0) > 0
    screenshot(chromium, page, tmp_path)


def test_100k_records_render(chromium: str, tmp_path: Path) -> None:
    p = synthetic(100_000, threads=3, queues_per_thread=2, seed=5)
    page = tmp_path / "big.html"
    p.export_html(page)
    dom = rendered(chromium, page, tmp_path)
    assert dom.status.get("data-errors") == "0", dom.status
    assert dom.status.get("data-items") == str(2 * 100_000 + len(p.host))
    assert dom.rows == expected_rows(p)
    # Only what can show is drawn: far fewer than all the entries at the full view.
    assert 0 < int(dom.status.get("data-drawn") or 0) < 100_000


def test_a_script_error_is_reported_in_the_page(chromium: str, tmp_path: Path) -> None:
    page = tmp_path / "broken.html"
    synthetic(10).export_html(page)
    text = DATA.sub(
        '<script type="application/json" id="kprof-data">{"profiles": 1}</script>', page.read_text()
    )
    page.write_text(text)
    dom = rendered(chromium, page, tmp_path)
    assert dom.status.get("data-errors") == "1"
    assert dom.status.get("data-state") == "error"


PROBE = """
<script>
(function () {
  var tl = window.kprofTimeline, view = document.getElementById("kprof-view");
  var canvas = document.getElementById("kprof-canvas"), tip = document.getElementById("kprof-tip");
  var r = canvas.getBoundingClientRect(), out = {};
  var v0 = tl.view(), px = r.width / (v0[1] - v0[0]);
  // Hover over the middle of the first kernel of the first queue row.
  var row = tl.rows.filter(function (x) { return x.tr.kind === "queue"; })[0], tr = row.tr;
  // Event coordinates are whole pixels: aim at one, and take the time there.
  var x = Math.round(r.left + (tr.s[0] + tr.d[0] / 2 - v0[0]) * px);
  var y = Math.round(r.top + row.y + tl.PAD + tr.z[0] * tl.ROW + tl.ROW / 2);
  var t = v0[0] + (x - r.left) / px;
  window.dispatchEvent(new MouseEvent("mousemove", {clientX: x, clientY: y}));
  out.tip = tip.textContent; out.shown = tip.style.display;
  out.name = row.prof.names[tr.n[0]];
  // Wheel up over it: zoom in around the cursor.
  view.dispatchEvent(new WheelEvent("wheel", {deltaY: -400, clientX: x, clientY: y,
                                              bubbles: true, cancelable: true}));
  var v1 = tl.view();
  out.zoom = (v1[1] - v1[0]) / (v0[1] - v0[0]);
  out.fixed = [t, v1[0] + (x - r.left) * (v1[1] - v1[0]) / r.width];
  // Drag 100 px to the right: the view moves 100 px worth of time earlier.
  view.dispatchEvent(new MouseEvent("mousedown", {clientX: x, clientY: y, bubbles: true}));
  window.dispatchEvent(new MouseEvent("mousemove", {clientX: x + 100, clientY: y}));
  window.dispatchEvent(new MouseEvent("mouseup", {}));
  var v2 = tl.view();
  out.pan = (v1[0] - v2[0]) / ((v1[1] - v1[0]) / r.width);
  out.width = v2[1] - v2[0] - (v1[1] - v1[0]);
  // Away from everything: no tooltip.
  window.dispatchEvent(new MouseEvent("mousemove", {clientX: r.left + 2, clientY: r.top + 2}));
  out.hidden = tip.style.display;
  // Set from a script (docs/screenshots.py zooms to a range so).
  tl.setView(v0[0] + 10, v0[0] + 30);
  out.set = tl.view();
  // Touch: a finger moved 100 px to the right pans as a drag does; two fingers moved apart
  // to twice their distance zoom in by two around their midpoint; a tap shows the details.
  tl.setView(v0[0], v0[1]);
  function touches(points) {
    return points.map(function (p, i) {
      return new Touch({identifier: i, target: view, clientX: p[0], clientY: p[1]});
    });
  }
  function touchEvent(type, points) {
    view.dispatchEvent(new TouchEvent(type, {touches: touches(points), bubbles: true,
                                             cancelable: true}));
  }
  touchEvent("touchstart", [[x, y]]);
  touchEvent("touchmove", [[x + 100, y]]);
  touchEvent("touchend", []);
  var v3 = tl.view();
  out.touchPan = (v0[0] - v3[0]) / ((v0[1] - v0[0]) / r.width);
  var mid = Math.round(r.left + r.width / 2), tmid = v3[0] + (mid - r.left) * (v3[1] - v3[0]) / r.width;
  touchEvent("touchstart", [[mid - 50, y], [mid + 50, y]]);
  touchEvent("touchmove", [[mid - 100, y], [mid + 100, y]]);
  touchEvent("touchend", []);
  var v4 = tl.view();
  out.pinch = (v4[1] - v4[0]) / (v3[1] - v3[0]);
  out.pinchFixed = [tmid, v4[0] + (mid - r.left) * (v4[1] - v4[0]) / r.width];
  tl.setView(v0[0], v0[1]);
  tip.style.display = "none";
  touchEvent("touchstart", [[x, y]]);
  touchEvent("touchend", []);
  out.tapped = tip.style.display;
  // Zoomed in far from the start, ticks a fraction of a millisecond apart.
  tl.setView(179.6e6, 181.9e6);
  out.ticks = tl.ticks();
  var el = document.createElement("pre");
  el.id = "kprof-probe";
  el.textContent = JSON.stringify(out);
  document.body.appendChild(el);
})();
</script>
"""


def test_tooltip_zoom_and_pan(
    chromium: str, testbackends: Any, tdq: Callable[..., Any], tmp_path: Path
) -> None:
    q = tdq()
    with kprof.profile() as p, q:
        for _ in range(3):
            q.launch("first_kernel", 2000)
            q.launch("other", 500)
    page = tmp_path / "probe.html"
    p.export_html(page)
    page.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    r = browse(chromium, page, tmp_path, "--dump-dom")
    m = re.search(r'<pre id="kprof-probe">(.*?)</pre>', r.stdout, re.S)
    assert m, r.stdout[-2000:]
    out = json.loads(m.group(1).replace("&quot;", '"'))
    assert out["shown"] == "block" and out["name"] == "first_kernel"
    assert out["tip"].startswith("first_kernel kernel")
    assert "duration" in out["tip"] and f"testdev 0, queue {q.index}, thread 1" in out["tip"]
    assert out["zoom"] == pytest.approx(2.718281828 ** (-0.6), rel=1e-6)
    t, fixed = out["fixed"]
    assert fixed == pytest.approx(t, abs=1), "the time under the cursor stays under it"
    assert out["pan"] == pytest.approx(100, rel=1e-6) and out["width"] == pytest.approx(0, abs=1e-3)
    assert out["hidden"] == "none"
    assert out["set"][1] - out["set"][0] == pytest.approx(20)
    assert out["touchPan"] == pytest.approx(100, rel=1e-6)
    assert out["pinch"] == pytest.approx(0.5, rel=1e-6)
    t, fixed = out["pinchFixed"]
    assert fixed == pytest.approx(t, abs=1), "the time under the fingers stays under them"
    assert out["tapped"] == "block"
    # Each tick says where it is: 179.8 ms, 180.0 ms, ..., not "180 ms" for several.
    assert len(out["ticks"]) > 5 and len(set(out["ticks"])) == len(out["ticks"]), out["ticks"]
    assert "180.0 ms" in out["ticks"], out["ticks"]


def test_device_memory_is_a_counter_track_that_renders(
    chromium: str, testbackends: Any, tdq: Callable[..., Any], tmp_path: Path
) -> None:
    from kprof_testbackend import device

    q = tdq()
    with kprof.profile(backends="testdev") as p:
        with q:
            q.launch("k", 100)
        a = device.alloc(1000)
        device.alloc(3000)
        a.free()
        q.finish()
    page = tmp_path / "memory.html"
    p.export_html(page)
    m = DATA.search(page.read_text())
    assert m is not None
    [proc] = [
        x for x in json.loads(m.group(1))["profiles"][0]["processes"] if x["kind"] == "memory"
    ]
    [track] = proc["tracks"]
    assert (proc["name"], track["name"], track["kind"]) == (
        "device memory",
        "live bytes, testdev 0",
        "counter",
    )
    assert track["v"] == [1000, 4000, 3000] and track["max"] == 4000
    dom = rendered(chromium, page, tmp_path)
    assert dom.status.get("data-errors") == "0", dom.status
    assert dom.procs[-1] == "device memory" and dom.rows[-1] == "live bytes, testdev 0"
    screenshot(chromium, page, tmp_path)


# What a reader sees of each label, and whether the page itself is wider than its window. The
# page runs in a frame of the width under test (headless Chromium's window is at least 500 px
# wide) and writes what it found into the frame's parent.
FIT = """
<script>
(function () {
  var out = {labels: [], window: window.innerWidth,
             page: document.documentElement.scrollWidth,
             column: document.getElementById("kprof-labels").offsetWidth,
             tables: [], names: []};
  document.querySelectorAll(".kprof-row, .kprof-proc").forEach(function (el) {
    out.labels.push({text: el.textContent, cut: el.scrollWidth > el.clientWidth ||
                                                el.scrollHeight > el.clientHeight});
  });
  document.querySelectorAll("#kprof-summary table, #kprof-summary .kprof-scroll").forEach(
    function (el) { out.tables.push(getComputedStyle(el).overflowX); });
  document.querySelectorAll(".kprof-tree .kn").forEach(function (el) {
    if (el.scrollWidth > el.clientWidth) out.names.push(el.textContent);
  });
  var el = parent.document.createElement("pre");
  el.id = "kprof-probe";
  el.textContent = JSON.stringify(out);
  parent.document.body.appendChild(el);
})();
</script>
"""

LONG_DEVICE = "pthread-Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz"


@pytest.mark.parametrize("width", [1400, 390], ids=["desktop", "phone"])
def test_row_labels_are_shown_in_full_and_wide_tables_scroll(
    chromium: str, tmp_path: Path, width: int
) -> None:
    """A device's long name (PoCL's CPU device names its processor) is read in full in the
    label column, at a desktop's and at a phone's width: the column grows to the longest label
    up to a bound that leaves the timeline most of the window, and a longer label wraps onto
    a taller row. The summary's tables and the device-time tree scroll inside themselves
    (names in full), so that the page is never wider than the window."""
    from kprof_core.data.records import QueueRecord

    p = synthetic(40, threads=2)
    p.queues = [
        QueueRecord("opencl", LONG_DEVICE, q.label, f"opencl:{LONG_DEVICE}") for q in p.queues
    ]
    page = tmp_path / "labels.html"
    p.export_html(page)
    probed = page.read_text().replace("</body>", FIT + "</body>")
    frame = tmp_path / "frame.html"
    frame.write_text(
        f'<!DOCTYPE html><html><body style="margin:0"><iframe style="border:0;width:{width}px;'
        f'height:900px" srcdoc="{html.escape(probed, quote=True)}"></iframe></body></html>'
    )
    r = browse(chromium, frame, tmp_path, "--dump-dom")
    m = re.search(r'<pre id="kprof-probe">(.*?)</pre>', r.stdout, re.S)
    assert m, r.stdout[-2000:]
    out = json.loads(html.unescape(m.group(1)))
    assert out["window"] == width
    texts = [x["text"] for x in out["labels"]]
    assert f"OpenCL {LONG_DEVICE}" in texts
    cut = [x["text"] for x in out["labels"] if x["cut"]]
    assert not cut, f"labels cut at {width} px: {cut}"
    # The timeline keeps most of the window.
    assert out["column"] <= max(140, 0.4 * width + 1), out
    assert out["page"] <= width, "the page is wider than the window"
    assert out["tables"] and set(out["tables"]) == {"auto"}, out["tables"]
    assert not out["names"], f"names cut in the device-time tree: {out['names']}"
