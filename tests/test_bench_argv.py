"""One configuration, one planner: the benchmarks that say what an explained
mode costs (bench/explain.py, bench/light_cost.py) run the engine argv that
`oslens scale --explain MODE` runs, point and explained twin, as the command
plans them; a benchmark never measures a configuration users do not run."""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

import oslens.plan.scale as scale_planner
from oslens import engine
from oslens.cli import cli

BENCH = Path(__file__).resolve().parents[1] / "bench"

KINDS = ("full", "light", "light@250", "control")
EXPLAINED = tuple(k for k in KINDS if k != "control")
MODES = ("process", "thread")
WORKERS = sorted({1, min(2, engine.topology()["available"])})  # bounded by the CPUs we have
PROBES = ("dup", "sem")  # a probe on its own, one with a partner task
SECONDS = 0.5
# Options a twin may set apart from its point besides the attribution's: how long it runs.
DURATION_OPTIONS = {"--duration", "--time-limit"}
TIMING_PREFIX = "--latency"  # the engine's per-operation timing: --latency, --latency-every


def load(name: str):
    """A bench script as a module (bench/ is not a package; its scripts import each other by name)."""
    sys.path.insert(0, str(BENCH))
    before = set(sys.modules)
    try:
        spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))
        for added in set(sys.modules) - before:
            if added in ("explain", "explain_programs"):  # the scripts' own, not oslens's
                del sys.modules[added]


explain_bench = load("explain")
light_cost = load("light_cost")
explain_programs = load("explain_programs")


def cli_options(kind: str) -> list[str]:
    """What a user types for a kind of run: --explain MODE [--sample-rate HZ]; control (the
    plain point of an explained run, again): --explain alone."""
    if kind == "control":
        return ["--explain"]
    mode, _, hz = kind.partition("@")
    return ["--explain", mode] + (["--sample-rate", hz] if hz else [])


def as_the_cli_plans(monkeypatch, tmp_path, *options: str) -> tuple[tuple[str, ...], tuple[str, ...] | None]:
    """The point's argv and its twin's (None when not explained) that
    `oslens scale OPTIONS` plans: the command run (with --dry-run, which
    also has the engine check every argv), its planner's answer kept."""
    plans = []

    def kept(**kw):
        plans.append(real(**kw))
        return plans[-1]

    real = scale_planner.plan
    monkeypatch.setattr(scale_planner, "plan", kept)
    result = CliRunner().invoke(cli, ["--db", str(tmp_path / "runs.db"), "scale", *options, "--dry-run"])
    monkeypatch.setattr(scale_planner, "plan", real)
    assert result.exit_code == 0, result.output
    (plan,) = plans
    plain = [p.args for p in plan.points if not p.explained]
    twins = [p.args for p in plan.points if p.explained]
    assert len(plain) == 1 and len(twins) <= 1, plan.points
    return plain[0], twins[0] if twins else None


def items(args: tuple[str, ...]) -> Counter:
    """An engine argv as its options, each with its value (None for a flag)."""
    out: Counter = Counter()
    for i, a in enumerate(args):
        if a.startswith("--"):
            value = args[i + 1] if i + 1 < len(args) and not args[i + 1].startswith("--") else None
            out[(a, value)] += 1
    return out


def attribution(kind: str) -> Counter:
    how = explain_bench.explained_as(kind)
    return items(tuple(how.argv())) if how else Counter()


