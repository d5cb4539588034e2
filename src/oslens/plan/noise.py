"""`oslens noise`: the detour probe on every chosen CPU at once, with kernel
attribution unless refused, alone and with a competitor."""

from __future__ import annotations

import math

from .. import engine
from ..cpulist import format_cpulist
from ..errors import MeasurementError, UsageError
from ..format import seconds
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
        raise UsageError(f"--step-us: the step is longer than the {seconds(duration)} measured")
    options = engine.probes()["detour"].options  # the probe's own bounds; 0 means "not set" there
    for flag, value, key in (("--threshold-ns", threshold, "threshold_ns"), ("--ftq-us", ftq_us, "ftq_us")):
        most = options[key]["max"]
        if value is not None and not 0 < value <= most:
            raise UsageError(f"{flag}: {value} is not a whole number from 1 to {most}")
    chosen = parse_cpus(cpus)
    spec = parse_compete(compete) if compete else None
    if spec:
        competitor_cpus(spec, list(chosen))
    if threshold:
        _refuse_threshold_under_the_loop(threshold, chosen, mode)
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


def _refuse_threshold_under_the_loop(threshold: int, cpus: list[int], mode: str) -> None:
    """A threshold within a few loop times counts the probe's own loop as
    detours (at 10 ns on a 9.5 ns loop, nine iterations in ten, and half
    the CPU "lost"). The loop time belongs to this machine and clock, so
    the probe measures it on the chosen CPUs (one operation each, its
    calibration included) and says the least threshold it can honour."""
    argv = engine.run_argv(probe="detour", cpus=cpus, mode=mode, ops=1, warmup=0, reps=1, opts={"max_detours": 16})
    with engine.EngineRun(argv) as er:
        least = max((r["min_threshold_ns"] for r in er.read_to_end() if r["type"] == "detours"), default=None)
    if er.proc.returncode != 0 or least is None:
        raise MeasurementError(f"measuring the detour probe's loop time: {er.failure()}")
    if threshold < least:
        where = f"CPU{'s' if len(cpus) > 1 else ''} {format_cpulist(cpus)}"
        raise UsageError(
            f"--threshold-ns: {threshold} ns is within a few loop times of the probe here "
            f"(it would count the loop itself); the least it can honour on {where} is {math.ceil(least)} ns"
        )
