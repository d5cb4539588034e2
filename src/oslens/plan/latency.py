"""`oslens latency`: every operation of the catalogue (or those named) timed
one by one, after the timing floor (the empty `null` operation), alone and
with a competitor; or all of them mixed in one stream (--mix)."""

from __future__ import annotations

from .. import engine
from ..errors import UsageError
from ..parse import competitor_cpus, parse_compete, parse_probes, parse_worker_counts
from . import MeasuredPoint, Plan, check_amounts, time_limit

# Not in the default catalogue: the floor (always measured separately), the
# OSMark variants of mmap/fork whose point is scaling, and the sem ping-pong
# that pingpong and semop cover.
NOT_DEFAULT = ("null", "fork-static", "mmap", "sem", "fork:mapped")


def plan(
    *,
    probe: str | None,
    workers: str,
    mode: str,
    placement: str,
    duration: float | None,
    ops: int | None,
    reps: int,
    warmup: float,
    compete: str | None,
    mix: bool,
) -> Plan:
    duration = check_amounts(duration, ops, reps, warmup, 0.1, default_duration=0.3)
    ncpus = engine.topology()["available"]
    counts = parse_worker_counts(workers, ncpus)
    if len(counts) != 1:
        raise UsageError("--workers: latency takes one worker count (a number or 'max')")
    cpus = tuple(engine.placement(counts[0], placement))
    if probe:
        probes = parse_probes(probe)
    else:
        # fork:mapped needs 1 GiB per worker: asked for by name only.
        probes = [
            (p.name, v)
            for p in engine.probes().values()
            if p.name not in NOT_DEFAULT and p.timed and not p.needs_target
            for v in p.variants
            if f"{p.name}:{v}" not in NOT_DEFAULT
        ]
    untimed = [n for n, _ in probes if not engine.probes()[n].timed]
    if untimed:
        raise UsageError(f"probe {untimed[0]} has no per-operation latency (use 'oslens noise' for detours)")
    spec = parse_compete(compete) if compete else None
    if spec:
        competitor_cpus(spec, list(cpus))  # refuse now, not after the first point
    limit = time_limit(reps, (duration or 0) + warmup)
    measured = [("null", "default")] + [pv for pv in probes if pv[0] != "null"]

    def args(names: str) -> tuple[str, ...]:
        return tuple(
            engine.run_argv(
                probe=names,
                cpus=cpus,
                mode=mode,
                latency=True,
                mix=mix,
                reps=reps,
                warmup=warmup,
                time_limit=limit,
                duration=duration,
                ops=ops,
            )
        )

    competitions = [None, spec] if spec else [None]
    if mix:
        names = ",".join(f"{n}:{v}" for n, v in measured)
        points = [MeasuredPoint("mix", f"{len(measured)} operations", mode, cpus, args(names), c) for c in competitions]
    else:
        points = [
            MeasuredPoint(name, variant, mode, cpus, args(f"{name}:{variant}"), c)
            for name, variant in measured
            for c in competitions
        ]
    params = {
        "probes": [f"{n}:{v}" for n, v in measured],
        "workers": counts[0],
        "cpus": list(cpus),
        "mode": mode,
        "placement": placement,
        "duration_s": duration,
        "ops": ops,
        "reps": reps,
        "warmup_s": warmup,
        "mix": mix,
        "compete": spec.label if spec else None,
        "compete_cpus": list(spec.cpus) if spec and spec.cpus else None,
    }
    return Plan(points, reps, params)
