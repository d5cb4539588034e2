"""`oslens appscale`: an application (a command, or a built-in workload of
the engine) on each CPU count, confined to the CPUs the placement picks."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .. import engine
from ..errors import UsageError
from ..format import sig
from ..parse import parse_worker_counts
from . import Plan, check_reps
from .profile import check_target

N_PLACEHOLDER = re.compile(r"\{n\}")
DIR_PLACEHOLDER = "{dir}"


@dataclass(frozen=True)
class AppPoint:
    n: int
    cpus: tuple[int, ...]
    argv: tuple[str, ...]
    # which application, in a run of several (a study's); "" in a run of one
    app: str = ""
    # run untimed before each repetition (hyperfine's --prepare): a build's clean
    prepare: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        cpus = f"{self.n} CPU{'s' if self.n > 1 else ''}"
        return f"{self.app}, {cpus}" if self.app else cpus


def substitute(argv: list[str], n: int) -> tuple[str, ...]:
    return tuple(N_PLACEHOLDER.sub(str(n), a) for a in argv)


def check(*, command: list[str], workload: str | None, reps: int, size: int | None, time_limit: float | None) -> None:
    """What can be refused whatever machine the application runs on: before
    an environment is made (`--in`), with the host's engine, which is the
    one copied inside."""
    if bool(command) == bool(workload):
        raise UsageError("give either --workload NAME or -- CMD ARGS… (one application)")
    check_reps(reps)
    most = engine.limit("profile", "--time-limit")["max"]
    if time_limit is not None and not 0 < time_limit <= most:
        raise UsageError(f"--time-limit: {sig(time_limit, 6)} is not a number of seconds in (0, {sig(most, 9)}]")
    if size is not None and size <= 0:
        raise UsageError(f"--size: {size} is not a positive size")
    if workload and workload not in (known := engine.workloads()):
        raise UsageError(f"--workload: no workload '{workload}' (there are: {', '.join(sorted(known))})")


def plan(
    *,
    command: list[str],
    workload: str | None,
    cpus: str | None,
    placement: str,
    reps: int,
    size: int | None,
    mode: str,
    time_limit: float | None,
    prepare: str | None = None,
) -> Plan:
    check(command=command, workload=workload, reps=reps, size=size, time_limit=time_limit)
    available = engine.topology()["available"]
    counts = parse_worker_counts(cpus, available, option="--cpu-counts", placement=placement)
    if workload:
        known = engine.workloads()
        data_dir = DIR_PLACEHOLDER if known[workload].get("uses_dir") else None
        engine.check_app(workload, workers=max(counts), mode=mode, size=size, data_dir=data_dir)
        argv = engine.app_argv(workload, workers="{n}", mode=mode, size=size, data_dir=data_dir)
    else:
        if size is not None:
            raise UsageError("--size is for --workload; give a command its own arguments")
        check_target([command[0]], None, None, None)
        argv = list(command)
    before = ("sh", "-c", prepare) if prepare else ()
    points = [
        AppPoint(n, tuple(engine.placement(n, placement)), substitute(argv, n), prepare=substitute(list(before), n))
        for n in counts
    ]
    params = {
        "command": list(command) or None,
        "workload": workload,
        "size": size,
        "mode": mode if workload else None,
        "cpus": counts,
        "placement": placement,
        "reps": reps,
        "time_limit_s": time_limit,
        "prepare": prepare,
        "available_cpus": available,
    }
    return Plan(points, reps, params)


def dry_run(p: Plan) -> dict:
    """What `appscale --dry-run` prints: the plan, where each CPU count runs."""
    from .scale import machine_shape, where_workers_run

    return {
        "dry_run": True,
        "kind": "appscale",
        "machine": machine_shape(),
        "params": p.params,
        "points": where_workers_run({pt.n: list(pt.cpus) for pt in p.points}, p.params["placement"]),
    }
