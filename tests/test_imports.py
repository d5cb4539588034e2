"""The package's structure: no import cycle inside src/oslens, no import of
another package's private module, and the bottom modules import nothing of
oslens. Imports are read with `ast` (every import statement, including
those inside functions: a deferred import is still a dependency)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
BOTTOM = ("oslens.format", "oslens.cpulist", "oslens.errors")


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(root: Path, package: str) -> dict[str, set[str]]:
    """module -> the modules of `package` it imports (a `from X import name`
    counts as X.name when X.name is a module, else as X)."""
    files = {module_name(root, p): p for p in (root / package).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for mod, path in files.items():
        is_pkg = path.name == "__init__.py"
        here = mod.split(".") if is_pkg else mod.split(".")[:-1]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here[: len(here) - node.level + 1]
                    prefix = ".".join(base + ([node.module] if node.module else []))
                else:
                    prefix = node.module or ""
                targets = [f"{prefix}.{a.name}" if f"{prefix}.{a.name}" in files else prefix for a in node.names]
            else:
                continue
            for t in targets:
                while t and t not in files:  # a name inside a module: the module
                    t = t.rpartition(".")[0]
                if t and t != mod and t.split(".")[0] == package:
                    deps.add(t)
        graph[mod] = deps
    return graph


def parents(mod: str) -> list[str]:
    parts = mod.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of imports, or None. Importing a.b.c also runs a and a.b
    (their __init__), so those edges count too, except a package's own
    submodules importing it back (that is how a package works)."""
    edges = {
        m: {d for dep in deps for d in (dep, *parents(dep)) if not m.startswith(d + ".") and d != m}
        for m, deps in graph.items()
    }
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for d in sorted(edges.get(m, ())):
            if state.get(d) == 1:
                return stack[stack.index(d) :] + [d]
            if d not in state and (c := visit(d)):
                return c
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(edges):
        if m not in state and (c := visit(m)):
            return c
    return None


def test_no_import_cycle_in_oslens():
    cycle = find_cycle(imports_of(SRC, "oslens"))
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_no_private_module_of_another_package_imported():
    bad = []
    for mod, deps in imports_of(SRC, "oslens").items():
        for d in deps:
            owner, _, leaf = d.rpartition(".")
            # a package's own modules, its __init__ among them, may use its private ones
            inside = mod == owner or mod.startswith(owner + ".")
            if leaf.startswith("_") and not leaf.startswith("__") and not inside:
                bad.append(f"{mod} imports {d}")
    assert not bad, "; ".join(bad)


@pytest.mark.parametrize("bottom", BOTTOM)
def test_bottom_modules_import_nothing_of_oslens(bottom):
    assert imports_of(SRC, "oslens")[bottom] == set()


def test_analysis_does_not_import_report_or_the_cli():
    graph = imports_of(SRC, "oslens")
    upward = [
        f"{m} imports {d}"
        for m, deps in graph.items()
        if m.startswith(("oslens.analysis", "oslens.records"))
        for d in deps
        if d.startswith(("oslens.report", "oslens.cli", "oslens.commands", "oslens.compare"))
    ]
    assert not upward, "; ".join(upward)


def write_package(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def test_the_check_finds_a_cycle_in_a_synthetic_package(tmp_path):
    write_package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from . import b\n",
            "pkg/b.py": "def f():\n    from .sub import c\n",
            "pkg/sub/__init__.py": "",
            "pkg/sub/c.py": "from ..a import thing\n",
        },
    )
    cycle = find_cycle(imports_of(tmp_path, "pkg"))
    assert cycle is not None and set(cycle) == {"pkg.a", "pkg.b", "pkg.sub.c"}


def test_the_check_passes_a_synthetic_package_without_cycle(tmp_path):
    write_package(
        tmp_path,
        {
            "pkg/__init__.py": "from .a import x\n",
            "pkg/a.py": "from .b import y\nx = y\n",
            "pkg/b.py": "import os\ny = 1\n",
            "pkg/c.py": "import pkg.a\nfrom pkg import b\n",
        },
    )
    graph = imports_of(tmp_path, "pkg")
    assert graph["pkg.c"] == {"pkg.a", "pkg.b"}
    assert find_cycle(graph) is None


def test_the_check_sees_a_cycle_through_a_package_init(tmp_path):
    # pkg.x imports pkg.sub.y, which runs pkg/sub/__init__, which imports pkg.x
    write_package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/x.py": "from .sub.y import z\n",
            "pkg/sub/__init__.py": "from ..x import w\n",
            "pkg/sub/y.py": "z = 1\n",
        },
    )
    assert find_cycle(imports_of(tmp_path, "pkg")) is not None
