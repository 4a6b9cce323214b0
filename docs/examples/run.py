"""Run every example of the docs and write the output each printed beside it (``NAME.out.txt``).

    python docs/examples/run.py            # rewrite every output
    python docs/examples/run.py NAME...    # only these

The pages include the example and its output from these files; ``tests/test_docs_site.py``
runs each example again and compares what it prints with the committed output, numbers with
a unit (times, percentages) masked, since they differ from run to run while every name,
count and row must not.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: Each example: its name and the command that runs it (in a fresh directory, the example's
#: files copied there). Later ones may use what earlier ones wrote: they share the directory.
PY = sys.executable
PYTEST = [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_kernels.py"]
EXAMPLES: dict[str, list[str]] = {
    "first_profile": [PY, "first_profile.py"],
    "show_first": [PY, "-m", "kprof", "show", "first.kprof"],
    "reading": [PY, "reading.py"],
    "analysis": [PY, "analysis.py"],
    "memory": [PY, "memory.py"],
    "stacks": [PY, "stacks.py"],
    "diff": [PY, "-m", "kprof", "diff", "base.kprof", "new.kprof", "--fail-above", "1.10"],
    "training_loop": [PY, "training_loop.py"],
    "show_windows": [PY, "-m", "kprof", "show", "run"],
    "drift": [PY, "-m", "kprof", "drift", "soak"],
    "pytest_save": [*PYTEST, "--kprof-save", ".kprof-baseline"],
    "pytest_compare": [
        *["env", "N=4194304", *PYTEST],
        *["--kprof-compare", ".kprof-baseline", "--kprof-fail-above", "1.10"],
    ],
}
#: The exit status each example must end with where it is not 0.
EXIT: dict[str, int] = {"diff": 1, "pytest_compare": 1}
#: Copied into the examples' directory. base.kprof and new.kprof are two real runs of the
#: reference workload on PoCL, kept so that ``kprof diff``'s verdicts are the same on every run:
#: ``kprof demo --steps 20 -o base.kprof``, then ``--size 8388608 -o new.kprof``. soak/ holds
#: the windows of one run of training_loop.py, kept for the same reason (``kprof drift``).
FILES = [
    "first_profile.py",
    "reading.py",
    "analysis.py",
    "memory.py",
    "stacks.py",
    "test_kernels.py",
    "training_loop.py",
    "base.kprof",
    "new.kprof",
    *(f"soak/window-{i:04d}.kprof" for i in range(1, 7)),
]

_NUMBER = re.compile(
    r"(?:<\s?)?-?\d+(?:\.\d+)?(?:e[-+]?\d+)?\s?(?:(?:[KMGT]i?)?B/s|ns|µs|ms|s|%|x)(?![A-Za-z])"
    r"|\bp[=<]\d[\d.e-]*"
)
_VERDICT = re.compile(
    r"\s*(launch-bound|device-bound|host-bound|dependency-bound|start-bound|too few device rows"
    r"|cannot tell|no device work|no exactly timed)\b"
)

_DEVICE = re.compile(r"pthread-[^,:]*?(?=,|:|\s{2,}|$)")


_EARLY = "(negative launch-to-start delays"

# A tree row: its guides ("│  ", "   ") and branch ("├─ " or "└─ ") say whether a sibling
# follows, which the siblings' order (by device time, so by the load) decides; only the
# depth is kept.
_BRANCH = re.compile(r"((?:│  |   )*)[├└]─ ")


def _depth(m: re.Match[str]) -> str:
    return f"<depth {len(m.group(1)) // 3 + 1}> "


def normalize(text: str) -> list[str]:
    """The lines of ``text`` with timings masked, spaces collapsed, in sorted order (rows of
    equal standing swap places from run to run as their times do)."""
    out = []
    for line in text.splitlines():
        if _VERDICT.match(line):  # the analysis' verdict follows the machine's load
            line = "<verdict>"
        line = _BRANCH.sub(_depth, line)
        line = _NUMBER.sub("#", line)
        line = _DEVICE.sub("<cpu>", line)  # PoCL names the machine's CPU
        if "of busy)" in line:  # an analysis row: the queue depth follows the load too
            line = re.sub(r"\d+(\.\d+)?", "#", line)
        line = re.sub(r"[─]+", "─", line)
        line = " ".join(line.split())
        if line and not line.startswith(_EARLY):  # said only when the load makes it so
            out.append(line)
    return sorted(out)


def run_all(names: list[str] | None = None) -> dict[str, str]:
    """Run the examples (all, or ``names`` and what they depend on: everything before them)
    and return what each printed."""
    wanted = (
        list(EXAMPLES) if not names else list(EXAMPLES)[: 1 + max(map(list(EXAMPLES).index, names))]
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("KPROF_")}
    env["KPROF_PLUGINS"] = "opencl"
    env["COLUMNS"] = "100"
    # pytest does not shorten its summary lines where CI or BUILD_NUMBER is set (.ci/run sets
    # CI): the examples print as on a user's terminal.
    env.pop("CI", None)
    env.pop("BUILD_NUMBER", None)
    outputs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for f in FILES:
            (Path(tmp) / f).parent.mkdir(exist_ok=True)
            (Path(tmp) / f).write_bytes((HERE / f).read_bytes())
        for name in wanted:
            proc = subprocess.run(
                EXAMPLES[name], cwd=tmp, env=env, capture_output=True, text=True, timeout=300
            )
            if proc.returncode != EXIT.get(name, 0):
                raise RuntimeError(
                    f"docs example {name} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}"
                )
            outputs[name] = proc.stdout
    return outputs


def main(argv: list[str]) -> int:
    for name, text in run_all(argv or None).items():
        if not argv or name in argv:
            (HERE / f"{name}.out.txt").write_text(text)
            print(f"wrote docs/examples/{name}.out.txt")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
