"""`cluster scale`: each primitive's scaling with cores on every rank at
once — per probe, a curve per rank (the single-node analysis of the rank's
own records), the whole job's throughput (its ranks ran at once), and the
ranks whose per-worker rate at the most workers is an outlier below the
others."""

from __future__ import annotations

from collections import defaultdict

from ..analysis import scale as scale_analysis
from ..analysis.cluster import flag, rule, too_few
from ..analysis.metrics import HIGHER
from ..format import si
from . import RankTable

FRAMES = ("scale",)
COLUMNS = {
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


def summarize(s, ranks: dict[int, list[dict]], records: list[dict]) -> None:
    too_few(s, len(ranks))
    curves: dict[tuple, list[dict]] = defaultdict(list)
    for rank, recs in ranks.items():
        for series in scale_analysis.summarize(recs):
            curves[(series.probe, series.variant, series.mode)].append(
                {
                    "rank": rank,
                    "host": s.hosts[rank],
                    "workers": [p.workers for p in series.points],
                    "ops_per_s": [p.total.median for p in series.points],
                    "per_worker": [p.per_worker.median for p in series.points],
                    "efficiency": [p.efficiency for p in series.points],
                    "warnings": sorted({w for p in series.points for w in p.warnings}),
                }
            )
    s.data = []
    for (probe, variant, mode), rows in curves.items():
        counts = sorted(set.intersection(*(set(r["workers"]) for r in rows))) if rows else []
        job = [float(sum(r["ops_per_s"][r["workers"].index(n)] for r in rows)) for n in counts]  # the ranks ran at once
        for r in rows:
            r["last_per_worker"] = r["per_worker"][-1] if r["per_worker"] else None
        flag(rows, "last_per_worker", lower_is_worse=True)  # threshold: the per-worker rate below which
        for r in rows:
            del r["last_per_worker"]
        name = probe if variant == "default" else f"{probe}:{variant}"
        s.data.append({"probe": name, "mode": mode, "workers": counts, "job_ops_per_s": job, "ranks": rows})
    s.rule = rule("per-worker rate at the most workers", above=False)


def tables(s, every: bool = True) -> list[RankTable]:
    """Per probe: ops/s and efficiency at each worker count per rank, and the
    whole job's ops/s."""
    from ..report.cluster import shown

    out = []
    for c in s.data or []:
        counts = c["workers"]
        rows = []
        for r in shown(c["ranks"], every):
            cells = []
            for n in counts:
                i = r["workers"].index(n)
                eff = r["efficiency"][i]
                cells.append(si(r["ops_per_s"][i]) + ("" if eff is None else f" ({eff:.0%})"))
            rows.append([str(r["rank"]), r["host"], *cells, "outlier" if r["outlier"] else ""])
        rows.append(["job", f"{len(c['ranks'])} ranks", *(si(x) for x in c["job_ops_per_s"]), ""])
        cols = ["rank", "host", *(f"{n} workers" for n in counts), ""]
        out.append(RankTable(f"cluster scale: {c['probe']} ({c['mode']}), ops/s (efficiency)", cols, rows))
    return out


def lines(s) -> list[str]:
    return [
        f"{c['probe']}: rank {r['rank']} on {r['host']} scales worse than the others, "
        f"{si(r['per_worker'][-1])} ops/s per worker at {r['workers'][-1]} workers, "
        f"below the threshold of {si(r['threshold'])}"
        for c in s.data or []
        for r in c["ranks"]
        if r["outlier"]
    ]


def frame_rows(s, records: list[dict]) -> dict[str, list[dict]]:
    return {
        "scale": [
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
            for c in s.data or []
            for r in c["ranks"]
            for i, n in enumerate(r["workers"])
        ]
    }


def figures(rd, s, frames: dict) -> list:
    """Each rank's curve, a row of them per probe."""
    import altair as alt

    from ..report.html.page import Figure

    main = frames["scale"]
    if main.empty:
        return []
    chart = (
        alt.Chart(main)
        .mark_line(point=True)
        .encode(
            alt.X("workers:Q", title="workers", axis=alt.Axis(values=sorted(set(main["workers"])), format="d")),
            alt.Y("ops_per_s:Q", title="operations/s"),
            alt.Color("rank:N", title="rank"),
            alt.Row("probe:N", title=None),
            tooltip=["rank:N", "host:N", "probe:N", "workers:Q", alt.Tooltip("ops_per_s:Q", format=",.0f")],
        )
    )
    title = f"{rd.short}: each rank's curve"
    return [Figure(f"cluster-scale-{rd.run.id}", title, chart.properties(width=420, height=200))]


def metrics(s, out) -> None:
    for c in s.data or []:
        for n, x in zip(c["workers"], c["job_ops_per_s"]):
            name = f"cluster/{c['probe']} {c['mode']}/job ops/s at {n} per rank"
            out.add(name, [x], "ops/s", HIGHER, "", f"{c['probe']}: the job's throughput, {n} workers per rank")
