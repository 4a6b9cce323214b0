"""Notebooks: ``Profile._repr_html_`` and the ``%kprof``/``%%kprof`` magics, in IPython and in
a real notebook (examples/notebook.ipynb, executed by nbclient on an ipykernel, on the OpenCL
device) whose HTML output is then opened in headless Chromium."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from test_html_browser import browse, chromium_fixture, embedded_data  # noqa: F401
from tracecheck import synthetic

import kprof
from kprof_core.renderers import notebook
from kprof_core.renderers.timeline import Timeline

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "notebook.ipynb"
SRCDOC = re.compile(r'<iframe class="kprof-frame"[^>]*srcdoc="([^"]*)"')


def frame_page(fragment: str) -> str:
    m = SRCDOC.search(fragment)
    assert m, "the output holds the timeline's frame"
    return html.unescape(m.group(1))


class _Ids(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.ids += [v for k, v in attrs if k == "id" and v]


def ids_of(fragment: str) -> list[str]:
    p = _Ids()
    p.feed(fragment)
    return p.ids


# -- _repr_html_ ---------------------------------------------------------------------------------------


def test_repr_html_holds_the_timeline_and_the_tables_and_nothing_to_clash() -> None:
    p = synthetic(200, threads=2, seed=3)
    out = p._repr_html_()
    assert out is not None
    assert "Host-side activity" in out and "Device-side activity" in out
    page = frame_page(out)
    assert "http://" not in out and "https://" not in out and "<script src" not in page
    data = embedded_data(page)
    assert len(data["profiles"]) == 1
    assert sum(
        len(tr["s"]) for proc in data["profiles"][0]["processes"] for tr in proc["tracks"]
    ) == 2 * len(p.table) + len(p.host)
    # The summary is in the notebook's document (static), the timeline in the frame's only.
    assert "Host-side activity" not in page
    # Nothing outside the frame has an id, so two profiles in one notebook cannot clash.
    assert ids_of(out) == []
    assert ids_of(synthetic(20, seed=4)._repr_html_() or "") == []


def test_repr_html_of_a_running_profile_falls_back_to_text(testbackends: Any) -> None:
    with kprof.profile() as p:
        assert p._repr_html_() is None
    assert p._repr_html_() is not None


def test_a_huge_profile_leaves_the_timeline_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(notebook, "TIMELINE_LIMIT", 100)
    out = synthetic(200)._repr_html_()
    assert out is not None and "<iframe" not in out and "export_html" in out
    assert "Device-side activity" in out


def test_the_trace_is_shown_when_profiled_with_trace() -> None:
    p = synthetic(30)
    assert "<details>" not in (p._repr_html_() or "")
    p.trace = True
    out = p._repr_html_() or ""
    assert "<details><summary>Trace" in out and "Start  Duration  On" in html.unescape(out)


def test_import_kprof_does_not_import_ipython() -> None:
    code = "import sys, kprof; assert 'IPython' not in sys.modules, 'IPython imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


# -- the magics, in an IPython shell --------------------------------------------------------------------


@pytest.fixture
def ip(testbackends: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from IPython.core.interactiveshell import InteractiveShell

    monkeypatch.chdir(tmp_path)
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "kprof")
    yield shell
    shell.user_ns.pop("_kprof", None)


def run(ip: Any, code: str) -> Any:
    r = ip.run_cell(code)
    if r.error_before_exec or r.error_in_exec:
        raise r.error_before_exec or r.error_in_exec
    return r


def test_cell_magic_keeps_the_profile_and_saves_it(
    ip: Any, tdq: Callable[..., Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ip.user_ns["q"] = tdq()
    run(
        ip,
        "%%kprof -v first -o first.kprof --html first.html --trace first.json\n"
        "with q:\n    for _ in range(4):\n        q.launch('mul2', 50)\n",
    )
    p = ip.user_ns["first"]
    assert isinstance(p, kprof.Profile) and len(p.kernel_times("mul2")) == 4
    assert [k.name for k in kprof.load(tmp_path / "first.kprof").kernels] == ["mul2"] * 4
    assert (tmp_path / "first.html").exists() and (tmp_path / "first.json").exists()
    assert "Device-side activity" in capsys.readouterr().out  # a terminal shows print(p)


def test_line_magic_options(
    ip: Any, tdq: Callable[..., Any], capsys: pytest.CaptureFixture[str]
) -> None:
    ip.user_ns["q"] = tdq()
    run(ip, "%kprof -q -t --backends testdev q.launch('x', 10); q.finish()")
    p = ip.user_ns["_kprof"]
    assert p.trace and p.backends == ["testdev"] and [k.name for k in p.kernels] == ["x"]
    assert capsys.readouterr().out == "", "-q keeps the profile without showing it"
    with ip.user_ns["q"]:
        run(ip, "%kprof -q --no-device q.launch('y', 10); q.finish()")
    p = ip.user_ns["_kprof"]
    assert p.kernels == [] and [r.name for r in p.launches] == ["y"]


def test_the_profile_is_kept_when_the_code_raises(ip: Any, tdq: Callable[..., Any]) -> None:
    ip.user_ns["q"] = tdq()
    r = ip.run_cell("%%kprof -q -v broken\nwith q:\n    q.launch('before', 10)\n    1 / 0\n")
    assert isinstance(r.error_in_exec, ZeroDivisionError)
    assert [k.name for k in ip.user_ns["broken"].kernels] == ["before"]


@pytest.mark.parametrize(
    "code, message",
    [
        ("%kprof", "needs a statement"),
        ("%kprof -v 1x f()", "takes a variable name"),
        ("%kprof --backends nope 1 + 1", "unknown backend 'nope'"),
        ("%kprof 1 +", "does not compile"),
        ("%%kprof extra\n1\n", "takes options only"),
    ],
)
def test_magic_usage_errors(ip: Any, code: str, message: str) -> None:
    from IPython.core.error import UsageError

    with pytest.raises(UsageError, match=message):
        run(ip, code)


# -- a real notebook, executed, then its HTML in a browser ----------------------------------------------


PROBE = """<script>
window.addEventListener("load", function () {
  var out = [];
  document.querySelectorAll("iframe.kprof-frame").forEach(function (f) {
    var d = f.contentDocument, s = d && d.getElementById("kprof-status");
    out.push(s ? {state: s.getAttribute("data-state"), errors: s.getAttribute("data-errors"),
                  rows: s.getAttribute("data-rows"), height: f.getBoundingClientRect().height,
                  page: d.documentElement.scrollHeight} : null);
  });
  var el = document.createElement("pre");
  el.id = "kprof-probe";
  el.textContent = JSON.stringify(out);
  document.body.appendChild(el);
});
</script>"""


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    pytest.importorskip("pyopencl")
    import nbformat
    from nbclient import NotebookClient

    import kprof_opencl

    if kprof_opencl.default_device() is None:
        pytest.skip("OpenCL finds no device here (pip install pocl-binary-distribution)")
    where = tmp_path_factory.mktemp("notebook")
    nb = nbformat.read(EXAMPLE, as_version=4)
    mp = pytest.MonkeyPatch()
    mp.setenv("KPROF_PLUGINS", "opencl")  # the kernel's environment
    try:
        NotebookClient(
            nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(where)}}
        ).execute()
    finally:
        mp.undo()
    nbformat.write(nb, where / "executed.ipynb")
    return nb, where


def outputs(cell: Any, mime: str) -> list[str]:
    return [o["data"][mime] for o in cell.get("outputs", []) if mime in o.get("data", {})]


def test_the_example_notebook_runs(executed: tuple[Any, Path]) -> None:
    nb, where = executed
    cells = [c for c in nb.cells if c.cell_type == "code"]
    assert all(o.get("output_type") != "error" for c in cells for o in c.get("outputs", []))
    small, large, calls, diff = cells[2], cells[3], cells[4], cells[5]
    for cell in (small, large):
        (fragment,) = outputs(cell, "text/html")
        assert "Device-side activity" in fragment and "<iframe" in fragment
        (text,) = outputs(cell, "text/plain")
        assert "mul2" in text and "add" in text  # the text form is print(p)
    assert "Trace:" in outputs(large, "text/plain")[0]
    assert outputs(calls, "text/plain") == ["20"]
    saved = kprof.load(where / "small.kprof")
    assert len(saved.kernel_times("mul2")) == 20 and len(saved.kernel_times("add")) == 20
    (table,) = outputs(diff, "text/html")
    # 64 times the work per launch: mul2 and add are slower, beyond any doubt.
    for name in ("mul2", "add"):
        row = re.search(
            rf'<tr data-status="(\w+)">(?:<td>[^<]*</td>)+<td class="name">{name}</td>', table
        )
        assert row and row.group(1) == "slower", table


def test_the_notebooks_html_renders_in_a_browser_without_clashes(
    executed: tuple[Any, Path], chromium: str, tmp_path: Path
) -> None:
    nb, where = executed
    fragments = [h for c in nb.cells if c.cell_type == "code" for h in outputs(c, "text/html")]
    page = tmp_path / "notebook.html"
    page.write_text(
        "<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>"
        + "\n".join(f'<div class="output">{f}</div>' for f in fragments)
        + PROBE
        + "</body></html>"
    )
    r = browse(chromium, page, tmp_path, "--dump-dom", "--virtual-time-budget=5000")
    m = re.search(r'<pre id="kprof-probe">(.*?)</pre>', r.stdout, re.S)
    assert m, r.stdout[-2000:]
    frames = json.loads(html.unescape(m.group(1)))
    assert len(frames) == 2, "two profiles, two timelines"
    for f in frames:
        assert f is not None and f["state"] == "ready" and f["errors"] == "0", f
        assert f["height"] >= f["page"], "the frame fits its page"
    profiles = [frame_page(h) for h in fragments if "<iframe" in h]
    rows = [
        len([tr for proc in embedded_data(p)["profiles"][0]["processes"] for tr in proc["tracks"]])
        for p in profiles
    ]
    assert [int(f["rows"]) for f in frames] == rows
    shutil.copy(where / "executed.ipynb", tmp_path / "executed.ipynb")


def test_timeline_rows_in_the_frame_match_the_model() -> None:
    p = synthetic(50, threads=3, seed=9)
    data = embedded_data(frame_page(p._repr_html_() or ""))
    tl = Timeline(p)
    assert len([tr for proc in data["profiles"][0]["processes"] for tr in proc["tracks"]]) == sum(
        len(proc.tracks) for proc in tl.processes
    )
