"""The docs site (docs/): it builds with warnings as errors; every public name, hook, command-line
option and environment variable has a generated reference entry; every internal link lands on
a page and an anchor that exist; every code example runs and prints what the page shows."""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from types import ModuleType

import pytest

import kprof
import kprof.plugin
import kprof.testing
from kprof_core import envvars
from kprof_core.cli.main import build_parser
from kprof_core.data.records import DeviceTable
from kprof_core.host.hookspecs import RESOLVED_HOOKS
from kprof_core.io.fileformat import FORMAT_VERSION

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
if sys.version_info < (3, 11):  # Sphinx 9 needs 3.11: the docs extra is not installed on 3.10
    pytest.importorskip("sphinx")


def _examples() -> ModuleType:
    sys.path.insert(0, str(DOCS / "examples"))
    try:
        return importlib.import_module("run")
    finally:
        sys.path.remove(str(DOCS / "examples"))


def _tutorial() -> ModuleType:
    """The plugin tutorial's runner (``tests/test_plugin_tutorial.py`` runs its steps)."""
    path = ROOT / "examples" / "plugin" / "tutorial" / "run.py"
    spec = importlib.util.spec_from_file_location("kprof_plugin_tutorial_run", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Ids(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.hrefs: list[str] = []
        #: The targets of the page's object entries (``<dt id="kprof.profile">``), in page order.
        self.entries: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for k, v in attrs:
            if k == "id" and v:
                self.ids.add(v)
            if k == "href" and v and tag == "a":
                self.hrefs.append(v)
        found = dict(attrs)
        if tag == "dt" and found.get("id") and "sig-object" in (found.get("class") or "").split():
            self.entries.append(found["id"] or "")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built as .ci/run builds it: ``-n -W`` (a warning, a reference to nothing or
    a missing reference entry (docs/_ext/kprof_docs.py) fails the build)."""
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-n", "-W", "-E", "-q", "-b", "html", str(DOCS), str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"the docs site does not build:\n{proc.stdout}{proc.stderr}"
    return out


def _page(site: Path, name: str) -> _Ids:
    parser = _Ids()
    parser.feed((site / name).read_text())
    return parser


# -- reference entries --------------------------------------------------------------------------


#: Each public module's reference page: users' API on one, plugin authors' on another.
PAGES = {
    kprof: "reference/api.html",
    kprof.plugin: "reference/plugin-api.html",
    kprof.testing: "reference/plugin-api.html",
}
#: Names the reference pages document by hand, after the generated entries (data without a
#: docstring of its own, and kprof.plugin's alias of kprof.KprofError).
#: Entries written by hand on the reference pages: names without a docstring of their own
#: (``active`` and ``now`` are a context variable's ``get`` and ``time.perf_counter_ns``).
BY_HAND = {"KprofError", "hookimpl", "hookspecs", "KERNEL", "COPY", "RULES", "active", "now"}


@pytest.mark.parametrize("module", list(PAGES), ids=lambda m: m.__name__)
def test_every_public_name_has_an_entry(site: Path, module: ModuleType) -> None:
    page = PAGES[module]
    ids = _page(site, page).ids
    names = [n for n in module.__all__ if not n.startswith("__")]
    missing = [n for n in names if f"{module.__name__}.{n}" not in ids]
    # kprof.mpi is a module: its entry is the module's target.
    missing = [n for n in missing if f"module-{module.__name__}.{n}" not in ids]
    assert names and not missing, (
        f"docs/{page.replace('.html', '.rst')} renders no entry for {missing}"
    )


def _entries(site: Path, module: ModuleType) -> list[str]:
    """The names of ``module`` that its reference page has entries for, in page order (their
    members, ``kprof.Profile.save``, left out)."""
    prefix = f"{module.__name__}."
    return [
        e.removeprefix(prefix)
        for e in _page(site, PAGES[module]).entries
        if e.startswith(prefix) and "." not in e.removeprefix(prefix)
    ]


def test_the_api_reference_starts_with_what_users_call_first(site: Path) -> None:
    """The ``kprof`` page is read top down: ``profile``, ``range``, ``step`` and ``Profile``
    come first, in that order, not the alphabet's ``Allocation``."""
    first = _entries(site, kprof)[:4]
    assert first == ["profile", "range", "step", "Profile"], (
        f"docs/reference/api.rst now starts with {first}: keep kprof.__all__ in order of use"
        " and autodoc_member_order = 'bysource' (docs/conf.py)"
    )


@pytest.mark.parametrize("module", list(PAGES), ids=lambda m: m.__name__)
def test_the_reference_follows_the_order_of_all(site: Path, module: ModuleType) -> None:
    """Each page lists a module's generated entries in its ``__all__`` order (the order of use,
    written once there); the few written by hand aside."""
    entries = _entries(site, module)
    generated = [n for n in entries if n not in BY_HAND]
    assert len(generated) >= 5, entries
    assert generated == [n for n in module.__all__ if n in generated], (
        f"{PAGES[module]} lists {module.__name__}'s names out of its __all__ order: {entries}"
    )


def test_every_hook_has_an_entry_rendered_from_its_hookspec(site: Path) -> None:
    ids = _page(site, "reference/hooks.html").ids
    rendered = {i.rsplit(".", 1)[1] for i in ids if i.startswith("kprof_core.host.hookspecs")}
    assert set(RESOLVED_HOOKS) <= rendered, sorted(set(RESOLVED_HOOKS) - rendered)
    # The docstring is what is shown: one hook's own sentence is on the page.
    text = (site / "reference/hooks.html").read_text()
    assert "Say what this backend is and whether it can run here." in text


def _cli_anchors(parser: argparse.ArgumentParser, prog: str) -> list[str]:
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out.append(f"{prog}-{name}")
                out += _cli_anchors(sub, f"{prog}-{name}")
        elif action.option_strings:
            out += [f"{prog}-{o}" for o in action.option_strings]
        else:
            out.append(f"{prog}-{action.dest}")
    return out


def test_every_command_and_option_has_an_entry(site: Path) -> None:
    ids = _page(site, "reference/cli.html").ids
    anchors = _cli_anchors(build_parser(), "kprof")
    assert {"kprof-run---output", "kprof-diff---fail-above", "kprof-merge"} <= set(anchors)
    missing = [a for a in anchors if a not in ids]
    assert not missing, f"docs/reference/cli.html has no entry for {missing}"


def test_every_pytest_option_has_an_entry(site: Path) -> None:
    """kprof's pytest plugin options, collected as pytest collects them (a recording parser
    given to ``kprof_pytest.pytest_addoption``)."""

    class Recorder:
        def __init__(self) -> None:
            self.names: list[str] = []

        def getgroup(self, *_: object, **__: object) -> Recorder:
            return self

        def addoption(self, *names: str, **__: object) -> None:
            self.names += names

    import kprof_pytest

    recorder = Recorder()
    kprof_pytest.pytest_addoption(recorder)  # type: ignore[arg-type]
    ids = _page(site, "reference/cli.html").ids
    assert "--kprof-compare" in recorder.names
    missing = [n for n in recorder.names if f"cmdoption-pytest{n.removeprefix('-')}" not in ids]
    assert not missing, f"docs/reference/cli.html has no entry for pytest {missing}"


def test_every_environment_variable_has_an_entry(site: Path) -> None:
    ids = _page(site, "reference/environment.html").ids
    missing = [v.name for v in envvars.VARIABLES if f"envvar-{v.name}" not in ids]
    assert not missing, missing


_PACKAGES = ["kprof", "kprof_core", "kprof_opencl", "kprof_cuda", "kprof_hip", "kprof_pytest"]


def _kprof_literals() -> dict[str, list[str]]:
    """Every string literal in kprof's code that is a whole ``KPROF_*`` name, by file."""
    found: dict[str, list[str]] = {}
    for pkg in _PACKAGES:
        # Where the package is imported from (the wheel's copy in .ci/run's last run).
        where = Path(importlib.import_module(pkg).__file__ or "").resolve().parent
        for path in sorted(where.rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    if re.fullmatch(r"KPROF_[A-Z0-9_]+", node.value):
                        found.setdefault(node.value, []).append(str(path.relative_to(where.parent)))
    return found


def test_every_variable_the_code_reads_is_in_the_registry() -> None:
    """``kprof_core/envvars.py`` is the one list the reference renders: a variable read by a
    name it lacks would be undocumented. Core code uses the registry's names; the bundled
    plugins (which import only ``kprof.plugin``) keep a constant that must be one of them."""
    literals = _kprof_literals()
    assert set(literals) >= {"KPROF_OPENCL_HOOK", "KPROF_CUPTI_LIBRARY"}
    unknown = {n: where for n, where in literals.items() if n not in envvars.BY_NAME}
    assert not unknown, f"add these to kprof_core/envvars.py: {unknown}"
    outside = {
        n: where
        for n, where in literals.items()
        if any(w.startswith("kprof_core/") and w != "kprof_core/envvars.py" for w in where)
    }
    assert not outside, f"kprof_core reads these through a literal, not envvars: {outside}"


def test_the_file_format_page_has_every_column_and_the_version(site: Path) -> None:
    text = (site / "reference/file-format.html").read_text()
    assert f"format version <strong>{FORMAT_VERSION}</strong>" in text
    from kprof_core.io.read_v5 import V5_COLUMNS

    for col in {c for cols in V5_COLUMNS.values() for c in cols} | set(DeviceTable.COLUMNS):
        assert f'<span class="pre">{col}</span>' in text, col
    assert "shuffle8+zlib" in text  # the encodings, from fileformat.py's docstring


# -- publishing ----------------------------------------------------------------------------------


def test_read_the_docs_builds_as_documented() -> None:
    """``.readthedocs.yaml`` publishes the site with the documented build: the docs extra
    alone, docs/conf.py (nitpicky), warnings as errors; CONTRIBUTING.md says how."""
    yaml = pytest.importorskip("yaml")  # myst-parser's dependency: in the docs extra
    tomllib = pytest.importorskip("tomllib")
    config = yaml.safe_load((ROOT / ".readthedocs.yaml").read_text())
    assert config["version"] == 2
    assert config["build"]["tools"]["python"] == "3.11"
    install = config["python"]["install"]
    assert install == [{"method": "pip", "path": ".", "extra_requirements": ["docs"]}]
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert "sphinx" in " ".join(extras["docs"])
    sphinx = config["sphinx"]
    assert sphinx["configuration"] == "docs/conf.py" and (ROOT / sphinx["configuration"]).exists()
    assert sphinx["fail_on_warning"] is True
    # Read the Docs passes -W but not -n: the config file itself must be nitpicky.
    assert re.search(r"^nitpicky = True$", (DOCS / "conf.py").read_text(), re.MULTILINE)
    assert ".readthedocs.yaml" in (ROOT / "CONTRIBUTING.md").read_text()


# -- links ---------------------------------------------------------------------------------------


def test_every_internal_link_lands_on_a_page_and_an_anchor(site: Path) -> None:
    pages = {p: _page(site, str(p.relative_to(site))) for p in site.rglob("*.html")}
    broken = []
    for page, parsed in pages.items():
        for href in parsed.hrefs:
            if re.match(r"[a-z]+:", href) or href.startswith("//"):
                continue
            path, _, frag = href.partition("#")
            target = (page.parent / path).resolve() if path else page
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{page.relative_to(site)} -> {href}")
            elif frag and target.suffix == ".html" and frag not in pages[target].ids:
                broken.append(f"{page.relative_to(site)} -> {href}")
    assert not broken, broken


# -- examples ------------------------------------------------------------------------------------


def test_every_example_file_is_run_and_shown() -> None:
    run = _examples()
    scripts = {p.name for p in (DOCS / "examples").glob("*.py")} - {"run.py", "prelude.py"}
    assert scripts <= set(run.FILES), (
        f"docs/examples/run.py does not run {scripts - set(run.FILES)}"
    )
    shown = "\n".join(p.read_text() for p in DOCS.rglob("*.md"))
    for name in [*run.EXAMPLES, *(f for f in run.FILES if f.endswith(".py"))]:
        assert f"examples/{name}" in shown, f"no page includes docs/examples/{name}"


def test_the_examples_print_what_the_pages_show() -> None:
    """Each example runs again and prints its committed output, timings masked (run.normalize):
    the same rows, names, counts and messages."""
    run = _examples()
    outputs = run.run_all()
    for name, text in outputs.items():
        committed = (DOCS / "examples" / f"{name}.out.txt").read_text()
        assert run.normalize(text) == run.normalize(committed), (
            f"docs/examples/{name} now prints something else: run python docs/examples/run.py"
            f" and read the diff.\nnow:\n{text}"
        )


def test_normalize_masks_timings_but_not_names_or_counts() -> None:
    run = _examples()
    a = " 43.7 %     5.28 ms     10    528 µs  step"
    assert run.normalize(a) == run.normalize(" 3.1 %  22.2 ms  10  2.22 ms  step")
    assert run.normalize(" < 0.1 %  step") == run.normalize(" 2 %  step")  # a share below 0.1
    assert run.normalize(a) != run.normalize(" 43.7 %     5.28 ms     9    528 µs  step")
    assert run.normalize(a) != run.normalize(" 43.7 %     5.28 ms     10    528 µs  stop")


_FENCE = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def _blocks(lang: str) -> list[tuple[str, str]]:
    return [
        (str(p.relative_to(DOCS)), m.group(2))
        for p in sorted(DOCS.rglob("*.md"))
        if "_build" not in p.parts
        for m in _FENCE.finditer(p.read_text())
        if m.group(1) == lang
    ]


def test_pages_show_no_output_that_was_pasted() -> None:
    """Output shown on a page is included from an ``.out.txt`` the examples wrote, never
    pasted (pasted output goes stale as the program changes)."""
    pasted = [where for where, _ in _blocks("text")]
    assert not pasted, f"these pages paste output in a ```text block: {pasted}"


@pytest.mark.parametrize("where,code", _blocks("python"), ids=lambda v: str(v)[:40])
def test_every_inline_python_block_runs(where: str, code: str, tmp_path: Path) -> None:
    """Inline Python on a page runs, after ``docs/examples/prelude.py`` (PoCL's queue and the
    reference kernels, as the pages name them)."""
    prelude = (DOCS / "examples" / "prelude.py").read_text()
    proc = subprocess.run(
        [sys.executable, "-c", prelude + "\n" + code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"{where}:\n{code}\n{proc.stdout}{proc.stderr}"


def test_the_notebook_cells_run_in_ipython(tmp_path: Path) -> None:
    """The ``ipython`` blocks of a page (magics) run in order in one IPython shell."""
    cells = [code for where, code in _blocks("ipython")]
    assert cells, "no page shows the magics"
    prelude = (DOCS / "examples" / "prelude.py").read_text()
    script = (
        "import sys\n"
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "shell = InteractiveShell.instance()\n"
        f"for cell in {[prelude, *cells]!r}:\n"
        "    result = shell.run_cell(cell)\n"
        "    if not result.success:\n"
        "        sys.exit(f'cell failed: {cell!r}')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "small.kprof").exists()  # -o wrote the file the page says


#: Shell commands the pages show that other tests run (not the docs' examples), with the test
#: file and a token of the command it runs.
RUN_ELSEWHERE = {
    "kprof run --trace trace.json --html timeline.html examples/opencl_pipeline.py": (
        "tests/test_trace_cli.py",
        "opencl_pipeline.py",
    ),
    "mpiexec -n 4 kprof run --output 'prof-{rank}.kprof' app.py": (
        "tests/test_mpi.py",
        "prof-{rank}.kprof",
    ),
    "kprof merge prof-*.kprof -o all.json --html all.html": ("tests/test_mpi.py", '"merge"'),
    # The plugin tutorial's install: its runner builds the folder with pip (not editable: it
    # keeps the .dist-info and imports the folder's modules, as an editable install does).
    "pip install -e .": ("examples/plugin/tutorial/run.py", '"pip", "install"'),
    # The build command (docs/README.md): the ``site`` fixture above builds with these flags.
    "pip install -e '.[docs]' && python -m sphinx -n -W -b html docs docs/_build/html": (
        "tests/test_docs_site.py",
        '"sphinx", "-n", "-W"',
    ),
}


def _as_typed(argv: list[str]) -> str:
    """An example's command as a reader types it (``kprof``, ``pytest``, ``N=... pytest``)."""
    text = " ".join(argv).replace(f"{sys.executable} -m kprof", "kprof")
    text = text.replace(f"{sys.executable} -m pytest -q -p no:cacheprovider", "pytest")
    return text.removeprefix("env ")


def test_every_shell_command_on_a_page_is_run() -> None:
    run = _examples()
    typed = {_as_typed(argv) for argv in run.EXAMPLES.values()}
    tutorial = _tutorial()
    typed |= {tutorial.as_typed(argv) for _, argv in tutorial.STEPS.values()}
    unrun = []
    for where, block in _blocks("sh"):
        for line in block.splitlines():
            command = line.split("  #")[0].strip()
            if not command or command in typed:
                continue
            elsewhere = RUN_ELSEWHERE.get(command)
            if elsewhere is None or elsewhere[1] not in (ROOT / elsewhere[0]).read_text():
                unrun.append(f"{where}: {command}")
    assert not unrun, f"no test runs these commands: {unrun}"


def test_every_screenshot_is_shown_and_made_by_the_script() -> None:
    shots = sorted((DOCS / "_static" / "screenshots").glob("*.png"))
    script = (DOCS / "screenshots.py").read_text()
    pages = "\n".join(p.read_text() for p in DOCS.rglob("*.md")) + (ROOT / "README.md").read_text()
    assert {s.stem for s in shots} >= {"timeline", "diff"}
    for shot in shots:
        assert f'"{shot.stem}"' in script, f"docs/screenshots.py does not make {shot.name}"
        assert f"screenshots/{shot.name}" in pages, f"no page shows {shot.name}"
        head = shot.read_bytes()[:24]
        assert head[:8] == b"\x89PNG\r\n\x1a\n", shot
