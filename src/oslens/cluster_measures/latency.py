"""`cluster latency`: each operation's latency on every rank at once — per
operation, its percentiles on each rank (the single-node analysis of the
rank's own records), their spread across the ranks, and the ranks whose
p99 is an outlier."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from ..analysis import latency as latency_analysis
from ..analysis.cluster import flag, rule, too_few
from ..analysis.metrics import LOWER
from ..format import ns as fmt_ns
from . import RankTable

QS = ("p50", "p99", "p99.9")
FRAMES = ("latency",)
COLUMNS = {
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
}


def summarize(s, ranks: dict[int, list[dict]], records: list[dict]) -> None:
    too_few(s, len(ranks))
    per_op: dict[str, list[dict]] = defaultdict(list)
    for rank, recs in ranks.items():
        for op in latency_analysis.summarize(recs).ops:
            per_op[op.name].append(
                {
                    "rank": rank,
                    "host": s.hosts[rank],
                    "count": op.hist.count,
                    "workers": op.workers,
                    **{f"{q}_ns": op.q(q) for q in QS},
                    "max_ns": op.hist.max_ns,
                    "warnings": op.warnings,
                }
            )
    s.data = []
    for name, rows in per_op.items():
        flag([r for r in rows if r["count"]], "p99_ns", "threshold_ns")
        for r in rows:
            r.setdefault("outlier", False)
            r.setdefault("threshold_ns", None)
        timed = [r for r in rows if r["count"]]
        across = {
            f"{q}_ns": [float(np.min(v)), float(np.median(v)), float(np.max(v))]
            for q in QS
            # a rank whose sample cannot tell the percentile (histogram.TAIL_RULE: NaN) has none to compare
            if (v := [r[f"{q}_ns"] for r in timed if r[f"{q}_ns"] == r[f"{q}_ns"]])
        }
        s.data.append({"operation": name, "ranks": rows, "across": across})
    s.rule = rule("p99")


def tables(s, every: bool = True) -> list[RankTable]:
    """Per operation: its percentiles on each rank (or, with every=False and
    many ranks, on the outliers), then across ranks."""
    from ..report.cluster import shown

    out = []
    cols = ["rank", "host", "workers", "timed", "p50", "p99", "p99.9", "max", ""]
    for op in s.data or []:
        rows = [
            [str(r["rank"]), r["host"], str(r["workers"]), str(r["count"]),
             *(fmt_ns(r[f"{q}_ns"]) if r["count"] else "-" for q in (*QS, "max")), "outlier" if r["outlier"] else ""]
            for r in shown(op["ranks"], every)
        ]  # fmt: skip
        a = op["across"]
        for i, what in enumerate(("min", "median", "max")):
            cells = (fmt_ns(a[f"{q}_ns"][i]) if a.get(f"{q}_ns") else "-" for q in QS)
            rows.append([f"{what} of ranks", "", "", "", *cells, "", ""])
        out.append(RankTable(f"cluster latency: {op['operation']}", cols, rows))
    return out


def lines(s) -> list[str]:
    return [
        f"{op['operation']}: rank {r['rank']} on {r['host']} is an outlier, "
        f"p99 {fmt_ns(r['p99_ns'])} above the threshold of {fmt_ns(r['threshold_ns'])}"
        for op in s.data or []
        for r in op["ranks"]
        if r["outlier"]
    ]


def frame_rows(s, records: list[dict]) -> dict[str, list[dict]]:
    return {
        "latency": [
            {"operation": op["operation"], **{k: r[k] for k in COLUMNS["latency"] if k in r}}
            for op in s.data or []
            for r in op["ranks"]
        ]
    }


def figures(rd, s, frames: dict) -> list:
    """Each operation's p99 on each rank, side by side."""
    import altair as alt

    from ..report.html.cluster import OUTLIER
    from ..report.html.latency import NS_LABEL
    from ..report.html.page import Figure

    main = frames["latency"]
    if main.empty:
        return []
    chart = (
        alt.Chart(main)
        .mark_point(filled=True, size=60)
        .encode(
            alt.X("operation:N", title=None),
            alt.XOffset("rank:O"),
            alt.Y("p99_ns:Q", title="p99 latency", scale=alt.Scale(type="log"), axis=alt.Axis(labelExpr=NS_LABEL)),
            OUTLIER,
            tooltip=["rank:O", "host:N", "operation:N", "p99_ns:Q", "max_ns:Q"],
        )
    )
    title = f"{rd.short}: p99 per operation and rank"
    return [Figure(f"cluster-latency-{rd.run.id}", title, chart.properties(width=420))]


def metrics(s, out) -> None:
    for op in s.data or []:
        for r in op["ranks"]:
            if r["count"]:
                name = f"cluster/{op['operation']}/rank {r['rank']}/p99"
                out.add(name, [r["p99_ns"]], "ns", LOWER, "", f"{op['operation']} p99 on rank {r['rank']}")
