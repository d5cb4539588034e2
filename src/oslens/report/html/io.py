"""`io` runs: IOPS against submitting CPUs with the ideal line, each I/O's
latency percentiles per point, CPU time per I/O stacked by kind, and a
heatmap of where the I/Os completed."""

from __future__ import annotations

import altair as alt
import pandas as pd

from ...analysis.io import CPU_KINDS, QUANTILES, analyze
from ...format import ns, pct, si
from ..io import efficiency_cell, target_line
from .latency import NS_LABEL
from .page import Figure, Note, Section, Table

TITLE = "Block I/O as submitting CPUs grow (io)"


def sections(runs) -> list[Section]:
    blocks: list = []
    for rd in runs:
        s = analyze(rd.run, rd.records)
        blocks.append(Note(f"{rd.short}: target {target_line(s.target)}"))
        if not s.series:
            blocks.append(Note(f"{rd.short}: no complete point", warning=True))
            continue
        rows, curve, lat, cpu, heat, zero = [], [], [], [], [], []
        for se in s.series:
            base = se.points[0]
            for p in se.points:
                rows.append(
                    [
                        se.label,
                        p.workers,
                        si(p.median_iops),
                        si(p.per_cpu),
                        efficiency_cell(p),
                        *(ns(p.latency[q]) if q in p.latency else "–" for q in QUANTILES),
                        pct(p.completions.local_share) if p.completions else "–",
                    ]
                )
                if p.median_iops is not None:
                    curve.append({"series": se.label, "CPUs": p.workers, "IOPS": p.median_iops, "line": "measured"})
                if base.per_cpu is not None:
                    curve.append({"series": se.label, "CPUs": p.workers, "IOPS": base.per_cpu * p.workers,
                                  "line": "ideal"})  # fmt: skip
                # a log scale has no place for 0 (a percentile below the clock's resolution): said, not drawn
                for q, v in p.latency.items():
                    if v > 0:
                        lat.append({"point": f"{se.label} ×{p.workers}", "percentile": q, "ns": v})
                    else:
                        zero.append(f"{se.label} ×{p.workers} {q}")
                cpu += [
                    {"point": f"{se.label} ×{p.workers}", "kind": k, "us": v}
                    for k, v in (p.cpu_us_per_io or {}).items()
                    if v is not None
                ]
                if p.completions:
                    heat += [
                        {"point": f"{se.label} ×{p.workers}", "CPU": cpu_, "completed": n}
                        for cpu_, n in p.completions.completed.items()
                    ]
        blocks.append(
            Table(
                f"{rd.short}: per series and submitting CPUs",
                ["series", "CPUs", "IOPS", "per CPU", "vs ideal", *QUANTILES, "completed locally"],
                rows,
                "IOPS: median of the repetitions; vs ideal: IOPS per CPU over the fewest CPUs'",
            )
        )
        if curve:
            chart = (
                alt.Chart(pd.DataFrame(curve))
                .mark_line(point=True)
                .encode(
                    alt.X(  # ticks at the counts measured: a CPU count has no fraction
                        "CPUs:Q",
                        title="submitting CPUs",
                        axis=alt.Axis(values=sorted({c["CPUs"] for c in curve}), format="d"),
                    ),
                    alt.Y("IOPS:Q", title="IOPS"),
                    alt.Color("series:N", legend=alt.Legend(orient="bottom")),
                    alt.StrokeDash("line:N", title=None),
                    tooltip=["series:N", "CPUs:Q", "line:N", alt.Tooltip("IOPS:Q", format=",.0f")],
                )
                .properties(width=420, height=260)
            )
            blocks.append(
                Figure(
                    f"io-iops-{rd.run.id}",
                    f"{rd.short}: IOPS and the ideal line",
                    chart,
                    "dashed: the fewest CPUs' IOPS per CPU times the CPUs",
                )
            )
        if lat:
            chart = (
                alt.Chart(pd.DataFrame(lat))
                .mark_point(filled=True, size=60)  # a bar on a log scale would start at 0, which it has not
                .encode(
                    alt.X("percentile:N", title=None, sort=list(QUANTILES)),
                    alt.XOffset("point:N"),
                    alt.Y(
                        "ns:Q", title="latency per I/O", scale=alt.Scale(type="log"), axis=alt.Axis(labelExpr=NS_LABEL)
                    ),
                    alt.Color("point:N", legend=alt.Legend(orient="bottom", columns=4)),
                    tooltip=["point:N", "percentile:N", alt.Tooltip("ns:Q", format=",.0f")],
                )
                .properties(width=420, height=220)
            )
            blocks.append(
                Figure(
                    f"io-lat-{rd.run.id}",
                    f"{rd.short}: latency tails per point",
                    chart,
                    "from submission to the reap that found it done, every I/O of every repetition"
                    + (f"; 0 ns, not drawn on the log scale: {', '.join(zero)}" if zero else ""),
                )
            )
        elif zero:
            blocks.append(
                Note(f"{rd.short}: latency per I/O of 0 ns (below the clock's resolution): {', '.join(zero)}")
            )
        if cpu:
            chart = (
                alt.Chart(pd.DataFrame(cpu))
                .mark_bar()
                .encode(
                    alt.X("point:N", title=None, sort=None),
                    alt.Y("us:Q", title="CPU µs per I/O", stack="zero"),
                    alt.Color("kind:N", sort=list(CPU_KINDS), legend=alt.Legend(orient="bottom")),
                    tooltip=["point:N", "kind:N", alt.Tooltip("us:Q", format=".2f")],
                )
                .properties(width=420, height=220)
            )
            blocks.append(
                Figure(
                    f"io-cpu-{rd.run.id}",
                    f"{rd.short}: CPU time per I/O by kind",
                    chart,
                    "every CPU's time in /proc/stat over the window, whoever ran it, per I/O"
                    + (f"; irq {s.irq_unavailable}" if s.irq_unavailable else ""),
                )
            )
        if heat:
            chart = (
                alt.Chart(pd.DataFrame(heat))
                .mark_rect()
                .encode(
                    alt.X("CPU:O", title="CPU that completed the I/O"),
                    alt.Y("point:N", title=None, sort=None),
                    alt.Color("completed:Q", title="I/Os", scale=alt.Scale(scheme="blues")),
                    tooltip=["point:N", "CPU:O", alt.Tooltip("completed:Q", format=",")],
                )
                .properties(width=420)
            )
            blocks.append(
                Figure(
                    f"io-comp-{rd.run.id}",
                    f"{rd.short}: where the I/Os completed",
                    chart,
                    "per point, I/Os completed on each CPU (BPF: each I/O from submission to completion)",
                )
            )
        blocks += _rate_and_notes(rd, s)
    return [Section(TITLE, blocks)]


def _rate_and_notes(rd, s) -> list:
    """The cost against the rate, where the run paced a series at several,
    and what the run said of its points."""
    out: list = []
    if cost := s.cost_against_rate():
        out.append(_cost_against_rate(rd, cost, s.irq_unavailable))
    whys = {p.completions_unavailable for se in s.series for p in se.points if p.completions_unavailable}
    out += [Note(f"completions not followed: {w}", warning=True) for w in whys]
    out += [
        Note(f"{se.label} ×{p.workers}: {w}", warning=True) for se in s.series for p in se.points for w in p.warnings
    ]
    return out


def _cost_against_rate(rd, cost: list[dict], irq_unavailable: str | None) -> Figure:
    """CPU µs per I/O against the IOPS each CPU held, a line per engine (and
    worker count) paced to several rates: where polling or batching pays."""
    rows = [c | {"line": f"{c['family']} ×{c['workers']}"} for c in cost]
    chart = (
        alt.Chart(pd.DataFrame(rows))
        .mark_line(point=True)
        .encode(
            alt.X("iops_per_cpu:Q", title="IOPS per submitting CPU, as held"),
            alt.Y("cpu_us_per_io:Q", title="CPU µs per I/O"),
            alt.Color("line:N", legend=alt.Legend(orient="bottom", columns=2)),
            alt.StrokeDash("measure:N", title=None),
            alt.Detail("measure:N"),  # a line per measure, not one zig-zagging between the two
            tooltip=[
                "line:N",
                "measure:N",
                alt.Tooltip("rate:Q", format=","),
                alt.Tooltip("iops_per_cpu:Q", format=",.0f"),
                alt.Tooltip("cpu_us_per_io:Q", format=".2f"),
            ],
        )  # fmt: skip
        .properties(width=420, height=240)
    )
    return Figure(
        f"io-rate-{rd.run.id}",
        f"{rd.short}: CPU time per I/O against the I/O rate",
        chart,
        "each point a --rate, at the IOPS each worker held; every CPU's: /proc/stat over the window per I/O "
        "(completion work in interrupts and kernel threads, and anything else that ran); the workers' own: "
        "their rusage per I/O (what fio's usr_cpu and sys_cpu say)"
        + (f"; irq {irq_unavailable}" if irq_unavailable else ""),
    )
