"""The layout holds: no import cycle among kprof's modules (lazy, function-level imports
included; imports under ``if TYPE_CHECKING:`` are type-only, listed apart), no function over
``MAX_FUNCTION_LINES`` lines and no C file over ``MAX_C_LINES`` except those listed below with
their reason. Modules have no line cap: a class is split along what owns which data, never to
meet a count.

Imports are read with ``ast`` from the source files, not by importing them, so that a cycle is
found even where Python would tolerate it at run time.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import kprof_core

# Where the packages are imported from: the checkout, or site-packages when .ci/run tests the
# installed wheel (a path beside the tests found no modules there, and the test failed).
ROOT = Path(kprof_core.__file__).resolve().parent.parent
#: The tests' own tree (beside examples/): the checkout, or CI's copy next to an installed wheel.
TREE = Path(__file__).resolve().parent.parent
PACKAGES = ("kprof", "kprof_core", "kprof_cuda", "kprof_opencl", "kprof_hip", "kprof_pytest")
MAX_FUNCTION_LINES = 80
#: Functions (nested ones within them counted in their length) over MAX_FUNCTION_LINES, each
#: with the reason it is one function, or the split it waits for. Shrink this list.
HOT = "the launch path or a per-record loop, inlined: one frame, names bound once (BENCHMARKS.md)"
LONG_FUNCTIONS: dict[str, str] = {
    "kprof_core.recording.recorder.launch": HOT,
    "kprof_opencl.capture.kernel_wrapper": HOT + "; its closure is the wrapper",
    "kprof_cuda.cupti_pure._decode": HOT + " (the pure reader's record loop)",
    "kprof_core.recording.harvest_take.take_device": HOT,
    "kprof_core.recording.harvest.harvest_locked": HOT + " (every entry kind's common case)",
    "kprof_hip.kernels.kernel_wrappers": "a factory of the launch wrappers, closures over state "
    "bound once (" + HOT + "); its length is theirs",
    "kprof_hip.kernels.hipExtLaunchKernel": HOT + " (a closure of kernel_wrappers)",
    "kprof_hip.memory.memory_wrappers": "a factory of the allocation wrappers, closures over "
    "state bound once; its length is theirs",
    "kprof_core.io.read_v1.read_frame": "one walk of a file's header and columns, every field "
    "checked in the order it is read",
    "kprof_core.io.storage.dumps": "the writer's one walk, the reader's mirror",
    "kprof_core.low_level.protowire.track_events": "the Perfetto writer's inner loop, "
    "field by field as the schema lists them",
    "kprof_core.renderers.chrome._write_profile": "the Chrome trace's one streaming pass",
}
MAX_C_LINES = 700
#: C sources over MAX_C_LINES, each with why (none: every C file holds one concern).
LONG_C_FILES: dict[str, str] = {}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {
        _module_name(p): p
        for pkg in PACKAGES
        for p in sorted((ROOT / pkg).rglob("*.py"))
        if "build" not in p.relative_to(ROOT).parts
    }


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(
    tree: ast.AST,
    module: str,
    is_package: bool,
    known: frozenset[str] = frozenset(),
    type_only: bool = False,
) -> set[str]:
    """Every module name ``tree`` imports, at any depth, outside ``if TYPE_CHECKING:`` (inside
    it too with ``type_only``).

    ``from pkg import mod`` counts as importing ``pkg.mod`` only when ``mod`` is one of the
    ``known`` modules (the package is then already imported: it is the submodule's parent);
    ``from pkg import name`` of anything else counts as importing ``pkg``."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test) and not type_only:
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                if not is_package:
                    base = base[:-1]
                base = base[: len(base) - (node.level - 1)]
                prefix = ".".join([*base, *([node.module] if node.module else [])])
            else:
                prefix = node.module or ""
            subs = {f"{prefix}.{a.name}" for a in node.names}
            found.update(subs & known)
            if not subs <= known:
                found.add(prefix)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def import_graph(type_only: bool = False) -> dict[str, set[str]]:
    """Module -> the modules of kprof it imports (a package's ``__init__`` counts as the
    package; importing ``a.b.c`` also runs ``a`` and ``a.b``, which is left out here: a
    package's ``__init__`` importing its own submodules is not a cycle). With ``type_only``,
    the imports for type checking count too."""
    mods = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        targets = _imports(tree, name, path.name == "__init__.py", frozenset(mods), type_only)
        graph[name] = {t for t in targets if t in mods and t != name}
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def test_the_graph_sees_lazy_imports_and_skips_type_only_ones() -> None:
    """The reader itself: a function-level import counts, a TYPE_CHECKING one does not."""
    src = (
        "from typing import TYPE_CHECKING\n"
        "from .b import x\n"
        "if TYPE_CHECKING:\n"
        "    from .c import y\n"
        "def f():\n"
        "    from ..d import z\n"
    )
    found = _imports(ast.parse(src), "pkg.sub.a", False, frozenset({"pkg.d.z"}))
    assert found == {"typing", "pkg.sub.b", "pkg.d.z"}
    assert not any(name.startswith("pkg.sub.c") for name in found)
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles() -> None:
    graph = import_graph()
    assert "kprof_core.result" in graph  # the packages were found
    cycles = find_cycles(graph)
    assert not cycles, "import cycles (lazy imports count):\n" + "\n".join(
        "  " + " <-> ".join(c) for c in cycles
    )


def test_no_type_only_import_cycles() -> None:
    """Not even through imports for type checking: such a cycle is a part that names the
    class it is part of (a class split across files, or a base declaring what its child
    sets); a class owns its parts, which are handed what they need."""
    found = find_cycles(import_graph(type_only=True))
    assert not found, "type-only import cycles:\n" + "\n".join(
        "  " + " <-> ".join(c) for c in found
    )


def test_the_data_sits_below_its_readers() -> None:
    """Nothing below the facade imports ``kprof_core.result`` (the Profile with the methods
    that call storage, exports and the renderers)."""
    graph = import_graph()
    lower = ("kprof_core.data", "kprof_core.io", "kprof_core.analysis", "kprof_core.renderers")
    offenders = sorted(
        m for m, deps in graph.items() if m.startswith(lower) and "kprof_core.result" in deps
    )
    assert not offenders


#: The backend plugins kprof bundles, and those its tests and docs ship: each uses kprof as a
#: third party would, through ``kprof`` and ``kprof.plugin`` only.
BACKEND_PLUGINS = (
    "kprof_cuda",
    "kprof_opencl",
    "kprof_hip",
    "examples/plugin",
    "tests/plugins/kprof_testbackend/src/kprof_testbackend",
)


def _every_import(tree: ast.AST) -> set[str]:
    """Every module named by an import anywhere in ``tree``, type-only ones included."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module)
    return found


@pytest.mark.parametrize("where", BACKEND_PLUGINS)
def test_backend_plugins_use_only_the_public_api(where: str) -> None:
    # The bundled plugins where kprof is imported from (the wheel's site-packages in CI's
    # wheel run); the example and test plugins in the tests' tree.
    root = ROOT if where.startswith("kprof") else TREE
    files = sorted((root / where).rglob("*.py"))
    assert files, f"no plugin sources under {root / where}"
    offenders = {
        f"{p.relative_to(root)}: {m}"
        for p in files
        for m in _every_import(ast.parse(p.read_text(encoding="utf-8")))
        if m == "kprof_core" or m.startswith("kprof_core.")
    }
    assert not offenders, "plugins import kprof.plugin, never kprof_core:\n" + "\n".join(
        sorted(offenders)
    )


def _long_functions() -> dict[str, int]:
    found = {}
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    found[f"{name}.{node.name}"] = n
    return found


def test_functions_over_the_limit_are_the_listed_ones() -> None:
    found = _long_functions()
    new = {f: n for f, n in found.items() if f not in LONG_FUNCTIONS}
    assert not new, f"over {MAX_FUNCTION_LINES} lines, with no reason listed: {new}"
    gone = sorted(set(LONG_FUNCTIONS) - set(found))
    assert not gone, (
        f"no longer over {MAX_FUNCTION_LINES} lines: take them off LONG_FUNCTIONS: {gone}"
    )


def test_c_files_over_the_limit_are_the_listed_ones() -> None:
    sources = {
        str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines())
        for pkg in PACKAGES
        for p in sorted((ROOT / pkg).rglob("*"))
        if p.suffix in (".c", ".h") and "build" not in p.relative_to(ROOT).parts
    }
    if not sources:
        pytest.skip("no C sources beside the packages (an installed wheel ships none)")
    long = {f: n for f, n in sources.items() if n > MAX_C_LINES}
    new = {f: n for f, n in long.items() if f not in LONG_C_FILES}
    assert not new, f"over {MAX_C_LINES} lines, with no reason listed: {new}"
    gone = sorted(set(LONG_C_FILES) - set(long))
    assert not gone, f"no longer over {MAX_C_LINES} lines: take them off LONG_C_FILES: {gone}"


def test_no_c_source_imports_a_kprof_module() -> None:
    """C reaches kprof's own parts only as Python code does, through what it is handed (the
    recorder's capsules come from ``kprof.plugin.launch_capsules()``): an import of a kprof
    module from C is a dependency the import graph above cannot see."""
    offenders = [
        f"{p.relative_to(ROOT)}: {m.group(0)}"
        for pkg in PACKAGES
        for p in sorted((ROOT / pkg).rglob("*"))
        if p.suffix in (".c", ".h")
        for m in re.finditer(r'PyImport_Import\w*\(\s*"kprof[\w.]*"', p.read_text(encoding="utf-8"))
    ]
    assert not offenders, offenders


# -- the formats Python and C share (kprof_core/low_level/layout.py) ------------------------------


def test_the_committed_c_header_is_current() -> None:
    from kprof_core.low_level import gen_header
    from kprof_core.low_level.layout import c_header

    assert gen_header.HEADER.read_text(encoding="utf-8") == c_header(), (
        "kprof_core/low_level/_layout.h is out of date: "
        "run python -m kprof_core.low_level.gen_header and rebuild"
    )
    assert gen_header.main(["--check"]) == 0


def test_the_header_says_every_index_of_layout_py() -> None:
    from kprof_core.low_level import layout

    text = layout.c_header()
    assert f"#define KPROF_ENTRY_LEN {layout.ENTRY_LEN}\n" in text
    for i, field in enumerate(layout.ENTRY_FIELDS):
        assert f"#define KPROF_E_{field.upper()} {i}\n" in text
    for i, field in enumerate(layout.FAST_QUEUE_FIELDS):
        assert f"#define KPROF_FQ_{field.upper()} {i}\n" in text
    assert f'#define KPROF_LAYOUT_SIGNATURE "{layout.SIGNATURE}"' in text


def test_a_compiled_recorder_of_another_layout_is_refused() -> None:
    import types

    from kprof_core.low_level import layout, native

    built = types.ModuleType("_crecorder")
    built.LAYOUT = layout.SIGNATURE  # type: ignore[attr-defined]
    assert native.layout_mismatch(built) == ""
    built.LAYOUT = layout.SIGNATURE.replace("start,stop", "stop,start")  # type: ignore[attr-defined]
    why = native.layout_mismatch(built)
    assert "another entry layout" in why and "rebuild" in why
    assert "none recorded" in native.layout_mismatch(types.ModuleType("_crecorder"))


def test_the_built_recorder_matches_when_it_is_in_use() -> None:
    from kprof_core.low_level import layout, native

    mod = native.compiled()
    if mod is None:
        pytest.skip(f"the compiled recorder is not in use: {native.describe()}")
    assert mod.LAYOUT == layout.SIGNATURE


# -- the C units: what each compiles, and what it includes ------------------------------------

#: An ``#include`` line: the quote (``"`` for a local header, ``<`` for a system one), the name.
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^">\n]+)[">]', re.M)
#: How a generated header begins (gen_header.py, gen_cupti_header.py): the one home of a format,
#: which the C of any package may read.
GENERATED = "/* Generated by "
#: A function's definition, in this code's style: its signature from the start of a line (the
#: return type, possibly on a line of its own) to the brace of its body.
DEFINITION = re.compile(r"^([A-Za-z_][^;{}#=]*?)\)\s*\{", re.M)


def _c_files(root: Path) -> list[Path]:
    """kprof's C sources and headers under the packages in ``root``, build outputs left out."""
    return [
        p
        for pkg in PACKAGES
        for p in sorted((root / pkg).rglob("*"))
        if p.suffix in (".c", ".h") and "build" not in p.relative_to(root).parts
    ]


def _source_tree() -> Path:
    if not (TREE / "setup.py").exists():
        pytest.skip("no source tree here (the installed wheel's test run)")
    return TREE


def _package_folder(path: Path) -> Path:
    """The folder of the Python package ``path`` is part of (the nearest one above it with an
    ``__init__.py``; a folder without one is part of its parent's package)."""
    return next((d for d in path.parents if (d / "__init__.py").exists()), path.parent)


def unit_problems(root: Path, files: list[Path]) -> list[str]:
    """Where ``files`` break the rule of the C units: an ``#include`` names a header, never a
    ``.c`` (its code would compile inside the includer's unit); a local one (in quotes) exists,
    in the including file's own package folder, or is a generated header; and a header declares
    what its unit shares, defining no function but a ``static inline`` one (a small helper
    that a hot caller in another unit inlines)."""
    found = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        rel = path.relative_to(root).as_posix()
        if path.suffix == ".h":
            for m in DEFINITION.finditer(text):
                if not re.search(r"\binline\b", m.group(1)):
                    name = re.search(r"(\w+)\s*\(", m.group(1))
                    found.append(f"{rel}: defines {name.group(1) if name else m.group(1)}()")
        for quote, name in INCLUDE.findall(text):
            where = f"{rel}: #include {quote}{name}{'>' if quote == '<' else quote}"
            if not name.endswith(".h"):
                found.append(f"{where}: not a header")
                continue
            if quote != '"':
                continue
            header = (path.parent / name).resolve()
            if not header.is_file():
                found.append(f"{where}: no such header")
            elif _package_folder(header) != _package_folder(path) and not header.read_text(
                encoding="utf-8"
            ).startswith(GENERATED):
                found.append(f"{where}: another package's header")
    return found


def test_the_include_rule_finds_each_breach(tmp_path: Path) -> None:
    """The checker itself, on a made-up pair of packages."""
    own, other = tmp_path / "own", tmp_path / "other"
    (own / "parts").mkdir(parents=True)
    other.mkdir()
    for package in (own, other):
        (package / "__init__.py").write_text("")
    (own / "_own.h").write_text(
        "typedef struct {\n    int n;\n} Own;\nint kprof_own(Own *o);\n\n"
        "static inline int\nown_n(const Own *o)\n{\n    if (o) {\n        return o->n;\n"
        "    }\n    return 0;\n}\n"
    )
    (own / "_code.h").write_text(
        "/* code (a unit's) */\nstatic int\nhelper(void)\n{\n    return 1;\n}\n"
    )
    (own / "_unit.c").write_text("")
    (other / "_theirs.h").write_text("")
    (other / "_format.h").write_text(GENERATED + "gen_header.py. */\n")
    (own / "parts" / "_part.c").write_text('#include "../_own.h"\n')  # the same package
    (own / "_main.c").write_text(
        '#include <stdint.h>\n#include "_own.h"\n#include "../other/_format.h"\n'
        '#include "_unit.c"\n# include "../other/_theirs.h"\n#include "_gone.h"\n'
        "#include <_unit.c>\n"
    )
    files = [own / "_main.c", own / "parts" / "_part.c", own / "_own.h", own / "_code.h"]
    assert unit_problems(tmp_path, files) == [
        'own/_main.c: #include "_unit.c": not a header',
        'own/_main.c: #include "../other/_theirs.h": another package\'s header',
        'own/_main.c: #include "_gone.h": no such header',
        "own/_main.c: #include <_unit.c>: not a header",
        "own/_code.h: defines helper()",
    ]


def test_c_units_include_only_headers_of_their_own_package() -> None:
    """Each C source compiles as a unit of its own: what it shares with another unit is
    declared in a header of its package, never included as source."""
    root = _source_tree()
    problems = unit_problems(root, _c_files(root))
    assert not problems, "\n".join(problems)


def test_every_c_source_is_built() -> None:
    """Each ``.c`` is a source of an extension in setup.py: without a unit, the others' calls
    into it fail to link (or, where the shared object may leave them undefined, to import),
    and the optional extension is replaced by pure Python without a word."""
    root = _source_tree()
    setup = (root / "setup.py").read_text(encoding="utf-8")
    missing = [
        p.relative_to(root).as_posix()
        for p in _c_files(root)
        if p.suffix == ".c" and f'"{p.relative_to(root).as_posix()}"' not in setup
    ]
    assert not missing, "add to an extension's sources in setup.py:\n" + "\n".join(missing)


def test_every_local_header_ships_in_the_sdist() -> None:
    """A header a C source or header includes is in setup.py's ``depends`` (what the sdist
    ships): else the wheel built from the sdist silently lacks that extension (optional=True)."""
    root = _source_tree()
    setup = (root / "setup.py").read_text(encoding="utf-8")
    missing = []
    for source in _c_files(root):
        for quote, header in INCLUDE.findall(source.read_text(encoding="utf-8")):
            if quote != '"':
                continue
            path = (source.parent / header).resolve().relative_to(root.resolve()).as_posix()
            if f'"{path}"' not in setup:
                missing.append(f"{source.relative_to(root)} includes {path}")
    assert not missing, "add to the extension's depends in setup.py:\n" + "\n".join(missing)
