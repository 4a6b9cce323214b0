"""Regenerate the docs' pictures from real profiles: ``python docs/screenshots.py``.

Profiles ``examples/opencl_pipeline.py`` on PoCL's CPU device (after one run that fills PoCL's
kernel cache) (two threads, two queues, copies,
kernels and ranges) with ``kprof run --html``, and again with launch sites on
(``KPROF_SITES=1``: the page's device-time tree and flame graph, photographed where they are),
writes ``kprof diff``'s page for the two runs in ``docs/examples/``, and photographs each page in headless Chromium (Debian's ``chromium``)
into ``docs/_static/screenshots/``, where the docs and README.md take them. ``timeline.png`` is
a crop: the timeline alone, zoomed to the pipeline's first step (its copies and kernels wide
enough to carry their names), at twice the pixels so that a page that shrinks it stays sharp.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "_static" / "screenshots"
SIZE = (1400, 800)


def chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    sys.exit("chromium is not installed (apt-get install -y --no-install-recommends chromium)")


# Shows a page from one element on (headless Chromium photographs the top of a page whatever
# its scroll): the header, the timeline and the summary's elements before it are hidden.
FROM = """<script>
(function () {
  var el = document.querySelector(".%s");
  document.querySelector("header").style.display = "none";
  document.getElementById("kprof-timeline").style.display = "none";
  for (var x = el.parentNode.firstElementChild; x && x !== el; x = x.nextElementSibling)
    x.style.display = "none";
})();
</script>"""


# The timeline alone (no summary, no help line), zoomed to the first ``step`` range: on every
# row its first ``step`` (the host's range and its device time on each queue), 3 % of that on
# each side; the timeline's height written into the page, for the picture's size.
ZOOM = """<script>
(function () {
  document.getElementById("kprof-summary").style.display = "none";
  document.getElementById("kprof-help").style.display = "none";
  var tl = window.kprofTimeline, a = Infinity, b = -Infinity;
  tl.rows.forEach(function (row) {
    var tr = row.tr, names = row.prof.names;
    for (var i = 0; i < tr.s.length; i++) {
      if (tr.k[i] !== 5 && names[tr.n[i]] === "step") {
        a = Math.min(a, tr.s[i]);
        b = Math.max(b, tr.s[i] + tr.d[i]);
        break;
      }
    }
  });
  if (b > a) tl.setView(a - (b - a) * 0.03, b + (b - a) * 0.03);
  var bottom = document.getElementById("kprof-timeline").getBoundingClientRect().bottom;
  document.body.setAttribute("data-height", String(Math.ceil(bottom + window.scrollY)));
})();
</script>"""
#: The cropped timeline's width in CSS pixels (about a README's or a docs page's column).
CROP_WIDTH = 800


def browse(page: Path, tmp: Path, size: tuple[int, int], *args: str) -> str:
    cmd = [
        chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        f"--user-data-dir={tmp / 'chromium-profile'}",
        f"--window-size={size[0]},{size[1]}",
        "--virtual-time-budget=3000",  # the page draws its timeline from a script: let it run
        *args,
        page.as_uri(),
    ]
    return subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=180).stdout


def photograph(page: Path, png: Path, tmp: Path, anchor: str = "") -> None:
    """``page`` at ``SIZE``; from the first element of class ``anchor`` on, when given."""
    if anchor:
        shown = page.with_name(f"{page.stem}-{anchor}.html")
        text = page.read_text(encoding="utf-8")
        shown.write_text(text.replace("</body>", FROM % anchor + "</body>"), encoding="utf-8")
        page = shown
    browse(page, tmp, SIZE, "--force-device-scale-factor=1", f"--screenshot={png}")


def photograph_timeline(page: Path, png: Path, tmp: Path) -> None:
    """The timeline of ``page`` alone, zoomed (``ZOOM``), ``CROP_WIDTH`` wide at 2x."""
    shown = page.with_name(f"{page.stem}-zoomed.html")
    text = page.read_text(encoding="utf-8")
    shown.write_text(text.replace("</body>", ZOOM + "</body>"), encoding="utf-8")
    dom = browse(shown, tmp, (CROP_WIDTH, 900), "--dump-dom")
    m = re.search(r'data-height="(\d+)"', dom)
    if not m:
        sys.exit(f"{page.name}: the zoomed timeline did not say its height")
    size = (CROP_WIDTH, int(m.group(1)))
    browse(shown, tmp, size, "--force-device-scale-factor=2", f"--screenshot={png}")


def kprof(
    *args: str, cwd: Path, ok: tuple[int, ...] = (0,), env_add: dict[str, str] | None = None
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KPROF_")}
    env["KPROF_PLUGINS"] = "opencl"
    env.update(env_add or {})
    proc = subprocess.run(
        [sys.executable, "-m", "kprof", *args], cwd=cwd, env=env, capture_output=True, text=True
    )
    if proc.returncode not in ok:
        sys.exit(f"kprof {' '.join(args)} failed:\n{proc.stdout}{proc.stderr}")


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        pipeline = str(ROOT / "examples" / "opencl_pipeline.py")
        # Once without kprof: PoCL compiles the kernels into its cache, so that the profiled run
        # shows the pipeline rather than a compiler.
        subprocess.run([sys.executable, pipeline], check=True, capture_output=True, timeout=300)
        kprof("run", "--html", str(tmp / "timeline.html"), pipeline, cwd=tmp)
        sites = {"KPROF_SITES": "1"}
        kprof("run", "--html", str(tmp / "tree.html"), pipeline, cwd=tmp, env_add=sites)
        # Relative names: the page's labels are the files' names.
        examples = ROOT / "docs" / "examples"
        diff = ["diff", "base.kprof", "new.kprof", "--html", str(tmp / "diff.html")]
        kprof(*diff, cwd=examples, ok=(0, 1))
        photograph_timeline(tmp / "timeline.html", OUT / "timeline.png", tmp)
        for page, anchor in (("diff", ""), ("tree", "kprof-tree-title")):
            photograph(tmp / f"{page}.html", OUT / f"{page}.png", tmp, anchor)
        for page in ("timeline", "diff", "tree"):
            print(f"wrote {(OUT / f'{page}.png').relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
