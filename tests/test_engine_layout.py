"""The engine's structure, read from its object files: which object calls
into which (a symbol one leaves undefined and another defines). No cycle
between objects, the bottom units call nothing above them, and nothing calls
back into main.c — the shape that had `run.c` and `main.c` calling each
other before args.c existed."""

from __future__ import annotations

import graphlib
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The bottom: what every command uses and what uses nothing of the engine.
BOTTOM = {"args.o", "clock.o", "hist.o", "json.o", "mem.o", "textfile.o", "topology.o"}


def symbols(obj: Path) -> tuple[set[str], set[str]]:
    """The global symbols obj defines, and those it needs from elsewhere."""
    out = subprocess.run(["nm", "-g", str(obj)], capture_output=True, text=True, check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            undefined.add(parts[1])
        elif len(parts) == 3 and parts[1] in "TDBRCVW":
            defined.add(parts[2])
    return defined, undefined


def calls_between(objdir: Path) -> dict[str, set[str]]:
    """object -> the objects it needs a symbol from (paths relative to objdir)."""
    objs = {str(p.relative_to(objdir)): p for p in sorted(objdir.rglob("*.o"))}
    table = {name: symbols(p) for name, p in objs.items()}
    owner = {sym: name for name, (defined, _) in table.items() for sym in defined}
    return {
        name: {owner[s] for s in undefined if s in owner and owner[s] != name} for name, (_, undefined) in table.items()
    }


def cycle_in(graph: dict[str, set[str]]) -> list[str] | None:
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as e:
        return list(e.args[1])
    return None


@pytest.fixture(scope="module")
def engine_objects(tmp_path_factory) -> Path:
    if shutil.which("nm") is None:
        pytest.skip("nm (binutils) is not installed")
    build = tmp_path_factory.mktemp("engine-build")
    subprocess.run(["make", "-s", "-j2", "-C", str(ROOT / "engine"), f"BUILD={build}"], check=True, capture_output=True)
    return build / "dyn"


def test_no_cycle_between_the_engines_objects(engine_objects):
    graph = calls_between(engine_objects)
    assert len(graph) > 20 and "run.o" in graph and "main.o" in graph
    cycle = cycle_in(graph)
    assert cycle is None, "objects calling each other: " + " -> ".join(cycle)


def test_the_bottom_calls_nothing_above_it(engine_objects):
    graph = calls_between(engine_objects)
    assert BOTTOM <= graph.keys()
    upward = {f"{o} calls {d}" for o in BOTTOM for d in graph[o] - BOTTOM}
    assert not upward, "; ".join(sorted(upward))


def test_nothing_calls_back_into_main(engine_objects):
    graph = calls_between(engine_objects)
    assert [o for o, deps in graph.items() if "main.o" in deps] == []


def test_the_check_sees_two_units_calling_each_other(tmp_path):
    (tmp_path / "a.c").write_text("void b(void);\nvoid a(void) { b(); }\n")
    (tmp_path / "b.c").write_text("void a(void);\nvoid b(void) { a(); }\n")
    (tmp_path / "c.c").write_text("void a(void);\nvoid c(void) { a(); }\n")
    for name in "abc":
        subprocess.run(["cc", "-c", f"{name}.c", "-o", f"{name}.o"], cwd=tmp_path, check=True)
    graph = calls_between(tmp_path)
    assert graph == {"a.o": {"b.o"}, "b.o": {"a.o"}, "c.o": {"a.o"}}
    assert set(cycle_in(graph)) == {"a.o", "b.o"}
    del graph["b.o"]
    assert cycle_in({k: v - {"b.o"} for k, v in graph.items()}) is None
