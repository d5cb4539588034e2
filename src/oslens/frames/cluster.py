"""The frames of a `cluster` run; the main one is the measure's own
(`ranks` for noise and bsp, `latency`, `scale`).

`ranks`: one row per rank of the job: its host, CPUs, noise share,
detour rate, longest and 99th-percentile detour, top cause, and whether it
is an outlier (the rule is in `show --json`). `steps` (cluster bsp): one
row per rank and measured step: its work time, its wait in the collective,
its detour time, and whether it was the last to arrive. `latency` (cluster
latency): one row per rank and operation, its percentiles. `scale` (cluster
scale): one row per rank, probe and worker count. `timerlat` (cluster
timerlat): one row per rank, its threads' wake-up latency and the worst
one's cause. Times are ns.
"""

from __future__ import annotations

from ..records import bsps
from . import describe, table

COLUMNS = {
    "ranks": {
        "rank": ("int64", "MPI rank"),
        "host": ("str", "its host"),
        "cpus": ("str", "the CPUs it measured"),
        "lost_share": ("float64", "share of CPU time lost to detours"),
        "rate_per_s": ("float64", "detours per second"),
        "max_ns": ("float64", "longest detour, ns"),
        "p99_ns": ("float64", "99th percentile detour, ns"),
        "top_cause": ("str", "the cause that took most detour time (empty without attribution)"),
        "outlier": ("bool", "beyond the outlier rule"),
    },
    "steps": {
        "rank": ("int64", "MPI rank"),
        "step": ("int64", "step number"),
        "work_ns": ("int64", "the step's work, ns (longer than undisturbed by the detours in it)"),
        "wait_ns": ("int64", "its wait in the collective, ns"),
        "last": ("bool", "this rank arrived last at the collective"),
    },
    "latency": {
        "rank": ("int64", "MPI rank"),
        "host": ("str", "its host"),
        "operation": ("str", "probe[:variant]"),
        "count": ("int64", "operations timed"),
        "p50_ns": ("float64", "median latency, ns"),
        "p99_ns": ("float64", "99th percentile, ns"),
        "p99.9_ns": ("float64", "99.9th percentile, ns"),
        "max_ns": ("float64", "longest, ns"),
        "outlier": ("bool", "p99 beyond the outlier rule"),
    },
    "timerlat": {
        "rank": ("int64", "MPI rank"),
        "host": ("str", "its host"),
        "cpus": ("str", "the CPUs its threads woke on"),
        "wakeups": ("int64", "wake-ups of all its threads"),
        "missed": ("int64", "periods skipped by wake-ups later than a whole period"),
        "p50_ns": ("float64", "median thread latency, ns (every CPU's wake-ups pooled)"),
        "p99_ns": ("float64", "99th percentile, ns (missing where too few wake-ups tell it)"),
        "p99.9_ns": ("float64", "99.9th percentile, ns"),
        "max_ns": ("float64", "latest wake-up, ns"),
        "worst_cpu": ("Int64", "the CPU of the latest wake-up"),
        "worst_cause": ("str", "what held the latest wake-up back most (empty untraced)"),
        "top_cause": ("str", "what held its worst wake-ups back most, together (empty untraced)"),
        "outlier": ("bool", "p99 beyond the outlier rule"),
    },
    "scale": {
        "rank": ("int64", "MPI rank"),
        "host": ("str", "its host"),
        "probe": ("str", "probe[:variant]"),
        "mode": ("str", "process or thread"),
        "workers": ("int64", "workers on this rank"),
        "ops_per_s": ("float64", "this rank's operations per second, median over repetitions"),
        "per_worker": ("float64", "per worker"),
        "efficiency": ("float64", "per-worker rate relative to the fewest workers (1 there)"),
    },
}
# The frames each measure has, its main one first: a latency or scale run
# measures no noise share, so `ranks` would be empty (and was, as their main frame).
FRAMES_OF = {"noise": ("ranks",), "bsp": ("ranks", "steps"), "latency": ("latency",), "scale": ("scale",),
             "timerlat": ("timerlat",)}  # fmt: skip
__doc__ += describe(COLUMNS)


def frames(run, records: list[dict]) -> dict:
    from ..analysis.cluster import analyze

    s = analyze(run, records)
    ranks = [
        {
            "rank": r.rank,
            "host": r.host,
            "cpus": ",".join(map(str, r.cpus)),
            "lost_share": r.share,
            "rate_per_s": r.rate_per_s,
            "max_ns": r.max_ns,
            "p99_ns": r.p99_ns,
            "top_cause": r.causes[0][0] if r.causes else "",
            "outlier": r.outlier,
        }
        for r in s.ranks
    ]
    bsp = bsps(records)
    steps = []
    if bsp:
        k = min(len(b.work_ns) for b in bsp.values())
        # the last to arrive waits least (as the analysis tells it)
        last = [min(bsp, key=lambda r: bsp[r].wait_ns[i]) for i in range(k)]
        for rank, b in sorted(bsp.items()):
            steps += [
                {
                    "rank": rank,
                    "step": i,
                    "work_ns": b.work_ns[i],
                    "wait_ns": b.wait_ns[i],
                    "last": last[i] == rank,
                }
                for i in range(k)
            ]
    latency = [
        {"operation": op["operation"], **{k: r[k] for k in COLUMNS["latency"] if k in r}}
        for op in s.latency or []
        for r in op["ranks"]
    ]
    scale = [
        {
            "rank": r["rank"],
            "host": r["host"],
            "probe": c["probe"],
            "mode": c["mode"],
            "workers": n,
            "ops_per_s": r["ops_per_s"][i],
            "per_worker": r["per_worker"][i],
            "efficiency": float("nan") if r["efficiency"][i] is None else r["efficiency"][i],
        }
        for c in s.scale or []
        for r in c["ranks"]
        for i, n in enumerate(r["workers"])
    ]
    timerlat = [
        {**{k: r[k] for k in COLUMNS["timerlat"] if k in r}, "cpus": ",".join(map(str, r["cpus"])),
         "worst_cause": r["worst_cause"] or "", "top_cause": r["top_cause"] or ""}
        for r in s.timerlat or []
    ]  # fmt: skip
    built = {"ranks": ranks, "steps": steps, "latency": latency, "scale": scale, "timerlat": timerlat}
    return {name: table(run.id, built[name], COLUMNS[name]) for name in FRAMES_OF[s.measure]}
