"""README.md is a front page whose example runs as shown: its first Python block is a whole
program, and what that program prints has the shape of the output the README shows under it
(the same headers, columns, kernel and range names and counts; times masked as the docs'
examples mask them, ``docs/examples/run.py``). The README may cut the output with a line
``...``; the lines it does show must be printed, in that place."""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
CUT = "..."
_FENCE = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def _run_py() -> ModuleType:
    """``docs/examples/run.py``: how the docs' examples are run and their output masked."""
    where = str(ROOT / "docs" / "examples")
    sys.path.insert(0, where)
    try:
        return importlib.import_module("run")
    finally:
        sys.path.remove(where)


def example_and_output(text: str) -> tuple[str, str]:
    """The README's first ``python`` block and the first ``text`` block after it."""
    blocks = [(m.group(1), m.group(2), m.start()) for m in _FENCE.finditer(text)]
    code, at = next((body, start) for lang, body, start in blocks if lang == "python")
    shown = next(body for lang, body, start in blocks if lang == "text" and start > at)
    return code, shown


def _lines(text: str) -> list[str]:
    """The masked lines of ``text``, in order (``run.normalize`` line by line: it drops blank
    lines and sorts, so one line at a time keeps the order)."""
    normalize = _run_py().normalize
    return [n for line in text.splitlines() for n in normalize(line)]


def shape_mismatch(shown: str, printed: str) -> str | None:
    """Why ``printed`` does not have the shape of ``shown``, or ``None`` where it does.

    ``shown`` is cut into runs of lines at each line ``...``. Each run must be printed as a
    run of as many consecutive lines, in the same order as the runs; within a run, rows may
    swap places (rows of equal standing do as their times do). The first run starts the
    output unless ``shown`` starts with ``...``; the last ends it unless ``shown`` ends with
    ``...``."""
    raw = shown.strip("\n").splitlines()
    runs: list[list[str]] = [[]]
    for line in raw:
        if line.strip() == CUT:
            runs.append([])
        else:
            runs[-1].extend(_lines(line))
    got = _lines(printed)
    open_start = bool(raw) and raw[0].strip() == CUT
    open_end = bool(raw) and raw[-1].strip() == CUT
    pos = 0
    for i, run in enumerate(runs):
        if not run:
            continue
        first, last = i == 0 and not open_start, i == len(runs) - 1 and not open_end
        starts = [0] if first else range(pos, len(got) - len(run) + 1)
        if last:
            starts = [s for s in starts if s == len(got) - len(run)]
        match = next((s for s in starts if sorted(got[s : s + len(run)]) == sorted(run)), None)
        if match is None:
            missing = sorted(set(run) - set(got[pos:]))
            return f"run {i + 1} of the shown output is not printed; lines not printed: {missing}"
        pos = match + len(run)
    return None


def _slug(heading: str) -> str:
    """A Markdown heading's anchor as code hosts make it (GitHub, GitLab)."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _file_of(path: str) -> Path:
    """A linked file: in the checkout; a package's source, where only the installed package
    has it (the built wheel's tests run beside a copy of tests/, docs/ and README.md)."""
    page = ROOT / path
    top = path.split("/")[0]
    if not page.exists() and top.startswith("kprof"):
        spec = importlib.util.find_spec(top)
        if spec is not None and spec.submodule_search_locations:
            page = Path(next(iter(spec.submodule_search_locations))).parent / path
    return page


def test_the_readmes_links_land_on_files_and_headings_that_exist() -> None:
    """Relative links only, to files of the checkout (a code host renders them), and to pages
    that read as Markdown there: not the reference's ``.rst`` pages of autodoc directives."""
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", README.read_text()):
        assert "://" not in target, f"README.md links outside the checkout: {target}"
        path, _, anchor = target.partition("#")
        page = _file_of(path)
        if not page.is_file() or page.suffix == ".rst":
            broken.append(target)
        elif anchor:
            headings = re.findall(r"^#+\s+(.+)$", page.read_text(), re.MULTILINE)
            if anchor not in {_slug(h) for h in headings}:
                broken.append(target)
    assert not broken, f"README.md's links that land nowhere: {broken}"


def test_the_readme_shows_a_cut_output_of_its_example() -> None:
    code, shown = example_and_output(README.read_text())
    assert "print(p)" in code and "kprof.profile(" in code
    assert "recording 10 ranges, 20 kernels and 0 copies" in shown
    assert shown.splitlines()[-1] == CUT  # the analysis' wide table is left to the docs


SHOWN = """Profiled 2.69 ms, recording 10 ranges, 20 kernels and 0 copies.

Device-side activity:
 Time (%)  Total time  Calls  Name
   66.9 %      1.8 ms     10  add
   22.9 %      616 µs     10  mul2
..."""


@pytest.mark.parametrize(
    "printed,ok",
    [
        (SHOWN.replace("2.69 ms", "31 ms").replace("66.9", "60.1") + "\nmore", True),
        (
            SHOWN.replace("  add\n   22.9 %      616 µs     10  mul2", "  mul2\n 1 % 1 ms 10  add"),
            True,
        ),
        (SHOWN.replace("10  mul2", "9  mul2"), False),  # a count
        (SHOWN.replace("mul2", "mul3"), False),  # a kernel's name
        (SHOWN.replace("10 ranges", "5 ranges"), False),
        (SHOWN.replace("  Name", "  Span  Name"), False),  # a column
        (SHOWN.replace("Device-side activity:\n", ""), False),  # a header
        ("Host-side activity:\n" + SHOWN, False),  # something before the first line shown
    ],
)
def test_the_shape_comparison_can_fail(printed: str, ok: bool) -> None:
    assert (shape_mismatch(SHOWN, printed.replace("\n...", "")) is None) is ok


def test_without_a_cut_the_output_must_end_where_the_shown_one_does() -> None:
    whole = SHOWN.removesuffix("\n...")
    assert shape_mismatch(whole, whole) is None
    assert shape_mismatch(whole, whole + "\n ! a note") is not None


def test_the_readmes_example_runs_and_prints_what_it_shows(tmp_path: Path) -> None:
    pytest.importorskip("pyopencl")
    import kprof_opencl

    if kprof_opencl.default_device() is None:
        pytest.skip("no OpenCL device")
    code, shown = example_and_output(README.read_text())
    (tmp_path / "first.py").write_text(code)
    # As the docs' examples run (docs/examples/run.py): no KPROF_ setting of the caller's, the
    # OpenCL plugin alone, a terminal of 100 columns.
    env = {k: v for k, v in os.environ.items() if not k.startswith("KPROF_")}
    env.pop("CI", None)
    env.update(KPROF_PLUGINS="opencl", COLUMNS="100")
    r = subprocess.run(
        [sys.executable, "first.py"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    # Exact device times: no row timed approximately, no warning that the queue lacks profiling.
    assert " ~" not in r.stdout and "ProfilingDisabledWarning" not in r.stderr
    # Nothing below the cut warns either (a range without a span, with no current queue).
    notes = [line for line in r.stdout.splitlines() if line.lstrip().startswith("! ")]
    assert not notes, f"the README's example gets warnings: {notes}"
    why = shape_mismatch(shown, r.stdout)
    assert why is None, f"README.md shows another output than its example prints: {why}\n{r.stdout}"
