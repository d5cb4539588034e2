"""The frames of a `cluster` run.

`ranks` (main): one row per rank of the job: its host, CPUs, noise share,
detour rate, longest and 99th-percentile detour, top cause, and whether it
is an outlier (the rule is in `show --json`). `steps` (cluster bsp): one
row per rank and measured step: its work time, its wait in the collective,
its detour time, and whether it was the last to arrive. Times are ns.
"""

from __future__ import annotations

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
}
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
    bsp = {r["rank"]: r for r in records if r.get("type") == "bsp"}
    steps = []
    if bsp:
        k = min(len(b["work_ns"]) for b in bsp.values())
        last = [max(bsp, key=lambda r: bsp[r]["work_ns"][i]) for i in range(k)]
        for rank, b in sorted(bsp.items()):
            steps += [
                {
                    "rank": rank,
                    "step": i,
                    "work_ns": b["work_ns"][i],
                    "wait_ns": b["wait_ns"][i],
                    "last": last[i] == rank,
                }
                for i in range(k)
            ]
    return {"ranks": table(run.id, ranks, COLUMNS["ranks"]), "steps": table(run.id, steps, COLUMNS["steps"])}
