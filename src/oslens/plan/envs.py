"""`oslens envs`: the same operations timed natively, in a container and in
a KVM guest, round after round, the environments taking turns within each
round (each starts a round first in turn), so that a drift of the host
weighs on every environment alike.

Each environment is made once for the run (envs/); its engine is asked for
its own topology, placement and checks, so a guest of 16 vCPUs is planned
on its 16 CPUs even on a host of 2."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from .. import engine
from ..envs import planned_cpus
from ..errors import UsageError
from ..invocation import Context, Invocation
from ..parse import parse_probes
from . import Plan, check_amounts, time_limit

DEFAULT_PROBES = "getppid,fault:anon,fork,pingpong:pipe"  # a system call, a fault, fork, IPC
DEFAULT_OPS = 20000
MAX_ROUNDS = 1000


@dataclass(frozen=True)
class EnvPoint(Invocation):
    """One engine invocation (one round of one operation) in one environment."""

    probe: str
    variant: str
    env: str  # its label: native, container, kvm (or the whole spec when two share a name)
    round: int
    cpus: tuple[int, ...]
    args: tuple[str, ...] = field(compare=False)
    made: object = field(default=None, compare=False)  # the made environment; None: native
    check_args = None  # checked by the planner inside each environment, not on the host

    @property
    def label(self) -> str:
        return f"{self.probe}:{self.variant} {self.env} round {self.round + 1}"

    @contextlib.contextmanager
    def surroundings(self):
        context = {"type": "context", "competition": None, "environment": self.env, "round": self.round}
        with engine.inside(self.made) if self.made is not None else contextlib.nullcontext():
            yield Context(context)


def labels(specs: list[str]) -> list[str]:
    """An environment's label: its name, or its whole spec where two specs
    name the same environment (kvm:cpus=2 and kvm:cpus=2,accel=tcg)."""
    names = [s.partition(":")[0] for s in specs]
    return [n if names.count(n) == 1 else s for n, s in zip(names, specs)]


@dataclass(frozen=True)
class Settings:
    """What the user asked of an envs run, checked before any environment is made."""

    probes: list[tuple[str, str]]
    workers: int
    placement: str
    duration: float | None
    ops: int | None
    rounds: int
    warmup: float
    limit: float


def too_many_workers(workers: int, label: str, cpus: int) -> str:
    return f"--workers {workers}: {label} has {cpus} CPU{'s' if cpus != 1 else ''}"


def settle(
    *,
    probe: str | None,
    parsed: dict[str, object],
    workers: int,
    placement: str,
    duration: float | None,
    ops: int | None,
    rounds: int,
    warmup: float,
) -> Settings:
    """parsed: label -> the parsed, not yet made, environment (None for
    native). Every number is checked here, against each environment's CPUs
    where its spec says them, so that bad input never costs an image or a
    guest's boot."""
    if ops is None and duration is None:
        ops = DEFAULT_OPS
    duration = check_amounts(duration, ops, 1, warmup, 0.1, default_duration=0.3)
    if not 1 <= rounds <= MAX_ROUNDS:
        raise UsageError(f"--rounds: {rounds} is not a number of rounds from 1 to {MAX_ROUNDS}")
    if workers < 1:
        raise UsageError(f"--workers: {workers} is not a number of workers of at least 1")
    probes = parse_probes(probe or DEFAULT_PROBES)
    untimed = [n for n, _ in probes if not engine.probes()[n].timed]
    if untimed:
        raise UsageError(f"probe {untimed[0]} has no per-operation latency")
    for label, env in parsed.items():
        cpus = planned_cpus(env) if env is not None else engine.topology()["available"]
        if workers > cpus:
            raise UsageError(too_many_workers(workers, label, cpus))
    limit = time_limit(1, (duration or 0) + warmup)
    return Settings(probes, workers, placement, duration, ops, rounds, warmup, limit)


def plan(s: Settings, made: dict[str, object], skipped: dict[str, str]) -> Plan:
    """made: label -> the made environment (None for native), in --envs
    order; skipped: label -> why a default environment could not be made."""
    per_env: dict[str, tuple[tuple[int, ...], dict]] = {}
    for label, env in made.items():
        with engine.inside(env) if env is not None else contextlib.nullcontext():
            available = engine.topology()["available"]
            if s.workers > available:  # as the inside sees it, once made
                raise UsageError(too_many_workers(s.workers, label, available))
            cpus = tuple(engine.placement(s.workers, s.placement))
            argvs = {}
            for name, variant in s.probes:
                args = engine.run_argv(
                    probe=f"{name}:{variant}", cpus=cpus, latency=True, reps=1, warmup=s.warmup,
                    time_limit=s.limit, duration=s.duration, ops=s.ops,
                )  # fmt: skip
                engine.check(list(args))  # as the engine in that environment sees it
                argvs[(name, variant)] = tuple(args)
        per_env[label] = (cpus, argvs)
    order = list(made)
    points = []
    for r in range(s.rounds):
        turn = order[r % len(order) :] + order[: r % len(order)]
        for name, variant in s.probes:
            for label in turn:
                cpus, argvs = per_env[label]
                points.append(EnvPoint(name, variant, label, r, cpus, argvs[(name, variant)], made[label]))
    described = {label: (env.describe() if env is not None else {"name": "native"}) for label, env in made.items()}
    params = {
        "probes": [f"{n}:{v}" for n, v in s.probes],
        "envs": order,
        "environments": described,
        "skipped": skipped,
        "cpus": {label: list(per_env[label][0]) for label in order},
        "workers": s.workers,
        "placement": s.placement,
        "rounds": s.rounds,
        "ops": s.ops,
        "duration_s": s.duration,
        "warmup_s": s.warmup,
    }
    return Plan(points, 1, params)
