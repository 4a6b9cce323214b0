"""kprof's Sphinx extension: reference pages generated from the code, and a completeness check.

Directives (each renders from the one definition the code itself uses):

- ``kprof-hookspecs MODULE``: every hookspec defined in MODULE, in source order, through
  autodoc, with the pluggy options read from the spec (``kprof_spec``), never written by hand.
- ``kprof-envvars AUDIENCE``: the ``envvar`` entries of ``kprof_core.envvars.VARIABLES``.
- ``kprof-file-columns``: the ``.kprof`` format's versions, readers and column tables.
- ``kprof-pytest-options``: the options of kprof's pytest plugin, from its ``pytest_addoption``.

At the end of reading, every hook kprof resolves, every environment variable of the registry
and every public name of ``kprof``, ``kprof.plugin`` and ``kprof.testing`` must have a
reference entry: a missing one is a warning, so ``-W`` fails the build.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)

PUBLIC_MODULES = ("kprof", "kprof.plugin", "kprof.testing")


def _parse(directive: SphinxDirective, lines: list[str]) -> list[nodes.Node]:
    node = nodes.section()
    node.document = directive.state.document
    directive.state.nested_parse(StringList(lines, "<kprof_docs>"), 0, node)
    return list(node.children)


def hooks_of(modname: str) -> list[Any]:
    """The hookspecs defined in ``modname`` (not imported into it), in source order."""
    from kprof_core.host.markers import PROJECT

    mod = importlib.import_module(modname)
    found = [
        fn
        for fn in vars(mod).values()
        if inspect.isfunction(fn) and fn.__module__ == modname and hasattr(fn, f"{PROJECT}_spec")
    ]
    return sorted(found, key=lambda fn: fn.__code__.co_firstlineno)


def _spec_note(fn: Any) -> str:
    from kprof_core.host.markers import PROJECT

    opts = getattr(fn, f"{PROJECT}_spec")
    flags = [k for k in ("firstresult", "historic") if opts.get(k)]
    if opts.get("warn_on_impl"):
        flags.append("warns on implementation")
    said = ", ".join(f"``{f}``" for f in flags) or "none"
    return f"*pluggy spec options:* {said}."


class HookspecsDirective(SphinxDirective):
    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        modname = self.arguments[0]
        lines: list[str] = []
        for fn in hooks_of(modname):
            lines += [f".. autofunction:: {modname}.{fn.__name__}", "", f"   {_spec_note(fn)}", ""]
        self.env.note_dependency(importlib.import_module(modname).__file__ or "")
        return _parse(self, lines)


class EnvvarsDirective(SphinxDirective):
    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        from kprof_core import envvars

        audience = self.arguments[0]
        lines: list[str] = []
        for var in envvars.VARIABLES:
            if var.audience != audience:
                continue
            default = f"``{var.default}``" if var.default else "unset"
            lines += [f".. envvar:: {var.name}", "", f"   {var.description}", ""]
            lines += [f"   *Default:* {default}.", ""]
        self.env.note_dependency(envvars.__file__)
        return _parse(self, lines)


class FileColumnsDirective(SphinxDirective):
    def run(self) -> list[nodes.Node]:
        from kprof_core.io import fileformat, storage
        from kprof_core.io.read_v5 import V5_COLUMNS

        versions = " and ".join(str(v) for v in sorted(storage.READERS))
        lines = [
            f"This kprof writes format version **{fileformat.FORMAT_VERSION}** and reads "
            f"versions {versions} (``kprof_core.io.storage.READERS``: one reader per version).",
            "",
            ".. list-table::",
            "   :header-rows: 1",
            "",
            "   * - Table",
            "     - Column",
            "     - Holds",
        ]
        for table, cols in V5_COLUMNS.items():
            for col in cols:
                kind = (
                    "nanoseconds on the host clock"
                    if f"{table}.{col}" in fileformat.TIME_COLUMNS
                    else "int64"
                )
                lines += [f"   * - ``{table}``", f"     - ``{col}``", f"     - {kind}"]
        return _parse(self, lines)


class _OptionRecorder:
    """Stands for pytest's parser: records what ``pytest_addoption`` adds."""

    def __init__(self) -> None:
        self.options: list[tuple[tuple[str, ...], dict[str, Any]]] = []

    def getgroup(self, *args: Any, **kwargs: Any) -> _OptionRecorder:
        return self

    def addoption(self, *names: str, **kwargs: Any) -> None:
        self.options.append((names, kwargs))


def pytest_options() -> list[tuple[tuple[str, ...], dict[str, Any]]]:
    """The options kprof's pytest plugin adds, from its own ``pytest_addoption``."""
    import kprof_pytest

    recorder = _OptionRecorder()
    kprof_pytest.pytest_addoption(recorder)  # type: ignore[arg-type]
    return recorder.options


class PytestOptionsDirective(SphinxDirective):
    def run(self) -> list[nodes.Node]:
        import kprof_pytest

        lines = [".. program:: pytest", ""]
        for names, kwargs in pytest_options():
            metavar = kwargs.get("metavar")
            sig = ", ".join(f"{n} {metavar}" if metavar else n for n in names)
            lines += [f".. option:: {sig}", "", f"   {kwargs.get('help', '')}.", ""]
        self.env.note_dependency(kprof_pytest.__file__ or "")
        return _parse(self, lines)


def _check_complete(app: Sphinx, env: Any) -> None:
    """Warn for every hook, variable and public name that has no reference entry."""
    from kprof_core import envvars
    from kprof_core.host.hookspecs import RESOLVED_HOOKS

    py = env.get_domain("py").objects
    std = env.get_domain("std").objects
    hooks = {name.rsplit(".", 1)[-1] for name, obj in py.items() if obj.objtype == "function"}
    for hook in RESOLVED_HOOKS:
        if hook not in hooks or not any(
            n.endswith(f".{hook}") and n.startswith("kprof_core.host.hookspecs") for n in py
        ):
            logger.warning("kprof_docs: hook %s has no reference entry", hook)
    for var in envvars.VARIABLES:
        if ("envvar", var.name) not in std:
            logger.warning("kprof_docs: environment variable %s has no reference entry", var.name)
    for modname in PUBLIC_MODULES:
        mod = importlib.import_module(modname)
        for name in getattr(mod, "__all__", []):
            if name.startswith("__"):
                continue
            if f"{modname}.{name}" not in py:
                logger.warning("kprof_docs: %s.%s has no reference entry", modname, name)


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("kprof-hookspecs", HookspecsDirective)
    app.add_directive("kprof-envvars", EnvvarsDirective)
    app.add_directive("kprof-file-columns", FileColumnsDirective)
    app.add_directive("kprof-pytest-options", PytestOptionsDirective)
    app.connect("env-check-consistency", _check_complete)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
