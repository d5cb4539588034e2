"""The frames of a `scale` run.

`workers` (main): one row per worker per repetition that counts, i.e. per
repetition that ended ok with every worker's record (records.scale_points'
complete repetitions: exactly those the analysis and `show` count).
`points`: one row per point (probe, variant, mode, placement, fixed work or
time, worker count), the figures `show --json` reports in its series'
points: total and per-worker ops/s as median and interval over repetitions.
`causes` (scale --explain): one row per cause per explained point, what
`show --json` gives in its series' `explained`: each cause's time per
operation, and a row `unexplained` for what no cause was charged with.
"""

from __future__ import annotations

from ..records import scale_points
from . import describe, joined, table

_SERIES = {
    "probe": ("str", "the probe (OS primitive)"),
    "variant": ("str", "its variant"),
    "mode": ("str", "process or thread workers"),
    "placement": ("str", "CPU placement policy: compact, spread or explicit"),
    "fixed": ("str", "time: fixed duration; ops: fixed work per worker"),
    "workers": ("int64", "workers at this point"),
}

_INTERVAL = ("median", "low", "high")
_WHICH = {
    "median": "median over repetitions",
    "low": "low end of the median's confidence interval",
    "high": "high end of it",
}

COLUMNS = {
    "workers": {
        **_SERIES,
        "rep": ("int64", "repetition"),
        "worker": ("int64", "worker index"),
        "cpu": ("int64", "CPU the worker was pinned to"),
        "cpu_seen": ("int64", "CPU it ran on at the end"),
        "ops": ("int64", "operations completed in the measured window"),
        "seconds": ("float64", "the measured window, s"),
        "ops_per_s": ("float64", "ops / seconds"),
        "rusage_s": ("float64", "the span the rusage figures cover: with fixed time, warm-up and window, s"),
        "user_s": ("float64", "user CPU time over rusage_s (rusage), s"),
        "sys_s": ("float64", "system CPU time over rusage_s (rusage), s"),
        "nvcsw": ("int64", "voluntary context switches over rusage_s (rusage)"),
        "nivcsw": ("int64", "involuntary context switches over rusage_s (rusage)"),
    },
    "points": {
        **_SERIES,
        "reps": ("int64", "repetitions counted"),
        **{f"total_{k}": ("float64", f"ops/s of all workers together: {_WHICH[k]}") for k in _INTERVAL},
        **{f"per_worker_{k}": ("float64", f"ops/s per worker: {_WHICH[k]}") for k in _INTERVAL},
        "coverage": ("float64", "confidence the interval covers the median"),
        "imbalance": ("float64", "fastest worker's rate / slowest's, median over repetitions"),
        "sys_share": ("float64", "kernel share of the workers' CPU time"),
        "nivcsw_per_s": ("float64", "involuntary switches per worker-second"),
        "efficiency": ("float64", "per-worker rate relative to the smallest worker count"),
        **{
            f"{w}_s_{k}": ("float64", f"fixed work: {what}, s: {_WHICH[k]}")
            for w, what in (
                ("fastest", "the fastest worker's time"),
                ("slowest", "the slowest worker's time"),
                ("mean", "the workers' mean time"),
            )
            for k in _INTERVAL
        },
        "warnings": ("str", "why a figure may not be trusted, '; '-separated"),
    },
    "causes": {
        **_SERIES,
        "reps": ("int64", "explained repetitions counted"),
        "ns_per_op": ("float64", "the workers' time per operation in the explained repetitions, ns"),
        "cause": ("str", "what the time was charged to, for people ('unexplained': nothing was)"),
        "key": ("str", "the same cause at every point of a series ('syscall:munmap', 'lock:mmap_lock:rwsem:W')"),
        "group": (
            "str",
            "user, syscall, fault, lock, interrupt, runq, blocked, kernel (or unexplained); helper: "
            "what a task the workers wait on did meanwhile (a child, the partner), beside their time, not in it",
        ),
        "cause_ns_per_op": ("float64", "the time charged to this cause per operation, ns"),
        "count_per_op": ("float64", "times per operation the cause was entered (NaN for unexplained)"),
        "callers": ("str", "a lock: who waited, the costliest chain, '; '-separated"),
        "takers": ("str", "runq: who had the CPU meanwhile, 'name share', '; '-separated, largest first"),
        "cost": ("float64", "1 - the explained repetitions' median throughput / the plain ones' (the observer's cost)"),
        "cost_low": ("float64", "the cost's lower bound, from both sides' repetitions (NaN: a plain one ran nothing)"),
        "cost_high": ("float64", "the cost's upper bound"),
        "cost_confidence": ("float64", "the confidence the bounds have together (0 from two repetitions a side)"),
        "program_share": (
            "float64",
            "light mode: its BPF programs' run time over the workers' time, from the kernel's statistics (NaN: not "
            "measured)",
        ),
        "explain_mode": ("str", "full (every system call and fault timed) or light (time on a CPU split by samples)"),
        "error_ns_per_op": ("float64", "light mode: a sampled share's standard error, ns (NaN: timed exactly)"),
    },
    "stacks": {
        **_SERIES,
        "stack": ("str", "a sampled stack, folded: its cause, then the kernel functions outermost first"),
        "samples": ("int64", "samples of the workers' time that fell in it"),
        "ns_per_op": ("float64", "samples × the sampling period / operations, ns"),
    },
}
__doc__ += describe(COLUMNS)


