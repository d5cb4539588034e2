"""The HTML section of `cluster` runs: the per-rank table and a figure of
the ranks side by side (drawn from the run's tidy frames, frames/cluster.py),
the outliers and node differences, and for `cluster bsp` the measured and
predicted slowdown."""

from __future__ import annotations

import altair as alt
import pandas as pd

from ...analysis.cluster import analyze
from ...format import ns as fmt_ns
from ...frames.cluster import frames
from ..cluster import latency_rows, outlier_lines, rows_lines, scale_rows, timerlat_rows
from .latency import NS_LABEL
from .page import Figure, Note, Section, Table

_OUTLIER = alt.Color("outlier:N", title="outlier", scale=alt.Scale(domain=[False, True], range=["#4c78a8", "#e45756"]))


def _figure(rd, measure: str) -> Figure | None:
    """The ranks side by side, from the frame the measure has: each rank's
    noise share, each operation's p99 per rank, or each rank's curve."""
    main = next(iter(frames(rd.run, rd.records).values()))
    if main.empty:
        return None
    rank_axis = alt.X("rank:O", title="rank")
    if measure in ("noise", "bsp"):
        chart = (
            alt.Chart(main)
            .mark_bar()
            .encode(
                rank_axis,
                alt.Y("lost_share:Q", title="CPU time lost to detours", axis=alt.Axis(format="%")),
                _OUTLIER,
                tooltip=["rank:O", "host:N", "cpus:N", alt.Tooltip("lost_share:Q", format=".3%"), "top_cause:N"],
            )
        )
        return Figure(f"cluster-noise-{rd.run.id}", f"{rd.short}: noise share per rank", chart.properties(width=420))
    if measure == "timerlat":
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
                _OUTLIER,
                tooltip=["rank:O", "host:N", "what:N", alt.Tooltip("ns:Q", format=",.0f")],
            )
        )
        return Figure(
            f"cluster-timerlat-{rd.run.id}", f"{rd.short}: wake-up latency per rank", chart.properties(width=420)
        )
    if measure == "latency":
        chart = (
            alt.Chart(main)
            .mark_point(filled=True, size=60)
            .encode(
                alt.X("operation:N", title=None),
                alt.XOffset("rank:O"),
                alt.Y("p99_ns:Q", title="p99 latency", scale=alt.Scale(type="log"), axis=alt.Axis(labelExpr=NS_LABEL)),
                _OUTLIER,
                tooltip=["rank:O", "host:N", "operation:N", "p99_ns:Q", "max_ns:Q"],
            )
        )
        return Figure(
            f"cluster-latency-{rd.run.id}", f"{rd.short}: p99 per operation and rank", chart.properties(width=420)
        )
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
    return Figure(
        f"cluster-scale-{rd.run.id}", f"{rd.short}: each rank's curve", chart.properties(width=420, height=200)
    )


def _bsp_figures(rd, b: dict) -> list[Figure]:
    """The step slowdowns, measured and predicted, as distributions (a step
    is as slow as its latest rank); and which rank arrived last how often,
    beside the steps a large delay hit it in."""
    out = []
    if qs := b.get("quantiles"):  # a run stored before they were kept has none
        rows = [{"slowdown": v, "quantile": q, "line": line}
                for line in ("measured", "predicted") for q, v in zip(qs["q"], qs[line])]  # fmt: skip
        chart = (
            alt.Chart(pd.DataFrame(rows))
            .mark_line(interpolate="step-after")
            .encode(
                alt.X("slowdown:Q", title="step time over the undisturbed step", scale=alt.Scale(zero=False)),
                alt.Y("quantile:Q", title="share of steps at most this slow", axis=alt.Axis(format="%")),
                alt.Color("line:N", title=None, legend=alt.Legend(orient="bottom")),
                tooltip=["line:N", alt.Tooltip("quantile:Q", format=".0%"), alt.Tooltip("slowdown:Q", format=".3f")],
            )
            .properties(width=420, height=240)
        )
        out.append(
            Figure(
                f"cluster-slowdown-{rd.run.id}",
                f"{rd.short}: slowdown per step, measured and predicted",
                chart,
                f"predicted: {b['model']}; measured over {b['steps']:,} steps",
            )
        )
    if late := b.get("late"):
        rows = [{"rank": r["rank"], "host": r["host"], "last": r["last_share"], "hit": r["steps_hit"],
                 "top cause": r["causes"][0][0] if r["causes"] else "–"} for r in late]  # fmt: skip
        share = alt.Y("last:Q", title="steps it arrived last in", axis=alt.Axis(format="%"),
                      scale=alt.Scale(domain=[0, 1]))  # fmt: skip
        tips = ["rank:O", "host:N", alt.Tooltip("last:Q", format=".1%"),
                alt.Tooltip("hit:Q", title="steps a large delay hit it in"), "top cause:N"]  # fmt: skip
        chart = (
            alt.Chart(pd.DataFrame(rows))
            .mark_bar()
            .encode(alt.X("rank:O", title="rank"), share, tooltip=tips)
            .properties(width=420, height=200)
        )
        out.append(
            Figure(
                f"cluster-arrival-{rd.run.id}",
                f"{rd.short}: arrival order at the {b['collective']}",
                chart,
                "the last to arrive waits least in the collective: told without comparing clocks across nodes",
            )
        )
    return out


