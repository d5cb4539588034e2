"""The frames of a `noise` run.

`detours` (main): one row per detour (a stretch of time taken from the
probe thread), with its cause: exactly the "detours" `show --json` prints.
`cpus`: one row per phase and CPU, the per-CPU figures of the summary.
`causes`: one row per phase and cause (only with attribution), the
summary's cause table. `tail`: the tail at scale, one row per phase, node
count and delay: for a bulk-synchronous step on every node, the chance a
step is delayed by more than the delay with its exact 95 % interval
(p_low, p_high; `told` false where it spans over half of [0, 1]), and the
expected slowdown.

A phase is "alone" or "with <competitor> on CPUs …". Times are ns;
`t_ns` is CLOCK_MONOTONIC.
"""

from __future__ import annotations

from . import describe, table

_PHASE = {"phase": ("str", "alone, or with <competitor> on CPUs …")}

COLUMNS = {
    "detours": {
        **_PHASE,
        "cpu": ("int64", "CPU of the probe thread"),
        "t_ns": ("int64", "start of the detour (CLOCK_MONOTONIC), ns"),
        "duration_ns": ("int64", "its length, ns"),
        "cause": (
            "str",
            "what took the time (most of it): a kernel event, the hypervisor (steal), or unexplained "
            "(hardware, hypervisor or SMI)",
        ),
    },
    "cpus": {
        **_PHASE,
        "cpu": ("int64", "CPU"),
        "runtime_ns": ("float64", "time the probe ran, ns"),
        "count": ("int64", "detours (also those beyond the kept list)"),
        "total_ns": ("float64", "time lost to detours, ns"),
        "max_ns": ("float64", "longest detour, ns"),
        "loop_ns": ("float64", "one undisturbed probe loop, ns (median over repetitions)"),
        "threshold_ns": ("float64", "shortest gap counted as a detour, ns"),
        "kept": ("int64", "detours kept individually"),
        "p50_ns": ("float64", "median detour, ns"),
        "p99_ns": ("float64", "99th percentile detour, ns"),
        "p99.9_ns": ("float64", "99.9th percentile detour, ns"),
        "steal_ns": ("float64", "time stolen by the hypervisor (/proc/stat, over steal_window_ns), ns"),
        "steal_window_ns": ("float64", "the window steal was read over: the detours' (warm-up excluded), ns"),
        "steal_resolution_ns": ("float64", "steal is ± this: one tick (1/USER_HZ) per repetition, ns"),
        "lost_share": ("float64", "total_ns / runtime_ns"),
        "rate_per_s": ("float64", "detours per second"),
        "ftq_quantum_ns": ("float64", "FTQ quantum, ns"),
        "ftq_quanta": ("Int64", "FTQ quanta"),
        "ftq_median": ("float64", "FTQ work per quantum: median"),
        "ftq_min": ("float64", "FTQ work per quantum: minimum"),
        "ftq_full": ("float64", "FTQ work of an undisturbed quantum (99th percentile)"),
        "ftq_work_lost": ("float64", "FTQ share of the work lost"),
    },
    "causes": {
        **_PHASE,
        "cause": ("str", "the cause"),
        "count": ("int64", "detours it took part in"),
        "total_ns": ("float64", "time it took, ns"),
        "max_ns": ("float64", "most it took of one detour, ns"),
        "share": ("float64", "its share of all detour time"),
    },
    "tail": {
        **_PHASE,
        "step_ns": ("float64", "the step of the bulk-synchronous computation, ns"),
        "windows": ("int64", "step-long windows measured"),
        "nodes": ("int64", "nodes computing in lockstep"),
        "delay": ("str", "the delay: >10us, >100us, >1000us"),
        "p_delayed": ("float64", "chance a step is delayed by more than that on one node of them"),
        "p_low": ("float64", "its lower bound: exact binomial (Clopper-Pearson) 95 % interval from the windows"),
        "p_high": ("float64", "its upper bound"),
        "told": ("bool", "the interval spans at most half of [0, 1]; otherwise the chance cannot be told"),
        "expected_slowdown": ("float64", "expected step time with noise / step"),
        "slowdown_told": ("bool", "enough windows to assume no step worse than the worst seen (same rule)"),
        "measure_s": ("float64", "measuring time (same CPUs, step) after which every figure of the row is told"),
    },
}
__doc__ += describe(COLUMNS)

_FTQ = ("quantum_ns", "quanta", "median", "min", "full", "work_lost")


def frames(run, records: list[dict]) -> dict:
    from ..analysis.noise import analyze

    summary = analyze(run, records)
    doc = summary.to_dict()
    detours = [
        {"phase": phase, "cpu": cpu, "t_ns": start, "duration_ns": dur, "cause": cause}
        for phase, rows in summary.json_extra()["detours"].items()
        for cpu, start, dur, cause in rows
    ]
    cpus, causes, tail = [], [], []
    for phase, p in doc["phases"].items():
        for c in p["cpus"]:
            ftq = c.get("ftq") or {}
            cpus.append(
                {
                    "phase": phase,
                    **{k: v for k, v in c.items() if k not in ("percentiles_ns", "ftq")},
                    **{f"{k}_ns": v for k, v in c["percentiles_ns"].items()},
                    **{f"ftq_{k}": ftq.get(k) for k in _FTQ},
                }
            )
        causes += [{"phase": phase, "cause": cause, **row} for cause, row in p["causes"].items()]
        t = p.get("tail") or {}
        for n, at in (t.get("nodes") or {}).items():
            tail += [
                {
                    "phase": phase,
                    "step_ns": t["step_ns"],
                    "windows": t["windows"],
                    "nodes": int(n),
                    "delay": delay,
                    "p_delayed": prob,
                    "p_low": at["p_bounds"][delay][0],
                    "p_high": at["p_bounds"][delay][1],
                    "told": at["told"][delay],
                    "expected_slowdown": at["expected_slowdown"],
                    "slowdown_told": at["slowdown_told"],
                    "measure_s": at["measure_s"],
                }
                for delay, prob in at["p_delayed"].items()
            ]
    return {
        "detours": table(run.id, detours, COLUMNS["detours"]),
        "cpus": table(run.id, cpus, COLUMNS["cpus"]),
        "causes": table(run.id, causes, COLUMNS["causes"]),
        "tail": table(run.id, tail, COLUMNS["tail"]),
    }
