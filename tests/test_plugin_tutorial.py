"""The plugin tutorial (docs/plugins/tutorial.md) builds a plugin up in steps. Each step runs from
the reader's folder, installed with pip, and prints what the page shows: the same names, counts
and columns (times masked). The page shows every file it asks the reader to save, and each step
only adds to the one before."""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

from kprof_core.host.hookspecs import RESOLVED_HOOKS

ROOT = Path(__file__).resolve().parent.parent
HERE = ROOT / "examples" / "plugin" / "tutorial"
PAGE = ROOT / "docs" / "plugins" / "tutorial.md"


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: The tutorial's runner, and the docs examples' runner for its masking of times.
RUN = _load("kprof_plugin_tutorial_run", HERE / "run.py")
DOCS_RUN = _load("kprof_docs_examples_run", ROOT / "docs" / "examples" / "run.py")


def shape(text: str) -> list[str]:
    """What stays from run to run: the docs' masking (times and shares masked, spaces collapsed,
    lines sorted), with the recorder's line masked too (compiled or pure Python, by install),
    and pytest's rules of ``=`` one run (their width follows the time's digits: 2.20s, 12.61s)."""
    text = re.sub(r"(?m)^Recorder: .*$", "Recorder: <which>", text)
    return DOCS_RUN.normalize(re.sub(r"={3,}", "===", text))


def committed(name: str) -> str:
    return (HERE / f"{name}.out.txt").read_text()


#: What the page's text says of each output: (pattern, whether it must be there).
CLAIMS: dict[str, list[tuple[str, bool]]] = {
    "backends": [
        (
            r"(?m)^workqueue +kprof-workqueue 1\.0 +workqueue 1\.0 +workqueue worker +host fallback"
            r" +available$",
            True,
        ),
        (r"(?m)^Recorder: ", True),
    ],
    "step2_kernel": [
        (r"recording 0 ranges, 3 kernels and 0 copies", True),
        (r"Device-side activity:\n.*\n.*\n.* 3 .* run_scale\n", True),
        (r"clock not aligned", True),
    ],
    "step3_ranges": [
        (r"recording 8 ranges, 8 kernels and 0 copies", True),
        (r"(?m)^Device-side ranges", True),
        (r"(?m) 4 .* step$", True),
        (r"(?m) 4 .* update$", True),
        (r"clock not aligned", False),
        (r"workqueue worker", True),
        (
            r"(?m)^workqueue worker: device_clock read between two host readings, within \d+ ns$",
            True,
        ),
    ],
    "step4_capture": [
        (r"recording 3 ranges, 3 kernels and 6 copies", True),
        (r"Throughput", True),
        (r"(?m) 3 .*/s  \[copy host to device\]$", True),
        (r"(?m) 3 .*/s  \[copy device to host\]$", True),
        (r"(?m)^ ! ", False),  # no warning: the ranges have a queue to time on
    ],
    "conformance": [
        (r"(?m)^\.\.\.$", True),
        (r"\b11 passed\b", True),
        (r"skipped|failed|error", False),
    ],
}


def test_every_step_has_its_claims() -> None:
    assert set(CLAIMS) == set(RUN.STEPS)


@pytest.fixture(scope="module")
def outputs() -> dict[str, str]:
    """Every step, run again as the reader runs it (a fresh folder, pip, each step's file)."""
    return RUN.run_all()


@pytest.mark.parametrize("name", list(RUN.STEPS))
def test_each_step_prints_what_the_page_shows(outputs: dict[str, str], name: str) -> None:
    now = outputs[name]
    assert shape(now) == shape(committed(name)), (
        f"tutorial step {name} now prints something else: run "
        f"python examples/plugin/tutorial/run.py and read the diff.\nnow:\n{now}"
    )
    for pattern, present in CLAIMS[name]:
        assert bool(re.search(pattern, now)) == present, (pattern, now)


@pytest.mark.parametrize("name", list(RUN.STEPS))
def test_the_outputs_shown_say_what_the_page_says(name: str) -> None:
    for pattern, present in CLAIMS[name]:
        assert bool(re.search(pattern, committed(name))) == present, (name, pattern)


def test_the_shape_check_sees_names_counts_and_columns_but_not_times() -> None:
    text = committed("step4_capture")
    same = re.sub(r"\d+(\.\d+)? (ms|µs)", "9.99 ms", text)
    assert same != text and shape(same) == shape(text)
    changed = [
        text.replace("3 kernels", "4 kernels"),
        text.replace("[copy device to host]", "[copy device to device]"),
        text.replace("Throughput", "Bandwidth"),
        "\n".join(line for line in text.splitlines() if not line.endswith(" step")),
    ]
    for other in changed:
        assert other != text and shape(other) != shape(text)


