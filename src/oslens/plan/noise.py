"""`oslens noise`: the detour probe on every chosen CPU at once, with kernel
attribution unless refused, alone and with a competitor."""

from __future__ import annotations

import math

from .. import engine
from ..errors import UsageError
from ..parse import competitor_cpus, parse_compete, parse_cpus
from . import MeasuredPoint, Plan, check_amounts, time_limit


def plan(
    *,
    cpus: str | None,
    duration: float,
    threshold: int | None,
    reps: int,
    warmup: float,
    mode: str,
    compete: str | None,
    attribution: bool,
    ftq_us: int | None = None,
    step_us: float = 1000.0,
) -> Plan:
    duration = check_amounts(duration, None, reps, warmup, 0.1, default_duration=5.0)
    if not (math.isfinite(step_us) and step_us > 0):
        raise UsageError(f"--step-us: {step_us} is not a positive number of microseconds")
    if step_us > duration * 1e6:
        raise UsageError(f"--step-us: a {step_us:g} µs step is longer than the {duration:g} s measured")
    options = engine.probes()["detour"].options  # the probe's own bounds; 0 means "not set" there
    for flag, value, key in (("--threshold-ns", threshold, "threshold_ns"), ("--ftq-us", ftq_us, "ftq_us")):
        most = options[key]["max"]
        if value is not None and not 0 < value <= most:
            raise UsageError(f"{flag}: {value} is not a whole number from 1 to {most}")
    chosen = parse_cpus(cpus)
    spec = parse_compete(compete) if compete else None
    if spec:
        competitor_cpus(spec, list(chosen))
    opts = {}
    if threshold:
        opts["threshold_ns"] = threshold
    if ftq_us is not None:
        opts["ftq_us"] = ftq_us
    args = engine.run_argv(
        probe="detour",
        cpus=chosen,
        mode=mode,
        duration=duration,
        warmup=warmup,
        reps=reps,
        interval=min(duration, 0.5),
        time_limit=time_limit(reps, duration + warmup),
        opts=opts,
        trace=attribution,
    )
    points = [
        MeasuredPoint("detour", "default", mode, chosen, tuple(args), c) for c in ([None, spec] if spec else [None])
    ]
    params = {
        "cpus": list(chosen),
        "duration_s": duration,
        "threshold_ns": threshold,
        "reps": reps,
        "warmup_s": warmup,
        "mode": mode,
        "compete": spec.label if spec else None,
        "attribution": attribution,
        "ftq_us": ftq_us,
        "step_ns": step_us * 1000,
    }
    return Plan(points, reps, params)
