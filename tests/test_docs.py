"""The reference is complete: every hook has a docstring with a ``:param:`` field per argument,
the plugin tutorial names each one and points to that reference; every public name of ``kprof``
and every public attribute of ``Profile``, the records and what plugins return is documented,
and docstrings' references to attributes (``Profile.clocks``) resolve."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
from pathlib import Path
from typing import Any

import pytest

import kprof
import kprof_core
from kprof_core.data.records import DeviceClock, QueueRecord, ThreadRecord
from kprof_core.host import hookspecs
from kprof_core.host.backend import Backend
from kprof_core.host.markers import PROJECT

README = Path(__file__).resolve().parent.parent / "README.md"
DOCS = README.parent / "docs"
TUTORIAL = DOCS / "plugins" / "tutorial.md"
HOOKS = [
    fn
    for name, fn in vars(hookspecs).items()
    if inspect.isfunction(fn) and hasattr(fn, f"{PROJECT}_spec")
]


def test_there_are_hooks() -> None:
    assert {"record_timestamp", "elapsed_time"} <= {h.__name__ for h in HOOKS}


@pytest.mark.parametrize("hook", HOOKS, ids=lambda h: h.__name__)
def test_every_hookspec_has_a_docstring(hook: object) -> None:
    doc = inspect.getdoc(hook)
    assert doc and len(doc.split()) >= 10, f"hookspec {hook.__name__} needs a docstring"  # type: ignore[attr-defined]


@pytest.mark.parametrize("hook", HOOKS, ids=lambda h: h.__name__)
def test_every_hookspec_documents_each_parameter(hook: object) -> None:
    """The hookspecs are the reference: each argument has its ``:param name:`` field."""
    doc = inspect.getdoc(hook) or ""
    missing = [
        p
        for p in inspect.signature(hook).parameters  # type: ignore[arg-type]
        if not re.search(rf"^:param {p}:", doc, re.MULTILINE)
    ]
    assert not missing, f"hookspec {hook.__name__} has no ':param {missing[0]}:'"  # type: ignore[attr-defined]


def test_the_tutorial_lists_every_hook_and_points_to_the_reference() -> None:
    """The plugin tutorial teaches (which hook for what, the example plugin) and links to the
    reference rather than restating it: each hook is named there, none has a section of its
    own. (This table was README.md's until the README became a front page.)"""
    text = TUTORIAL.read_text()
    assert "kprof_core/host/hookspecs.py" in text
    for hook in HOOKS:
        name = hook.__name__  # type: ignore[attr-defined]
        assert f"`{name}`" in text, f"the tutorial's table of hooks does not name {name}"
        assert not re.search(rf"^#+\s+`?{name}\(", text, re.MULTILINE), (
            f"the tutorial restates {name}: its docstring in hookspecs.py is the reference"
        )


# -- the hook list is written once, in the hookspecs --------------------------------------------


def test_resolved_hooks_are_the_hookspecs_with_their_arguments() -> None:
    from kprof_core.host.hookspecs import RESOLVED_HOOKS

    specs = {h.__name__: tuple(inspect.signature(h).parameters) for h in HOOKS}
    assert RESOLVED_HOOKS == specs


def test_backend_declares_one_attribute_per_hook() -> None:
    """``Backend``'s annotations (which mypy reads) name exactly the hooks, in their order."""
    hooks = [n for n, t in Backend.__annotations__.items() if "Callable" in str(t)]
    assert hooks == [h.__name__ for h in HOOKS]


def test_the_defaults_implement_every_hook_with_its_arguments() -> None:
    """Every hook has a default: with the spec's arguments, or taking any (those answering
    ``None``, made from the hookspecs), and each answers what the spec says it does."""
    from kprof_core.host import defaults
    from kprof_core.host.backend import ANY_ARGUMENTS

    def arguments(fn: Any) -> tuple[str, ...] | str:
        return (
            "any" if getattr(fn, ANY_ARGUMENTS, False) else tuple(inspect.signature(fn).parameters)
        )

    impls = {
        name: arguments(fn)
        for name, fn in vars(defaults).items()
        if inspect.isfunction(fn) and hasattr(fn, f"{PROJECT}_impl")
    }
    specs = {h.__name__: tuple(inspect.signature(h).parameters) for h in HOOKS}
    assert set(impls) == set(specs)
    assert {n: a for n, a in impls.items() if a != "any"} == {
        "elapsed_time": specs["elapsed_time"],
        "queue_info": specs["queue_info"],
    }
    backend = kprof.plugin.Backend("nothing", object())
    for name, fn in vars(defaults).items():
        if getattr(fn, ANY_ARGUMENTS, False):
            assert fn(backend, *[None] * (len(specs[name]) - 1)) is None, name
            assert fn() is None, name  # as pluggy calls it


# -- every public name of the API is documented (as datasette does for its hooks) --------------

# The installed package (a wheel in .ci/run's last run), not a path beside the tests.
KPROF_CORE = Path(kprof_core.__file__).resolve().parent


def _sample(cls: type) -> object:
    """An instance, to find the attributes its ``__init__`` sets."""
    if cls is kprof.Profile:
        return kprof.Profile()
    if cls is Backend:
        return Backend("sample", object())
    return None


# The classes a user or a plugin author reads: Profile and what it holds, the record views, and
# what plugins return or receive.
DOCUMENTED_CLASSES = [
    kprof.Profile,
    kprof.Summary,
    kprof.SummaryRow,
    kprof.Site,
    kprof.SiteRow,
    kprof.KernelRecord,
    kprof.RangeRecord,
    kprof.MarkerRecord,
    QueueRecord,
    ThreadRecord,
    DeviceClock,
    kprof.plugin.BackendInfo,
    kprof.plugin.QueueInfo,
    kprof.plugin.Alignment,
    Backend,
]


def _public_names(cls: type) -> list[str]:
    names = {n for n in dir(cls) if not n.startswith("_")}
    if dataclasses.is_dataclass(cls):
        names |= {f.name for f in dataclasses.fields(cls)}
    sample = _sample(cls)
    if sample is not None:
        names |= {n for n in vars(sample) if not n.startswith("_")}
    # Inherited from object or from typing machinery: not ours to document.
    return sorted(n for n in names if not hasattr(object, n))


@pytest.mark.parametrize("name", [n for n in kprof.__all__ if n != "__version__"])
def test_every_public_name_of_kprof_has_a_docstring(name: str) -> None:
    obj = getattr(kprof, name)
    doc = inspect.getdoc(obj)
    assert doc and len(doc.split()) >= 5, f"kprof.{name} needs a docstring"


@pytest.mark.parametrize("name", [n for n in kprof.plugin.__all__])
def test_every_name_of_kprof_plugin_is_documented(name: str) -> None:
    obj = getattr(kprof.plugin, name)
    if isinstance(obj, int):  # KERNEL, COPY: the module docstring says what they are
        assert f"``{name}``" in (kprof.plugin.__doc__ or ""), f"kprof.plugin.{name}"
        return
    doc = inspect.getdoc(obj)
    assert doc and len(doc.split()) >= 5, f"kprof.plugin.{name} needs a docstring"


@pytest.mark.parametrize("cls", DOCUMENTED_CLASSES, ids=lambda c: c.__name__)
def test_every_public_attribute_is_documented(cls: type) -> None:
    """Each public attribute has a docstring of its own (methods, properties) or is named, as
    ``name``, in its class's docstring (fields and plain attributes)."""
    class_doc = inspect.getdoc(cls) or ""
    missing = []
    for name in _public_names(cls):
        member = inspect.getattr_static(cls, name, None)
        own = None
        if (
            isinstance(member, property)
            or inspect.isfunction(member)
            or isinstance(member, (staticmethod, classmethod))
        ):
            own = inspect.getdoc(member)
        if not own and f"``{name}``" not in class_doc:
            missing.append(name)
    assert not missing, (
        f"{cls.__name__}: document {', '.join(missing)} (a docstring of its "
        f"own, or ``name`` in the class docstring)"
    )


_REF = re.compile(
    r"\b(Profile|KernelRecord|RangeRecord|MarkerRecord|Summary|SummaryRow|"
    r"BackendInfo|QueueInfo|Alignment|Backend|DeviceClock)\.([a-z_]\w*)"
)


def _texts() -> list[tuple[str, str]]:
    out = [
        (str(p.relative_to(KPROF_CORE.parent)), p.read_text())
        for p in sorted(KPROF_CORE.rglob("*.py"))
    ]
    return [*out, ("README.md", README.read_text())]


_TEXTS = _texts()


@pytest.mark.parametrize("where,text", _TEXTS, ids=[w for w, _ in _TEXTS])
def test_references_to_attributes_resolve(where: str, text: str) -> None:
    """``Profile.alignment`` once sent readers of ``help(KernelRecord)`` nowhere."""
    classes = {c.__name__: c for c in DOCUMENTED_CLASSES}
    broken = sorted(
        {
            f"{c}.{a}"
            for c, a in _REF.findall(text)
            if a not in _public_names(classes[c])
            and not (a.startswith("_") and hasattr(classes[c], a))
        }
    )
    assert not broken, f"{where} refers to attributes that do not exist: {broken}"


# -- the two public namespaces ------------------------------------------------------------------


def test_kprof_exports_the_exceptions_users_catch() -> None:
    from kprof_core.io.exports import ExportError
    from kprof_core.io.storage import ProfileFileError

    assert kprof.ExportError is ExportError and kprof.ProfileFileError is ProfileFileError
    assert issubclass(kprof.ProfileFileError, kprof.KprofError)


def test_plugin_names_left_kprof_for_kprof_plugin_with_a_warning() -> None:
    for name in ("hookimpl", "Backend", "BackendInfo", "QueueInfo", "Alignment"):
        assert name not in kprof.__all__ and name in kprof.plugin.__all__
        with pytest.warns(DeprecationWarning, match=rf"kprof\.{name} moved to kprof\.plugin"):
            assert getattr(kprof, name) is getattr(kprof.plugin, name)
    with pytest.warns(DeprecationWarning, match="kprof.capture moved to kprof.plugin"):
        assert kprof.capture.active is kprof.plugin.active  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match="no attribute 'hookspec'"):
        kprof.hookspec  # type: ignore[attr-defined]  # noqa: B018


