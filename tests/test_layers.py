"""The import structure (STYLE.md "Layers"): imports point down the data flow only, there are no
circles, and an import inside a function says why it is there (a heavy third-party package, a
command's library loaded when it runs, an optional extra) in a one-line comment.

Every `import` of `perfmodel` and `collectors` is read with `ast` (at module level, inside
functions, under `if TYPE_CHECKING:` alike: a circle of type-only imports is still a circle for a
reader). Each module is on one layer of `LAYERS`; a module may import its own layer and the ones
below it, never one above. `SHIMS` lists the one import allowed to point up. Run this file
directly (`python tests/test_layers.py`) to print every import that breaks a rule.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("perfmodel", "collectors")

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", ("perfmodel", "perfmodel.errors", "perfmodel.paths", "perfmodel.schema", "perfmodel.workload",
              "perfmodel.recipes", "perfmodel.interval", "perfmodel.safe_yaml", "perfmodel.measure.storage",
              "perfmodel.kernels.census", "perfmodel.kernels.work")),
    ("catalog/analytic", ("perfmodel.catalog", "perfmodel.analytic", "perfmodel.kernels", "perfmodel.codec")),
    ("measure", ("perfmodel.measure",)),
    ("config", ("perfmodel.config", "perfmodel.request")),
    ("learn", ("perfmodel.features", "perfmodel.learn", "perfmodel.tracking", "perfmodel.dataset",
               "perfmodel.calibration")),
    ("prediction", ("perfmodel.prediction",)),
    ("decide/run/monitor", ("perfmodel.decide", "perfmodel.run", "perfmodel.monitor", "perfmodel.ingest",
                            "perfmodel.memcheck")),
    ("api/collectors", ("perfmodel.api", "collectors", "perfmodel.calibration.run")),
    ("service/cli", ("perfmodel.service", "perfmodel.cli", "perfmodel.__main__")),
)  # fmt: skip
"""Bottom to top: (layer, module prefixes); the longest prefix that matches a module decides."""

SHIMS = {("collectors.__main__", "perfmodel.cli"), ("collectors.__main__", "perfmodel.cli._common")}
"""Imports allowed to point up: `python -m collectors` is `perfmodel collect` (one command line)."""


@dataclass(frozen=True)
class Import:
    module: str
    """The importing module."""
    target: str
    """The imported project module."""
    line: int
    in_function: bool
    type_only: bool
    implied: bool = False
    """A package whose __init__ the import runs on the way to `target` (counts for circles)."""


def module_files() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def _resolve(
    names: dict[str, Path], module: str, node: ast.ImportFrom | ast.Import, alias: str
) -> str | None:
    if isinstance(node, ast.ImportFrom):
        if node.level:
            base = module.split(".")
            if names[module].name != "__init__.py":
                base = base[:-1]
            base = base[: len(base) - node.level + 1]
            stem = ".".join([*base, *([node.module] if node.module else [])])
        else:
            stem = node.module or ""
        candidates = [f"{stem}.{alias}", stem]
    else:
        candidates = [alias]
    for candidate in candidates:
        while candidate:
            if candidate in names:
                return candidate
            candidate = candidate.rpartition(".")[0]
    return None


def _imports_of(tree: ast.Module) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool, bool]]:
    """(node, inside a function, under `if TYPE_CHECKING:`) for every import of a module."""

    def walk(
        node: ast.AST, in_function: bool, type_only: bool
    ) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, in_function, type_only
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                yield from walk(child, True, type_only)
            elif isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                yield from walk(child, in_function, True)
            else:
                yield from walk(child, in_function, type_only)

    yield from walk(tree, False, False)


def project_imports() -> list[Import]:
    names = module_files()
    out = []
    for module, path in names.items():
        for node, in_function, type_only in _imports_of(ast.parse(path.read_text(), str(path))):
            for alias in node.names:
                target = _resolve(names, module, node, alias.name)
                if target is None:
                    continue
                if target != module:
                    out.append(Import(module, target, node.lineno, in_function, type_only))
                for package in _packages_run_by(target, module):
                    out.append(Import(module, package, node.lineno, in_function, type_only, implied=True))
    return out


def _packages_run_by(target: str, module: str) -> list[str]:
    """Importing `a.b.c` runs `a/b/__init__.py` first (its imports count), unless the importer is
    inside `a.b` already; the top packages import nothing at module level (a test checks)."""
    parts = target.split(".")
    parents = [".".join(parts[:i]) for i in range(2, len(parts))]
    return [p for p in parents if not (module == p or module.startswith(p + "."))]


def layer_of(module: str) -> int:
    best, found = -1, None
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, found = len(prefix), i
    if found is None:
        raise AssertionError(f"{module} is on no layer: add it to LAYERS in {Path(__file__).name}")
    return found


def upward_imports() -> list[str]:
    out: list[str] = []
    for imp in project_imports():
        if imp.implied:
            continue
        low, high = layer_of(imp.target), layer_of(imp.module)
        if low > high and (imp.module, imp.target) not in SHIMS:
            line = f"{imp.module}:{imp.line} ({LAYERS[high][0]}) imports {imp.target} ({LAYERS[low][0]})"
            if line not in out:
                out.append(line)
    return out


def circles() -> list[list[str]]:
    """The circles of the project's imports (the shims left out)."""
    graph: dict[str, set[str]] = {m: set() for m in module_files()}
    for imp in project_imports():
        if (imp.module, imp.target) not in SHIMS:
            graph[imp.module].add(imp.target)
    return components(graph)


