"""The package's structure: no import cycle inside src/oslens, no import of
another package's private module, the bottom modules import nothing of
oslens, and every module sits in a layer of LAYERS and imports nothing from
a layer above its own (as tests/test_engine_layout.py holds the engine's
objects). Imports are read with `ast` (every import statement, including
those inside functions: a deferred import is still a dependency)."""

from __future__ import annotations

import ast
import fnmatch
import re
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
BOTTOM = ("oslens.format", "oslens.cpulist", "oslens.errors", "oslens.version")
# The layers from the bottom up, as README.md's layout lists them: a module
# may import its own layer and those below, never above. A module is in the
# layer of its most specific pattern; a new module matches one or is added.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("bottom: formats, errors, records read by name, the kernel's text files",
     ("oslens.version", "oslens.format", "oslens.cpulist", "oslens.errors", "oslens.stopsignals", "oslens.records",
      "oslens.invocation", "oslens.owned", "oslens.studies", "oslens.studies.verdict", "oslens.procfs",
      "oslens.kallsyms", "oslens.locknames", "oslens.trust")),
    ("the machine, the engine, the store, the registry of kinds",
     ("oslens.runtime", "oslens.leftovers", "oslens.store", "oslens.collectors", "oslens.collectors.*",
      "oslens.engine", "oslens.kinds", "oslens.parse", "oslens.cgroups", "oslens.blockdev", "oslens.blockdev.*",
      "oslens.envs", "oslens.envs.*", "oslens.compete", "oslens.servers", "oslens.servers.*", "oslens.kbuild",
      "oslens.tune", "oslens.cluster_measures")),
    ("summaries of stored records, and the HTML page and flame graphs they draw on",
     ("oslens.analysis", "oslens.analysis.*", "oslens.profile", "oslens.profile.records", "oslens.profile.summary",
      "oslens.profile.sections", "oslens.profile.sections.*", "oslens.report.html.page",
      "oslens.report.html.flames")),
    ("views of one run: tidy frames, terminal tables, HTML sections", ("oslens.frames", "oslens.frames.*",
                                                                       "oslens.report", "oslens.report.*",
                                                                       "oslens.cluster_measures.*")),
    ("planning and measuring", ("oslens.plan", "oslens.plan.*", "oslens.appscale", "oslens.serve",
                                "oslens.profile.collect", "oslens.runner")),
    ("stored runs together: compare, the API, exports", ("oslens.compare", "oslens.report.compare", "oslens.api",
                                                         "oslens.export", "oslens.export.*")),
    ("commands", ("oslens.commands", "oslens.commands.*")),
    ("the CLI and the package's entry points", ("oslens", "oslens.cli", "oslens.entry", "oslens.__main__")),
)  # fmt: skip


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


def layer_of(module: str, layers=LAYERS) -> int | None:
    """The index of the module's layer: that of its most specific (longest)
    matching pattern; None if none matches."""
    best: tuple[int, int] | None = None
    for i, (_, patterns) in enumerate(layers):
        for p in patterns:
            if fnmatch.fnmatchcase(module, p) and (best is None or len(p) > best[1]):
                best = (i, len(p))
    return best[0] if best else None


def upward_imports(graph: dict[str, set[str]], layers=LAYERS) -> list[str]:
    """Every import of a module from a layer above the importer's."""
    return sorted(
        f"{m} ({layers[layer_of(m, layers)][0]}) imports {d} ({layers[layer_of(d, layers)][0]})"
        for m, deps in graph.items()
        for d in deps
        if (layer_of(d, layers) or 0) > (layer_of(m, layers) or 0)  # one in no layer fails the test above
    )


def test_every_module_is_in_a_layer():
    assert [m for m in imports_of(SRC, "oslens") if layer_of(m) is None] == []


def test_no_module_imports_from_a_layer_above_its_own():
    assert upward_imports(imports_of(SRC, "oslens")) == []


def test_the_layer_check_finds_an_upward_import_in_a_synthetic_package(tmp_path):
    write_package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/low.py": "def f():\n    from .high import g\n",  # deferred: still a dependency
            "pkg/high.py": "from .low import f\n",
        },
    )
    layers = (("low", ("pkg", "pkg.low")), ("high", ("pkg.high",)))
    assert upward_imports(imports_of(tmp_path, "pkg"), layers) == ["pkg.low (low) imports pkg.high (high)"]
    write_package(tmp_path, {"pkg/low.py": "x = 1\n"})
    assert upward_imports(imports_of(tmp_path, "pkg"), layers) == []


def test_the_version_is_pyprojects():
    pyproject = (SRC.parent / "pyproject.toml").read_text()
    declared = re.search(r'^version = "([^"]+)"', pyproject, re.M).group(1)
    text = (SRC / "oslens" / "version.py").read_text()
    assert re.search(r'^__version__ = "([^"]+)"', text, re.M).group(1) == declared


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


# What showing a stored run may not import until a figure needs it: each cost
# a second or more of every `show`, `export` and `report` (scipy.stats alone
# 1.2-1.9 s here) for runs that use none of it.
HEAVY = ("scipy.stats", "scipy.optimize", "scipy.special", "pandas", "pyarrow", "vl_convert")


def test_showing_a_run_imports_no_heavy_library_until_a_figure_needs_it():
    loads = (
        "import sys, oslens.cli, oslens.kinds as k\n"
        "for kind in k.KINDS.values():\n"
        "    for layer in ('analyze', 'render', 'metrics'):\n"
        "        kind.load(layer)\n"
        "    for study in kind.studies:\n"
        "        study.load('verdicts')\n"
        "print(' '.join(m for m in sys.modules if m in " + repr(HEAVY) + "))\n"
    )
    p = subprocess.run([sys.executable, "-c", loads], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == []
