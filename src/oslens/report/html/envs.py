"""`envs` runs: per operation, each environment's p50, p99 and p99.9 side
by side on a log axis (the tail is where environments differ), and the
table of figures with their ratios to native and whether the rounds tell
them apart."""

from __future__ import annotations

import altair as alt
import pandas as pd

from ...analysis.envs import FIGURES, NATIVE, QUANTILES, summarize
from ..envs import UNTESTED, UNTESTED_MEANS, UNTOLD, figure_text, made_line, no_ratio_reasons, ratio_cell, untold_line
from .latency import NS_LABEL
from .page import Figure, Note, Section, Table

TITLE = "The same operations in each environment (envs)"


def sections(runs) -> list[Section]:
    blocks: list = []
    for rd in runs:
        s = summarize(rd.run.params, rd.records)
        rows, points, zero, reasons, untold = [], [], [], [], None
        for op, envs in s.operations.items():
            reasons += [f"{op}: {line}" for line in no_ratio_reasons(envs)]
            untold = untold or untold_line(envs)
            for e in envs:
                row = [op, e.env, e.rounds]
                for f in FIGURES:
                    row += [
                        figure_text(f, e.figures[f]),
                        ratio_cell(e.vs_native.get(f)).plain if e.env != NATIVE else "",
                    ]
                rows.append(row)
                for q, _ in QUANTILES:
                    if e.figures[q] is None:
                        continue  # too few operations tell it: not drawn, as not printed
                    if e.figures[q] > 0:
                        points.append({"operation": op, "environment": e.env, "percentile": q, "ns": e.figures[q]})
                    else:  # below the clock's resolution: no place on a log axis
                        zero.append(f"{op} {e.env} {q}")
        if not rows:
            blocks.append(Note(f"{rd.short}: no complete round", warning=True))
            continue
        blocks.append(
            Table(
                f"{rd.short}: per operation and environment",
                ["operation", "environment", "rounds", *(h for f in FIGURES for h in (f, "vs native"))],
                rows,
                f"vs native: ratio to native's figure; {UNTOLD}: the rounds cannot tell it from native (Mann-Whitney, "
                f"false discovery rate 5 %); {UNTESTED}: {UNTESTED_MEANS}",
            )  # fmt: skip
        )
        blocks += [Note(line, warning=True) for line in reasons] + ([Note(untold)] if untold else [])
        if points:
            blocks.append(
                Figure(
                    f"envs-{rd.run.id}",
                    f"{rd.short}: percentiles per environment",
                    _chart(pd.DataFrame(points), s.envs),
                    "each point: a percentile of every round's operations pooled, on a log axis"
                    + (f"; 0 ns, not drawn on the log scale: {', '.join(zero)}" if zero else ""),
                )
            )
        else:
            blocks.append(Note(f"{rd.short}: every percentile is 0 ns (below the clock's resolution)", warning=True))
        for label in s.envs:
            env = s.environments.get(label, {})
            blocks.append(Note(made_line(label, env), warning=bool(env.get("note"))))
        blocks += [Note(w, warning=True) for w in s.warnings]
    return [Section(TITLE, blocks)]


def _chart(points: pd.DataFrame, envs: list[str]) -> alt.FacetChart:
    return (
        alt.Chart(points)
        # a bar on a log axis starts at 0, which the axis has not: Vega drew none
        .mark_point(filled=True, size=60)
        .encode(
            alt.X("percentile:N", title=None, sort=[q for q, _ in QUANTILES]),
            alt.XOffset("environment:N", sort=envs),
            alt.Y("ns:Q", title="latency", scale=alt.Scale(type="log"), axis=alt.Axis(labelExpr=NS_LABEL)),
            alt.Color("environment:N", sort=envs, legend=alt.Legend(orient="bottom")),
            tooltip=["operation:N", "environment:N", "percentile:N", alt.Tooltip("ns:Q", format=",.0f")],
        )
        .properties(width=220, height=200)
        .facet(alt.Facet("operation:N", title=None), columns=4)
    )