def frames(run, records: list[dict]) -> dict:
    from ..analysis.scale import summarize

    rows = []
    for pt in scale_points(records):
        series = dict(zip(("probe", "variant", "mode", "placement", "fixed"), pt.series), workers=pt.workers)
        for rep, ws in zip(pt.complete_reps, pt.complete):
            for w in sorted(ws, key=lambda w: w["worker"]):
                ru = w["rusage"]
                rows.append(
                    {
                        **series,
                        "rep": rep,
                        "worker": w["worker"],
                        "cpu": w["cpu"],
                        "cpu_seen": w["cpu_seen"],
                        "ops": w["ops"],
                        "seconds": w["seconds"],
                        "ops_per_s": w["ops_per_sec"],
                        "rusage_s": ru.get("interval_s", w["seconds"]),
                        "user_s": ru["user_s"],
                        "sys_s": ru["sys_s"],
                        "nvcsw": ru["nvcsw"],
                        "nivcsw": ru["nivcsw"],
                    }
                )
    points = []
    for s in summarize(records):
        for p in s.points:
            row = {
                "probe": s.probe,
                "variant": s.variant,
                "mode": s.mode,
                "placement": s.placement,
                "fixed": s.fixed,
                "workers": p.workers,
                "reps": p.reps,
                "coverage": p.total.coverage,
                "imbalance": p.imbalance,
                "sys_share": p.sys_share,
                "nivcsw_per_s": p.nivcsw_per_s,
                "efficiency": p.efficiency,
                "warnings": joined(p.warnings),
            }
            for name in ("total", "per_worker", "fastest_s", "slowest_s", "mean_s"):
                iv = getattr(p, name)
                for k in _INTERVAL:
                    row[f"{name}_{k}"] = getattr(iv, k) if iv is not None else None
            points.append(row)
    causes, stacks = [], []
    for s in summarize(records):
        for p, e in zip(s.points, s.explained or []):
            if e is None:
                continue
            at = {"probe": s.probe, "variant": s.variant, "mode": s.mode, "placement": s.placement, "fixed": s.fixed,
                  "workers": p.workers}  # fmt: skip
            stacks += [{**at, "stack": k, "samples": n, "ns_per_op": v} for k, (n, v) in sorted(e.folded.items())]
            point = {**at, "reps": e.reps, "ns_per_op": e.ns_per_op, "cost": e.cost, "cost_low": e.cost_low,
                     "cost_high": e.cost_high, "cost_confidence": e.cost_confidence,
                     "program_share": e.program_share, "explain_mode": e.mode}  # fmt: skip
            for c in e.causes:
                causes.append({**point, "cause": c.label, "key": c.key, "group": c.group,
                               "cause_ns_per_op": c.ns_per_op, "count_per_op": c.count_per_op,
                               "callers": joined(c.callers),
                               "takers": "; ".join(f"{t['name']} {t['share']:.3f}" for t in c.takers),
                               "error_ns_per_op": c.error_ns})  # fmt: skip
            for c in e.helpers:  # beside the workers' time, not in it: it overlaps their sleep
                causes.append({**point, "cause": f"{e.helped_by}: {c.label}", "key": f"helper:{c.key}",
                               "group": "helper", "cause_ns_per_op": c.ns_per_op, "count_per_op": c.count_per_op,
                               "callers": joined(c.callers), "takers": "", "error_ns_per_op": c.error_ns})  # fmt: skip
            causes.append({**point, "cause": "unexplained", "key": "unexplained", "group": "unexplained",
                           "cause_ns_per_op": e.unexplained_ns, "count_per_op": None, "callers": "",
                           "takers": "", "error_ns_per_op": None})  # fmt: skip
    return {
        "workers": table(run.id, rows, COLUMNS["workers"]),
        "points": table(run.id, points, COLUMNS["points"]),
        "causes": table(run.id, causes, COLUMNS["causes"]),
        "stacks": table(run.id, stacks, COLUMNS["stacks"]),
    }