# -- the page ------------------------------------------------------------------------------------

_INCLUDE = re.compile(r"^```\{literalinclude\} (\S+)\n((?::\S+:.*\n)*)```$", re.M)
#: Each step's plugin file, the part the page shows of it (from that line on), and the file it
#: adds to.
STEP_FILES = [
    (HERE / "step1" / "kprof_workqueue.py", None, None),
    (HERE / "step2" / "kprof_workqueue.py", "# Step 2", HERE / "step1" / "kprof_workqueue.py"),
    (HERE / "step3" / "kprof_workqueue.py", "# Step 3", HERE / "step2" / "kprof_workqueue.py"),
    (
        ROOT / "examples" / "plugin" / "kprof_workqueue.py",
        "# Step 4",
        HERE / "step3" / "kprof_workqueue.py",
    ),
]


def _includes() -> dict[Path, str]:
    """Each file the page includes (resolved), with its options."""
    text = PAGE.read_text()
    return {
        (PAGE.parent.parent / src.lstrip("/")).resolve(): opts
        for src, opts in _INCLUDE.findall(text)
    }


@pytest.mark.parametrize(
    "path",
    [
        ROOT / "examples" / "plugin" / "workqueue.py",
        ROOT / "examples" / "plugin" / "pyproject.toml",
        ROOT / "examples" / "plugin" / "test_workqueue_conformance.py",
        HERE / "step1" / "kprof_workqueue.py",
        *(HERE / f.name for f in RUN.FILES if f.parent == HERE),
        *(HERE / f"{name}.out.txt" for name in RUN.STEPS),
    ],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_the_page_shows_the_file_whole(path: Path) -> None:
    """What the reader saves or sees is on the page, whole, from the file that runs."""
    includes = _includes()
    assert path.resolve() in includes, f"docs/plugins/tutorial.md does not include {path}"
    assert (
        not includes[path.resolve()].count(":lines:") and ":start-" not in includes[path.resolve()]
    ), f"docs/plugins/tutorial.md shows only part of {path}"


@pytest.mark.parametrize("path,marker,before", STEP_FILES[1:], ids=["step2", "step3", "step4"])
def test_each_step_only_adds_to_the_one_before(path: Path, marker: str, before: Path) -> None:
    """ "Add these hooks to the end of kprof_workqueue.py" is true: the step's file is the one
    before with more at its end, and the page shows all of that part."""
    text, prior = path.read_text(), before.read_text()
    assert text.startswith(prior), f"{path} does not start with {before}"
    added = text[len(prior) :]
    assert added.lstrip("\n").startswith(marker), f"{path}'s addition does not begin at {marker!r}"
    assert text.count(marker) == 1
    opts = _includes().get(path.resolve(), "")
    assert f':start-at: "{marker}"' in opts, f"the page does not show {path} from {marker!r}"


def test_step_1_only_names_the_backend() -> None:
    path = HERE / "step1" / "kprof_workqueue.py"
    tree = ast.parse(path.read_text())
    hooks = [
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef)
        and any("hookimpl" in ast.unparse(d) for d in node.decorator_list)
    ]
    assert hooks == ["describe_backend"]
    assert len(path.read_text().splitlines()) <= 20


def test_the_page_shows_each_command_as_typed() -> None:
    shown = "\n".join(re.findall(r"^```sh\n(.*?)^```$", PAGE.read_text(), re.M | re.S))
    for _, argv in RUN.STEPS.values():
        assert RUN.as_typed(argv) in shown.splitlines(), RUN.as_typed(argv)
    assert "pip install -e ." in shown.splitlines()


def test_the_page_names_every_hook() -> None:
    text = PAGE.read_text()
    missing = [h for h in RESOLVED_HOOKS if f"`{h}`" not in text]
    assert not missing, f"the tutorial's table of hooks does not name {missing}"


def test_the_page_pulls_in_nothing_from_the_readme() -> None:
    """The README's text points to "the tutorial": included here, it would point at itself."""
    assert "README" not in PAGE.read_text()


def test_the_page_points_to_no_file_outside_an_installed_kprof() -> None:
    """A pip user has kprof's installed packages, and what the page shows: no tests/,
    examples/ or docs/ path of the repository."""
    text = _INCLUDE.sub("", PAGE.read_text())
    assert not re.findall(r"\b(tests|examples|docs|bench)/\S+", text)