@pytest.mark.parametrize("workers", WORKERS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("probe", PROBES)
def test_explain_bench_runs_what_scale_explain_plans(monkeypatch, tmp_path, probe, kind, mode, workers):
    plain, other = explain_bench.argvs(probe, mode, workers, SECONDS, kind)
    settings = ["--probe", probe, "--mode", mode, "--workers", str(workers), "--duration", str(SECONDS)]
    settings += ["--reps", str(explain_bench.REPS), "--warmup", str(explain_bench.WARMUP_S)]
    cli_plain, cli_twin = as_the_cli_plans(monkeypatch, tmp_path, *settings, *cli_options(kind))
    assert plain == cli_plain
    assert other == (cli_plain if kind == "control" else cli_twin)  # control: the A/A test, the point again


@pytest.mark.parametrize("workers", WORKERS)
@pytest.mark.parametrize("mode", MODES)
def test_explain_bench_runs_one_plain_point_beside_every_kind(mode, workers):
    # each round runs the plain point once, beside every kind's run: it must be every kind's point
    assert len({explain_bench.argvs("dup", mode, workers, SECONDS, k)[0] for k in KINDS}) == 1


@pytest.mark.parametrize("hz", [None, 250])
@pytest.mark.parametrize("workers", WORKERS)
@pytest.mark.parametrize("mode", MODES)
def test_light_cost_runs_the_planned_twin_and_it_without_the_attribution(monkeypatch, tmp_path, mode, workers, hz):
    plain, light = light_cost.light_argvs("null", mode, workers, SECONDS, hz)
    settings = ["--probe", "null", "--mode", mode, "--workers", str(workers), "--duration", str(SECONDS)]
    settings += ["--reps", "1", "--warmup", str(light_cost.WARMUP_S), *cli_options(f"light@{hz}" if hz else "light")]
    cli_plain, cli_twin = as_the_cli_plans(monkeypatch, tmp_path, *settings)
    assert light == cli_twin
    assert plain == cli_plain  # the twin without its attribution is the planner's point
    assert items(light) - items(plain) == items(tuple(engine.Explain("light", hz).argv()))
    assert not items(plain) - items(light)
    engine.check(list(plain))  # the engine takes the plain run too


def differences(kind: str, mode: str, workers: int) -> tuple[Counter, Counter]:
    """What the bench's twin has that its point has not, and the reverse."""
    plain, twin = explain_bench.argvs("dup", mode, workers, SECONDS, kind)
    return items(twin) - items(plain), items(plain) - items(twin)


@pytest.mark.parametrize("workers", WORKERS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", EXPLAINED)
def test_a_twin_differs_from_its_point_by_attribution_and_duration_only(kind, mode, workers):
    added, removed = differences(kind, mode, workers)
    assert not attribution(kind) - added  # every attribution option, in the twin alone
    for name, value in (added - attribution(kind)) + removed:
        if not name.startswith(TIMING_PREFIX):  # per-operation timing: the next test
            assert name in DURATION_OPTIONS, f"{name} {value}: the twin and its point differ by more than attribution"


@pytest.mark.parametrize("workers", WORKERS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", EXPLAINED)
def test_per_operation_timing_is_the_same_in_a_twin_and_its_point(kind, mode, workers):
    added, removed = differences(kind, mode, workers)
    timing = [(name, value) for name, value in added + removed if name.startswith(TIMING_PREFIX)]
    assert not timing, f"per-operation timing in only one of the pair: {timing}"


@pytest.mark.parametrize("kind", ["full", "light", "light@250"])
@pytest.mark.parametrize("mode", MODES)
def test_explain_programs_runs_the_twin_scale_explain_plans(monkeypatch, tmp_path, kind, mode):
    import argparse

    how = explain_bench.explained_as(kind)
    seconds, workers = 2.0, WORKERS[-1]
    args = argparse.Namespace(probe="dup", mode=mode, workers=workers, explain=how.mode, sample_rate=how.sample_hz,
                              seconds=seconds)  # fmt: skip
    twin = explain_programs.twin_argv(args)
    settings = ["--probe", "dup", "--mode", mode, "--workers", str(workers), "--duration", str(seconds)]
    settings += ["--reps", str(explain_bench.REPS), "--warmup", str(explain_programs.WARMUP_S)]
    _, cli_twin = as_the_cli_plans(monkeypatch, tmp_path, *settings, "--explain", how.mode,
                                   "--sample-rate", str(how.sample_hz))  # fmt: skip
    assert tuple(twin) == cli_twin
