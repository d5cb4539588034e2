"""`oslens timerlat`: the timerlat probe on every chosen CPU at once, each
thread at a real-time priority, with kernel attribution unless refused,
alone and with a competitor."""

from __future__ import annotations

from .. import engine
from ..errors import UsageError
from ..parse import competitor_cpus, parse_compete, parse_cpus
from . import MeasuredPoint, Plan, check_amounts, time_limit


def plan(
    *,
    cpus: str | None,
    duration: float,
    period_us: int,
    prio: int,
    dma_latency_us: int | None,
    reps: int,
    warmup: float,
    compete: str | None,
    attribution: bool,
) -> Plan:
    duration = check_amounts(duration, None, reps, warmup, 0.1, default_duration=5.0)
    options = engine.probes()["timerlat"].options  # the probe's own bounds
    for flag, value, key in (("--period-us", period_us, "period_us"), ("--prio", prio, "prio")):
        least, most = options[key]["min"], options[key]["max"]
        if not least <= value <= most:
            raise UsageError(f"{flag}: {value} is not a whole number from {least} to {most}")
    most = options["dma_latency_us"]["max"]
    if dma_latency_us is not None and not 0 <= dma_latency_us <= most:
        raise UsageError(f"--dma-latency: {dma_latency_us} is not a whole number of µs from 0 to {most}")
    if period_us * 1e-6 * 2 > duration:
        raise UsageError(f"--period-us: {period_us} µs leaves fewer than two periods in --duration {duration:g} s")
    chosen = parse_cpus(cpus)
    spec = parse_compete(compete) if compete else None
    if spec:
        competitor_cpus(spec, list(chosen))
    # every wake-up kept for the causes and the IRQ latency (the duration's periods, and a few more), up to
    # the probe's default a CPU: past it the histogram still counts all, the report says how many were kept
    # (a stop seen late adds wake-ups: room for 0.1 s of them)
    periods = duration / (period_us * 1e-6)
    kept = min(int(periods + max(16, 0.1 / (period_us * 1e-6))), options["max_wakeups"]["default"])
    args = engine.run_argv(
        probe="timerlat",
        cpus=chosen,
        mode="thread",
        duration=duration,
        warmup=warmup,
        reps=reps,
        interval=min(duration, 0.5),
        time_limit=time_limit(reps, duration + warmup),
        opts={
            "period_us": period_us,
            "prio": prio,
            "max_wakeups": max(kept, options["max_wakeups"]["min"]),
            **({"dma_latency_us": dma_latency_us} if dma_latency_us is not None else {}),
        },
        trace=attribution,
    )
    points = [
        MeasuredPoint("timerlat", "default", "thread", chosen, tuple(args), c)
        for c in ([None, spec] if spec else [None])
    ]
    params = {
        "cpus": list(chosen),
        "duration_s": duration,
        "period_us": period_us,
        "prio": prio,
        "dma_latency_us": dma_latency_us,
        "reps": reps,
        "warmup_s": warmup,
        "compete": spec.label if spec else None,
        "attribution": attribution,
    }
    return Plan(points, reps, params)
