"""The engine's structure, read from its object files: which object calls
into which (a symbol one leaves undefined and another defines). No cycle
between objects, every object in a layer of LAYERS and calling nothing in a
layer above its own, and nothing calling back into main.c — the shape that
had `run.c` and `main.c` calling each other before args.c existed. Checked
in every build the Makefile makes: the dynamic engine, the static one (no
BPF, and the guest), the MPI one where it is built."""

from __future__ import annotations

import fnmatch
import graphlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The bottom: what every command uses and what uses nothing of the engine.
BOTTOM = {"args.o", "clock.o", "hist.o", "json.o", "mem.o", "textfile.o", "topology.o"}
# The layers from the bottom up, as engine/README.md's layout lists them:
# an object may call into its own layer and those below, never above. A new
# file goes in here; a new probe, app or BPF part matches a pattern already.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("bottom", tuple(sorted(BOTTOM))),
    ("stop signals", ("stopsig.o",)),
    ("probes", ("probe.o", "probes/*.o")),
    ("attribution loaders", ("bpf/*.o",)),
    ("events records", ("event_batch.o",)),
    ("run's argv", ("run_args.o",)),
    ("a worker", ("worker.o", "worker_image.o", "worker_pad.o")),
    ("the guest", ("guest/*.o",)),
    ("MPI ranks", ("cluster/*.o",)),
    ("the master's parts", ("cpustat.o", "partners.o", "run_emit.o", "run_parts.o")),
    ("run's master", ("run.o",)),
    ("commands", ("profile/*.o", "apps/*.o", "trace.o", "inject.o")),
    ("main", ("main.o",)),
)


def symbols(objs: list[Path]) -> dict[Path, tuple[set[str], set[str]]]:
    """For each object, the global symbols it defines and those it needs
    from elsewhere (one nm for all: one per object took seconds)."""
    out = subprocess.run(["nm", "-g", "-A", *map(str, objs)], capture_output=True, text=True, check=True).stdout
    table: dict[Path, tuple[set[str], set[str]]] = {p: (set(), set()) for p in objs}
    for line in out.splitlines():
        end = line.index(".o:") + 2  # nm -A: "path/x.o:<value> <type> <name>"
        path, rest = line[:end], line[end + 1 :]
        defined, undefined = table[Path(path)]
        parts = rest.split()
        if len(parts) == 2 and parts[0] == "U":
            undefined.add(parts[1])
        elif len(parts) == 3 and parts[1] in "TDBRCVW":
            defined.add(parts[2])
    return table


def calls_between(objdir: Path, sources: Path | None = None) -> dict[str, set[str]]:
    """object -> the objects it needs a symbol from (paths relative to objdir).
    With `sources`, only the objects of a source there (x.c, or an x.s the
    build made): a build directory keeps the object of a file since removed."""
    paths = sorted(objdir.rglob("*.o"))
    if sources is not None:
        paths = [p for p in paths if (sources / p.relative_to(objdir)).with_suffix(".c").exists()
                 or p.with_suffix(".s").exists()]  # fmt: skip
    table = {str(p.relative_to(objdir)): syms for p, syms in symbols(paths).items()}
    owner = {sym: name for name, (defined, _) in table.items() for sym in defined}
    return {
        name: {owner[s] for s in undefined if s in owner and owner[s] != name} for name, (_, undefined) in table.items()
    }


def layer_of(obj: str, layers=LAYERS) -> int | None:
    for i, (_, patterns) in enumerate(layers):
        if any(fnmatch.fnmatchcase(obj, p) for p in patterns):
            return i
    return None


def upward_calls(graph: dict[str, set[str]], layers=LAYERS) -> set[str]:
    """Each call from an object into a layer above its own, said in words."""
    names = [name for name, _ in layers]
    return {
        f"{o} ({names[layer_of(o, layers)]}) calls {d} ({names[layer_of(d, layers)]})"
        for o, deps in graph.items()
        for d in deps
        if layer_of(d, layers) > layer_of(o, layers)
    }