def sections(runs) -> list[Section]:
    blocks = []
    for rd in runs:
        s = analyze(rd.run, rd.records)
        figure = _figure(rd, s.measure)
        if figure:
            blocks.append(figure)
        if s.latency is not None or s.scale is not None or s.timerlat is not None:
            if s.timerlat is not None:
                title = f"{rd.label}: cluster timerlat, thread latency per rank"
                blocks.append(Table(title, *timerlat_rows(s.timerlat), caption=f"outlier: {s.rule}"))
            for op in s.latency or []:
                blocks.append(
                    Table(
                        f"{rd.label}: cluster latency, {op['operation']}",
                        *latency_rows(op),
                        caption=f"outlier: {s.rule}",
                    )
                )
            for c in s.scale or []:
                title = f"{rd.label}: cluster scale, {c['probe']} ({c['mode']}), ops/s (efficiency)"
                blocks.append(Table(title, *scale_rows(c), caption=f"outlier: {s.rule}"))
            blocks += [Note(line, warning=True) for line in outlier_lines(s)]
            for fact, hosts in s.node_diff.items():
                blocks.append(Note(f"{fact} differs: " + "; ".join(f"{h}: {v}" for h, v in hosts.items())))
            continue
        blocks.append(
            Table(
                f"{rd.label}: cluster {s.measure}, {len(s.ranks)} ranks on {s.hosts} host(s)",
                ["rank", "host", "CPUs", "noise share", "detours/s", "p99", "max", "top causes", "outlier"],
                [
                    [
                        r.rank,
                        r.host,
                        ",".join(map(str, r.cpus)),
                        f"{100 * r.share:.3g} %",
                        f"{r.rate_per_s:.0f}",
                        fmt_ns(r.p99_ns),
                        fmt_ns(r.max_ns),
                        ", ".join(f"{c} {x:.0%}" for c, x in r.causes),
                        "outlier" if r.outlier else "",
                    ]
                    for r in s.ranks
                ],
                caption=f"outlier: {s.rule}",
            )
        )
        blocks += [Note(line, warning=True) for line in rows_lines(s)]
        for fact, hosts in s.node_diff.items():
            blocks.append(Note(f"{fact} differs: " + "; ".join(f"{h}: {v}" for h, v in hosts.items())))
        b = s.bsp
        if b and b.get("steps"):
            blocks += _bsp_figures(rd, b)
            m, p = b["measured"], b["predicted"]
            lo, hi = p["mean_interval"]
            blocks.append(
                Table(
                    f"{rd.short}: {b['compute_us']} µs of work then {b['collective']}, × {b['steps']} steps",
                    ["slowdown", "mean", "median", "p99", "max"],
                    [
                        ["measured", *(f"{m[k]:.3f}" for k in ("mean", "median", "p99", "max"))],
                        [
                            "predicted",
                            f"{p['mean']:.3f} [{lo:.3f}–{hi:.3f}]",
                            *(f"{p[k]:.3f}" for k in ("median", "p99", "max")),
                        ],
                    ],
                    caption=f"prediction off by {b['error']:+.1%}; model: {b['model']}",
                )
            )
    return [Section("Cluster", blocks)] if blocks else []
