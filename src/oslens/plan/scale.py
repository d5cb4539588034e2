"""`oslens scale`: every probe × mode × worker count, all repetitions of a point in one invocation."""

from __future__ import annotations

from .. import engine
from ..parse import parse_opts, parse_probes, parse_worker_counts
from . import Plan, Point, check_amounts, time_limit


def plan(
    *,
    probe: str | None,
    workers: str | None,
    mode: str,
    placement: str,
    duration: float | None,
    ops: int | None,
    reps: int,
    warmup: float,
    interval: float,
    opts: tuple[str, ...],
    explain: bool = False,
    explain_duration: float | None = None,
) -> Plan:
    """With explain, each point is followed by its explained twin: the same
    probe, mode and worker count for the same number of repetitions, fixed
    time (explain_duration, else the measured duration, else 1 s), with every
    worker's time charged to its kernel causes and, where the probe times
    its operations, each operation's latency. Measured apart, so that the
    plain figures stay free of the attribution's cost, and right after, so
    that the two see the same machine; the pair gives that cost."""
    duration = check_amounts(duration, ops, reps, warmup, interval, default_duration=1.0)
    ncpus = engine.topology()["available"]
    counts = parse_worker_counts(workers, ncpus)
    probes = parse_probes(probe)
    probe_opts = parse_opts(opts, probes)
    modes = ["process", "thread"] if mode == "both" else [mode]
    limit = time_limit(reps, (duration or 0) + warmup)
    explain_s = explain_duration or duration or 1.0
    catalogue = engine.probes() if explain else {}
    points = []
    for name, variant in probes:
        for m in modes:
            for n in counts:
                point = dict(
                    probe=f"{name}:{variant}",
                    workers=n,
                    mode=m,
                    placement=placement,
                    reps=reps,
                    warmup=warmup,
                    interval=interval,
                    opts=probe_opts[name],
                )
                args = engine.run_argv(**point, time_limit=limit, duration=duration, ops=ops)
                points.append(Point(name, variant, m, n, tuple(args)))
                if explain:
                    args = engine.run_argv(
                        **point,
                        time_limit=time_limit(reps, explain_s + warmup),
                        duration=explain_s,
                        latency=catalogue[name].timed,
                        explain=True,
                    )
                    points.append(Point(name, variant, m, n, tuple(args), explained=True))
    params = {
        "probes": [f"{n}:{v}" for n, v in probes],
        "workers": counts,
        "modes": modes,
        "placement": placement,
        "duration_s": duration,
        "ops": ops,
        "reps": reps,
        "warmup_s": warmup,
        "interval_s": interval,
        "opts": probe_opts,
        "explain": explain,
    }
    return Plan(points, reps, params)
