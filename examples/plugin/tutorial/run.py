"""Run the plugin tutorial's steps as its reader does, and write what each printed beside it.

    python examples/plugin/tutorial/run.py    # rewrite every NAME.out.txt

The reader's folder is made afresh: ``pyproject.toml``, ``workqueue.py`` and the step's
``kprof_workqueue.py``. pip installs it (the same build as the reader's ``pip install -e .``,
made editable here by keeping only its ``.dist-info`` and importing the modules from the
folder), then each step's plugin replaces the file, as the reader edits it, and its program
runs. ``tests/test_plugin_tutorial.py`` runs them again and compares the shape of what they
print (names, counts, columns; not times) with the committed outputs, which the tutorial shows.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PLUGIN = HERE.parent  # examples/plugin: the finished plugin, its package and its tests
PY = sys.executable

#: Each output: the plugin file in place while it runs and the command (in the reader's folder).
STEPS: dict[str, tuple[Path, list[str]]] = {
    "backends": (
        HERE / "step1" / "kprof_workqueue.py",
        ["env", "KPROF_PLUGINS=workqueue", PY, "-m", "kprof", "backends"],
    ),
    "step2_kernel": (HERE / "step2" / "kprof_workqueue.py", [PY, "step2_kernel.py"]),
    "step3_ranges": (HERE / "step3" / "kprof_workqueue.py", [PY, "step3_ranges.py"]),
    "step4_capture": (PLUGIN / "kprof_workqueue.py", [PY, "step4_capture.py"]),
    "conformance": (
        PLUGIN / "kprof_workqueue.py",
        [PY, "-m", "pytest", "-v", "test_workqueue_conformance.py"],
    ),
}
#: Copied into the reader's folder before the first step.
FILES = [
    PLUGIN / "pyproject.toml",
    PLUGIN / "workqueue.py",
    PLUGIN / "test_workqueue_conformance.py",
    HERE / "step2_kernel.py",
    HERE / "step3_ranges.py",
    HERE / "step4_capture.py",
]


def as_typed(argv: list[str]) -> str:
    """A step's command as the tutorial shows it (``kprof``, ``python``)."""
    text = " ".join(argv).removeprefix("env ")
    return text.replace(f"{PY} -m kprof", "kprof").replace(PY, "python")


def crop(name: str, text: str) -> str:
    """pytest's header names this machine (platform, paths, plugins): one ``...`` line instead."""
    if name != "conformance":
        return text
    return re.sub(r"(?ms)^platform .*?\n(?=collecting|collected)", "...\n", text)


def _install(folder: Path, site: Path) -> None:
    """``pip install -e .``: the package built by pip, its modules imported from ``folder``."""
    # Offline: the build uses this environment's setuptools (kprof's test extra brings one
    # that builds wheels itself) instead of downloading one.
    pip = [PY, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation"]
    proc = subprocess.run(
        [*pip, "--target", str(site), "."],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"pip could not install the tutorial's folder:\n{proc.stderr}")
    for module in site.glob("*.py"):
        module.unlink()  # as in an editable install, the folder's own files are imported
    shutil.rmtree(site / "__pycache__", ignore_errors=True)
    shutil.rmtree(folder / "build", ignore_errors=True)


def run_all() -> dict[str, str]:
    """Run every step in order in a fresh folder and return what each printed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KPROF_", "PYTEST_"))}
    env["COLUMNS"] = "100"
    env.pop("CI", None)  # pytest prints as on the reader's terminal
    env.pop("BUILD_NUMBER", None)
    outputs = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder, site = Path(tmp) / "kprof-workqueue", Path(tmp) / "site"
        folder.mkdir()
        for f in [*FILES, STEPS["backends"][0]]:
            shutil.copy(f, folder / f.name)
        _install(folder, site)
        env["PYTHONPATH"] = os.pathsep.join([str(site), str(folder)])
        for name, (plugin, argv) in STEPS.items():
            shutil.copy(plugin, folder / "kprof_workqueue.py")
            proc = subprocess.run(
                argv, cwd=folder, env=env, capture_output=True, text=True, timeout=300
            )
            if proc.returncode != 0:
                raise RuntimeError(
                    f"tutorial step {name} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}"
                )
            outputs[name] = crop(name, proc.stdout)
    return outputs


def main() -> int:
    for name, text in run_all().items():
        (HERE / f"{name}.out.txt").write_text(text)
        print(f"wrote {(HERE / f'{name}.out.txt').relative_to(PLUGIN.parent.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
