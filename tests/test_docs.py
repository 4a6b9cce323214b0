"""The plugin author's reference is complete: every hook has a docstring, and README.md
documents each one under a heading ``### hook_name(arg1, arg2)`` naming all its arguments."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from kprof_core import hookspecs

README = Path(__file__).resolve().parent.parent / "README.md"
HOOKS = [fn for name, fn in vars(hookspecs).items()
         if inspect.isfunction(fn) and hasattr(fn, f"{hookspecs.PROJECT}_spec")]


def test_there_are_hooks() -> None:
    assert {"record_timestamp", "elapsed_time"} <= {h.__name__ for h in HOOKS}


@pytest.mark.parametrize("hook", HOOKS, ids=lambda h: h.__name__)
def test_every_hookspec_has_a_docstring(hook: object) -> None:
    doc = inspect.getdoc(hook)
    assert doc and len(doc.split()) >= 10, f"hookspec {hook.__name__} needs a docstring"  # type: ignore[attr-defined]


@pytest.mark.parametrize("hook", HOOKS, ids=lambda h: h.__name__)
def test_readme_documents_every_hook(hook: object) -> None:
    assert README.exists(), "README.md is missing: it must document every hook"
    name = hook.__name__  # type: ignore[attr-defined]
    args = ", ".join(inspect.signature(hook).parameters)  # type: ignore[arg-type]
    headings = re.findall(rf"^###\s+`?{name}\((.*?)\)`?\s*$", README.read_text(), re.MULTILINE)
    assert headings, f"README.md has no heading '### {name}({args})'"
    assert any(h.replace(" ", "") == args.replace(" ", "") for h in headings), (
        f"README.md's heading for {name} must name every argument: '### {name}({args})', "
        f"found {headings}")
