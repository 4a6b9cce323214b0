"""The reference is complete: every hook has a docstring, and README.md documents each one under
a heading ``### hook_name(arg1, arg2)`` naming all its arguments; every public name of ``kprof``
and every public attribute of ``Profile``, the records and what plugins return is documented,
and docstrings' references to attributes (``Profile.clocks``) resolve."""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path

import pytest

import kprof
import kprof_core
from kprof_core.data.records import QueueRecord, ThreadRecord
from kprof_core.host import hookspecs
from kprof_core.host.backend import Backend
from kprof_core.recording.placement import DeviceClock

README = Path(__file__).resolve().parent.parent / "README.md"
HOOKS = [
    fn
    for name, fn in vars(hookspecs).items()
    if inspect.isfunction(fn) and hasattr(fn, f"{hookspecs.PROJECT}_spec")
]


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
        f"found {headings}"
    )


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
    kprof.KernelRecord,
    kprof.RangeRecord,
    kprof.MarkerRecord,
    QueueRecord,
    ThreadRecord,
    DeviceClock,
    kprof.BackendInfo,
    kprof.QueueInfo,
    kprof.Alignment,
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


@pytest.mark.parametrize("name", [n for n in kprof.capture.__all__])
def test_every_name_of_kprof_capture_is_documented(name: str) -> None:
    obj = getattr(kprof.capture, name)
    if isinstance(obj, int):  # KERNEL, COPY: the module docstring says what they are
        assert f"``{name}``" in (kprof.capture.__doc__ or ""), f"kprof.capture.{name}"
        return
    doc = inspect.getdoc(obj)
    assert doc and len(doc.split()) >= 5, f"kprof.capture.{name} needs a docstring"


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