def components(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph)))

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def late_imports_without_reason() -> list[str]:
    """Function-level imports with no comment saying why, on a line of its block of imports
    (consecutive import statements, blank lines between them allowed) or the line above it; an
    import under `try:` (an optional package) says why by its `except ImportError`."""
    out = []
    for module, path in module_files().items():
        out += _late_in(module, path.read_text().splitlines())
    return out


def _late_in(module: str, lines: list[str]) -> list[str]:
    tree = ast.parse("\n".join(lines), module)
    in_try = {id(n) for t in ast.walk(tree) if isinstance(t, ast.Try) for b in t.body for n in ast.walk(b)}
    late = [node for node, in_function, type_only in _imports_of(tree) if in_function and not type_only]
    late = [node for node in late if id(node) not in in_try]
    import_lines = {k for n in late for k in range(n.lineno - 1, n.end_lineno or n.lineno)}
    out = []
    for node in late:
        first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
        while first > 0 and (first - 1 in import_lines or not lines[first - 1].strip()):
            first -= 1
        while last + 1 < len(lines) and (last + 1 in import_lines or not lines[last + 1].strip()):
            last += 1
        said = any("#" in lines[k] for k in range(first, last + 1) if k in import_lines)
        if said or (first > 0 and lines[first - 1].strip().startswith("#")):
            continue
        name = (node.module or ".") if isinstance(node, ast.ImportFrom) else node.names[0].name
        out.append(f"{module}:{node.lineno} imports {name} inside a function without a reason")
    return out


# --- the tests ----------------------------------------------------------------------------------


def test_every_module_is_on_a_layer():
    for module in module_files():
        layer_of(module)


def test_no_import_points_up_a_layer():
    assert upward_imports() == []


def test_no_circles():
    assert circles() == []


@pytest.mark.slow
def test_a_function_level_import_guards_something_heavy_or_says_why():
    assert late_imports_without_reason() == []


@pytest.mark.slow
def test_the_top_packages_import_nothing_when_imported():
    for package in PACKAGES:
        assert not [
            i for i in project_imports() if i.module == package and not i.in_function and not i.type_only
        ]


def test_the_checks_see_an_unexplained_late_import_and_a_circle():
    code = "def f():\n    import json\n\n    import yaml\n    return json, yaml\n"
    assert _late_in("m", code.splitlines()) == [
        "m:2 imports json inside a function without a reason",
        "m:4 imports yaml inside a function without a reason",
    ]
    assert _late_in("m", code.replace("import yaml", "import yaml  # why").splitlines()) == []
    assert _late_in("m", code.replace("def f():", "def f():\n    # why").splitlines()) == []
    assert components({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert components({"a": {"b"}, "b": set()}) == []


def test_the_checks_see_an_upward_import():
    assert (
        layer_of("perfmodel.prediction")
        > layer_of("perfmodel.config.native")
        > layer_of("perfmodel.workload")
    )
    assert layer_of("collectors.harness") > layer_of("perfmodel.run.probe")
    tree = ast.parse("def f():\n    from perfmodel.cli import app\n")
    ((node, in_function, type_only),) = list(_imports_of(tree))
    assert in_function and not type_only and isinstance(node, ast.ImportFrom)
    assert _resolve(module_files(), "perfmodel.prediction", node, "app") == "perfmodel.cli"


if __name__ == "__main__":
    for line in upward_imports():
        print("up:", line)
    for component in circles():
        print("circle:", " <-> ".join(component))
    for line in late_imports_without_reason():
        print("late:", line)
