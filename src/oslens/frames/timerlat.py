"""The frames of a `timerlat` run.

`wakeups` (main): one row per kept wake-up of a thread from its periodic
timer: exactly the "wakes" `show --json` prints. `cpus`: one row per phase
and CPU, the per-CPU figures of the summary. `worst`: the worst wake-ups'
timelines, one row per stretch of a wake-up's latency and what held it back
then (only with attribution).

A phase is "alone" or "with <competitor> on CPUs …". Times are ns;
`expiry_ns` is CLOCK_MONOTONIC.
"""

from __future__ import annotations

from . import describe, table

_PHASE = {"phase": ("str", "alone, or with <competitor> on CPUs …")}

COLUMNS = {
    "wakeups": {
        **_PHASE,
        "cpu": ("int64", "CPU of the thread"),
        "rep": ("int64", "repetition"),
        "expiry_ns": ("int64", "the timer's expiry asked for (CLOCK_MONOTONIC), ns"),
        "thread_ns": ("int64", "thread latency: the expiry to the thread reading the clock, ns"),
        "irq_ns": (
            "Int64",
            "IRQ latency: the expiry to the timer's callback (summary's irq_ends), ns (null: not seen)",
        ),
    },
    "cpus": {
        **_PHASE,
        "cpu": ("int64", "CPU"),
        "policy": ("str", "fifo or other: the thread's scheduling policy"),
        "prio": ("int64", "its SCHED_FIFO priority (0: SCHED_OTHER)"),
        "wakeups": ("int64", "wake-ups (also those beyond the kept ones)"),
        "missed": ("int64", "periods skipped by wake-ups later than a whole period"),
        "kept": ("int64", "wake-ups kept individually"),
        "thread_p50_ns": ("float64", "median thread latency, ns"),
        "thread_p99_ns": ("float64", "99th percentile thread latency, ns (NaN: too few wake-ups tell it)"),
        "thread_p99.9_ns": ("float64", "99.9th percentile thread latency, ns (NaN: too few wake-ups tell it)"),
        "thread_max_ns": ("float64", "longest thread latency, ns"),
        "irq_seen": ("int64", "kept wake-ups whose timer was seen firing"),
        "irq_p50_ns": ("float64", "median IRQ latency, ns"),
        "irq_p99_ns": ("float64", "99th percentile IRQ latency, ns"),
        "irq_p99.9_ns": ("float64", "99.9th percentile IRQ latency, ns"),
        "irq_max_ns": ("float64", "longest IRQ latency seen, ns"),
    },
    "worst": {
        **_PHASE,
        "cpu": ("int64", "CPU"),
        "expiry_ns": ("int64", "the wake-up's expiry (CLOCK_MONOTONIC), ns"),
        "thread_ns": ("int64", "its thread latency, ns"),
        "irq_ns": ("Int64", "its IRQ latency, ns (null: not seen)"),
        "from_ns": ("int64", "the stretch's start, ns after the expiry"),
        "to_ns": ("int64", "its end, ns after the expiry"),
        "cause": ("str", "what held the thread back then: an interrupt, a task, idle, or its own return"),
    },
}
__doc__ += describe(COLUMNS)


def frames(run, records: list[dict]) -> dict:
    from ..analysis.timerlat import analyze

    summary = analyze(run, records)
    wakeups, cpus, worst = [], [], []
    for phase, s in summary.phases.items():
        wakeups += [
            {"phase": phase, "cpu": c, "rep": rep, "expiry_ns": t, "thread_ns": lat, "irq_ns": irq}
            for c, rep, t, lat, irq in s.wakes
        ]
        for c in s.cpus:
            d = vars(c)
            cpus.append(
                {
                    "phase": phase,
                    **{k: d[k] for k in ("cpu", "policy", "prio", "wakeups", "missed", "kept", "irq_seen")},
                    **{f"thread_{k}_ns": v for k, v in c.thread.items()},
                    "thread_max_ns": c.thread_max_ns,
                    **{f"irq_{k}_ns": v for k, v in c.irq.items()},
                    "irq_max_ns": c.irq_max_ns,
                }
            )
        worst += [
            {
                "phase": phase,
                "cpu": w.cpu,
                "expiry_ns": w.expiry_ns,
                "thread_ns": w.thread_ns,
                "irq_ns": w.irq_ns,
                "from_ns": a,
                "to_ns": b,
                "cause": cause,
            }
            for w in s.worst
            for a, b, cause in w.timeline
        ]
    return {
        "wakeups": table(run.id, wakeups, COLUMNS["wakeups"]),
        "cpus": table(run.id, cpus, COLUMNS["cpus"]),
        "worst": table(run.id, worst, COLUMNS["worst"]),
    }
