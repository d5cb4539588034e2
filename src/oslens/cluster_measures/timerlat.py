"""`cluster timerlat`: timer wake-up latency on every CPU of every rank at
once — per rank, its threads' wake-ups pooled (every CPU's histogram), the
worst one and what held it back (its trace), and the ranks whose p99 is an
outlier; an outlier's worst cause is what to read first (a thread on its
CPU alone shows there, not in the other ranks' rows)."""

from __future__ import annotations

import numpy as np

from ..analysis import timerlat as timerlat_analysis
from ..analysis.cluster import flag, rule, too_few
from ..analysis.histogram import Histogram, merge_all
from ..analysis.metrics import LOWER
from ..format import ns as fmt_ns
from ..records import timerlat_records
from . import RankTable

FRAMES = ("timerlat",)
COLUMNS = {
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
}


def summarize(s, ranks: dict[int, list[dict]], records: list[dict]) -> None:
    too_few(s, len(ranks))
    rows = []
    for rank, recs in sorted(ranks.items()):
        mine = timerlat_records(recs)
        if not mine:
            continue
        t = timerlat_analysis.summarize(recs)
        pooled = merge_all(Histogram.from_record(r["thread"]) for r in mine)
        told = pooled.told_percentiles(timerlat_analysis.QS)
        worst = t.worst[0] if t.worst else None
        rows.append(
            {
                "rank": rank,
                "host": s.hosts[rank],
                "cpus": [c.cpu for c in t.cpus],
                "wakeups": pooled.count,
                "missed": sum(c.missed for c in t.cpus),
                "policy": sorted({c.policy for c in t.cpus}),
                **{f"p{q:g}_ns": float(v) for q, v in zip(timerlat_analysis.QS, told)},
                "max_ns": float(pooled.max_ns),
                "worst_cpu": worst.cpu if worst else None,
                "worst_cause": worst.cause if worst and worst.causes else None,
                # what held its worst wake-ups back most, together (one stall of the vCPU may be the
                # latest of them; a cause that holds many back leads here)
                "top_cause": next(iter(t.causes), None),
                "attribution": t.attribution,
            }
        )
    flag([r for r in rows if r["wakeups"]], "p99_ns", "threshold_ns")
    for r in rows:
        r.setdefault("outlier", False)
        r.setdefault("threshold_ns", None)
    s.data, s.rule = rows, rule("p99 of the thread latency")


def tables(s, every: bool = True) -> list[RankTable]:
    """Each rank's threads' wake-up latency (every CPU's pooled), the worst
    one's CPU and what held it back; or, with every=False and many ranks,
    the outliers."""
    from ..report.cluster import shown

    cols = ["rank", "host", "CPUs", "wake-ups", "missed", "p50", "p99", "p99.9", "max", "worst: CPU, held by", ""]
    rows = []
    for r in shown(s.data or [], every):
        held = r["worst_cause"] or ("" if r["attribution"] == "bpf" else f"not traced ({r['attribution']})")
        worst = f"{r['worst_cpu']}" + (f", {held}" if held else "") if r["worst_cpu"] is not None else "-"
        rows.append([str(r["rank"]), r["host"], ",".join(map(str, r["cpus"])), f"{r['wakeups']:,}", f"{r['missed']:,}",
                     *(fmt_ns(r[f"{q}_ns"]) for q in ("p50", "p99", "p99.9", "max")), worst,
                     "outlier" if r["outlier"] else ""])  # fmt: skip
    left = {"host", "CPUs", "worst: CPU, held by", ""}
    return [RankTable("cluster timerlat: thread latency per rank", cols, rows, left=left)]


def lines(s) -> list[str]:
    return [
        f"timerlat: rank {r['rank']} on {r['host']} is an outlier, p99 {fmt_ns(r['p99_ns'])} above the "
        f"threshold of {fmt_ns(r['threshold_ns'])}; its worst wake-up {fmt_ns(r['max_ns'])} on CPU "
        f"{r['worst_cpu']}" + (f", held by {r['worst_cause']}" if r["worst_cause"] else "")
        for r in s.data or []
        if r["outlier"]
    ]


def frame_rows(s, records: list[dict]) -> dict[str, list[dict]]:
    return {
        "timerlat": [
            {**{k: r[k] for k in COLUMNS["timerlat"] if k in r}, "cpus": ",".join(map(str, r["cpus"])),
             "worst_cause": r["worst_cause"] or "", "top_cause": r["top_cause"] or ""}
            for r in s.data or []
        ]
    }  # fmt: skip


def figures(rd, s, frames: dict) -> list:
    """Each rank's p99 and latest wake-up, on a log scale."""
    import altair as alt

    from ..report.html.cluster import OUTLIER
    from ..report.html.latency import NS_LABEL
    from ..report.html.page import Figure

    main = frames["timerlat"]
    if main.empty:
        return []
    long = main.melt(id_vars=["rank", "host", "outlier"], value_vars=["p99_ns", "max_ns"], var_name="what",
                     value_name="ns").dropna()  # fmt: skip
    long = long[long["ns"] > 0]  # a log scale has no place for 0
    chart = (
        alt.Chart(long)
        .mark_point(filled=True, size=60)
        .encode(
            alt.X("rank:O", title="rank"),
            alt.Y("ns:Q", title="thread latency", scale=alt.Scale(type="log"), axis=alt.Axis(labelExpr=NS_LABEL)),
            alt.Shape("what:N", title=None, legend=alt.Legend(orient="bottom")),
            OUTLIER,
            tooltip=["rank:O", "host:N", "what:N", alt.Tooltip("ns:Q", format=",.0f")],
        )
    )
    title = f"{rd.short}: wake-up latency per rank"
    return [Figure(f"cluster-timerlat-{rd.run.id}", title, chart.properties(width=420))]


def metrics(s, out) -> None:
    for r in s.data or []:
        if np.isfinite(r["p99_ns"]):
            name = f"cluster/timerlat/rank {r['rank']}/p99"
            out.add(name, [r["p99_ns"]], "ns", LOWER, "", f"thread latency p99 on rank {r['rank']}")
