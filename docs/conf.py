"""Sphinx configuration of kprof's docs: ``sphinx-build -n -W -b html docs docs/_build/html``.

Offline by design: no intersphinx (nothing is fetched), so external names the docstrings
mention are listed in ``nitpick_ignore_regex`` instead.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))
sys.path.insert(0, str(DOCS.parent))
# argparse wraps help at the terminal's width: fixed, so every build renders the same text.
os.environ["COLUMNS"] = "88"

from kprof_core._version import __version__  # noqa: E402

project = "kprof"
author = "kprof contributors"
copyright = "kprof contributors"
release = version = __version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx_argparse_cli",
    "kprof_docs",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build", "examples/*.out.txt", "README.md"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

html_theme = "furo"
html_title = f"kprof {release}"
html_static_path = ["_static"]
# Wide tables and code blocks: see _static/kprof.css.
html_css_files = ["kprof.css"]
html_show_sourcelink = False

nitpicky = True
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_description_target = "documented"
autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": False}
# Names the signatures and docstrings mention that no page of this site defines: the standard
# library and third-party types (no intersphinx: the build is offline), and kprof_core's
# private helpers that appear only in annotations.
nitpick_ignore_regex = [
    (
        "py:class",
        r"(typing|collections\.abc|contextlib|types|os|io|pathlib|argparse|array|enum|re)\..*",
    ),
    ("py:class", r"(Any|Callable|Iterator|Iterable|Sequence|Mapping|MutableMapping|TypeVar|array)"),
    ("py:class", r"(T|F|K|V|_T|P|optional|callable|iterable|mapping|function)"),
    ("py:class", r"(pluggy|pandas|numpy|pytest|_pytest|IPython|mpi4py)\..*"),
    ("py:class", r"(pd\.DataFrame|DataFrame|np\.ndarray|PathOrFile|Path|IO|TextIO|BinaryIO)"),
    ("py:class", r"kprof_core\..*"),
    ("py:mod", r"kprof_core\..*"),
]


def setup(app: object) -> None:
    """The notebook guide's cells are ``ipython`` blocks (magics): IPython's lexer where it is
    installed (the test extra), Python's otherwise (the docs extra alone)."""
    try:
        import IPython.lib.lexers  # noqa: F401
    except ImportError:
        from pygments.lexers import PythonLexer

        app.add_lexer("ipython", PythonLexer)  # type: ignore[attr-defined]