#: The marks a report puts on rows and notes (``renderers/console.py``).
REPORT_MARKS = (" *", " ~", "!")


def _printed_headers() -> set[str]:
    """Every column header the text renderers print: string literals of the lists and tuples
    named ``headers``/``HEADERS``/``COLUMNS`` or handed to a ``_table`` call, and the columns
    the summary adds (``common.summary_cells``, ``console``)."""
    import kprof_core.renderers as renderers

    found = {"Span", "Throughput", "GFLOP/s", "Config", "Name", "Trend"}
    for path in Path(renderers.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            values: list[ast.expr] = []
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id in ("headers", "HEADERS", "COLUMNS")
                for t in node.targets
            ):
                values = [node.value]
            elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "_table":
                values = node.args[:1]
            for v in values:
                if isinstance(v, (ast.List, ast.Tuple)):
                    found |= {
                        e.value
                        for e in v.elts
                        if isinstance(e, ast.Constant) and isinstance(e.value, str)
                    }
    return found


def test_the_glossary_names_every_column_and_mark() -> None:
    """docs/reference/glossary.md explains each column header and mark the report prints."""
    from kprof_core.analysis.idle_results import CAUSES

    page = DOCS / "reference" / "glossary.md"
    terms = {
        m.group(1).strip("`")
        for m in re.finditer(r"^\*\*(.+?)\*\*$", page.read_text(encoding="utf-8"), re.M)
    }
    printed = _printed_headers() | {h for h, _f, _w in CAUSES}
    assert "Time (%)" in printed and "Busy" in printed and "Peak" in printed  # the scan works
    missing = sorted(printed - terms) + [m for m in REPORT_MARKS if m not in terms]
    assert not missing, f"the glossary does not explain: {missing}"