def cycle_in(graph: dict[str, set[str]]) -> list[str] | None:
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as e:
        return list(e.args[1])
    return None


@pytest.fixture(scope="module")
def engine_build() -> Path:
    if shutil.which("nm") is None:
        pytest.skip("nm (binutils) is not installed")
    # The engine's own build, brought up to date by its Makefile (nothing to
    # do after `make`; a second build from scratch took 30 s of the suite).
    jobs = f"-j{len(os.sched_getaffinity(0))}"
    subprocess.run(["make", "-s", jobs, "-C", str(ROOT / "engine")], check=True, capture_output=True)
    return ROOT / "engine" / "build"


@pytest.fixture(scope="module")
def dyn_graph(every_build) -> dict[str, set[str]]:
    """The call graph of the dynamic engine, the one with every part."""
    return every_build["dyn"]


@pytest.fixture(scope="module")
def every_build(engine_build) -> dict[str, dict[str, set[str]]]:
    """build (dyn, static, mpi) -> its call graph; each is one set of programs."""
    return {
        d.name: calls_between(d, ROOT / "engine")
        for d in sorted(engine_build.iterdir())
        if d.is_dir() and any(d.rglob("*.o"))
    }


def test_no_cycle_between_the_engines_objects(dyn_graph):
    graph = dyn_graph
    assert len(graph) > 20 and "run.o" in graph and "main.o" in graph
    cycle = cycle_in(graph)
    assert cycle is None, "objects calling each other: " + " -> ".join(cycle)


def test_the_bottom_calls_nothing_above_it(dyn_graph):
    graph = dyn_graph
    assert BOTTOM <= graph.keys()
    upward = {f"{o} calls {d}" for o in BOTTOM for d in graph[o] - BOTTOM}
    assert not upward, "; ".join(sorted(upward))


def test_nothing_calls_back_into_main(dyn_graph):
    graph = dyn_graph
    assert [o for o, deps in graph.items() if "main.o" in deps] == []


def test_every_object_is_in_a_layer(every_build):
    assert {"dyn", "static"} <= every_build.keys()
    unplaced = {f"{b}: {o}" for b, graph in every_build.items() for o in graph if layer_of(o) is None}
    assert not unplaced, "objects in no layer of LAYERS: " + ", ".join(sorted(unplaced))


def test_no_object_calls_a_layer_above_its_own(every_build):
    upward = {f"{b}: {u}" for b, graph in every_build.items() for u in upward_calls(graph)}
    assert not upward, "; ".join(sorted(upward))


def test_run_reaches_the_attributions_through_their_table_only(every_build):
    """run.c names no attribution: it calls run_parts.c's phases, which call
    the loaders, so that a new attribution is an entry there."""
    for b, graph in every_build.items():
        attribution = {d for d in graph["run.o"] if d.startswith("bpf/") or d == "event_batch.o"}
        assert not attribution, f"{b}: run.o calls {sorted(attribution)}"
        assert any(d.startswith("bpf/") for d in graph["run_parts.o"]), b


def test_runs_argv_reaches_no_attribution(every_build):
    """run_args.c is in the worker image, which has no attribution: the
    parts' options, checks and config keys come from the table main.c gives
    it, so that it calls neither run_parts.c nor a loader."""
    for b, graph in every_build.items():
        reached = {d for d in graph["run_args.o"] if d.startswith("bpf/") or d in ("event_batch.o", "run_parts.o")}
        assert not reached, f"{b}: run_args.o calls {sorted(reached)}"
        assert "run_parts.o" in graph["main.o"], b


def test_the_check_sees_a_call_up_the_layers():
    layers = (("low", ("a.o",)), ("high", ("b.o", "c.o")))
    assert upward_calls({"a.o": set(), "b.o": {"a.o"}, "c.o": {"b.o"}}, layers) == set()
    assert upward_calls({"a.o": {"c.o"}, "b.o": {"a.o"}, "c.o": set()}, layers) == {"a.o (low) calls c.o (high)"}
    assert layer_of("d.o", layers) is None


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
