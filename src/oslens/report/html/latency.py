"""`latency` runs: per operation the percentiles of its merged histogram,
measured alone and with competition side by side; its CDF and its tail
(the share of operations slower than x) on log axes, drawn from the
histogram's buckets; the variability buckets of the kernel-variability
study; and the timing floor (the null probe), which every number includes."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from ...analysis.histogram import TAIL_RULE, Histogram
from ...analysis.latency import ALONE, BUCKETS, LatencySummary, OpLatency, summarize
from ...format import ns, pct, quotient
from ..latency import FLOOR_RATIO
from .page import Figure, Note, Section, Table

PERCENTILES = ("p50", "p90", "p99", "p99.9")
TITLE = "Latency per operation (latency)"

# Vega expression: an axis value in ns written with the unit that suits it,
# since one axis spans an empty call (tens of ns) to a page fault's tail (ms).
NS_LABEL = (
    "datum.value >= 1e9 ? format(datum.value / 1e9, '~g') + ' s' : "
    "datum.value >= 1e6 ? format(datum.value / 1e6, '~g') + ' ms' : "
    "datum.value >= 1e3 ? format(datum.value / 1e3, '~g') + ' µs' : format(datum.value, '~g') + ' ns'"
)


def _thin(x: np.ndarray, y: np.ndarray, dx: float, dy: float) -> np.ndarray:
    """Indices of the points to draw: each moves at least dx in log10(x) or
    dy in y from the last one kept (about a pixel at the panel's size), and
    the ends are kept. Thousands of sub-buckets per line otherwise swell the
    page."""
    keep, lx = [0], np.log10(x)
    for i in range(1, len(x) - 1):
        j = keep[-1]
        if abs(lx[i] - lx[j]) >= dx or abs(y[i] - y[j]) >= dy:
            keep.append(i)
    if len(x) > 1:
        keep.append(len(x) - 1)
    return np.array(keep)


def _distribution(h: Histogram) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The histogram as a distribution: at each non-empty bucket's upper
    edge the share of operations at or below it (the CDF), and at its lower
    edge the share at or above it (the tail), both edges clamped to the exact
    min and max so the curves start and end at values really measured."""
    lower, width = h.bounds()
    cum = np.cumsum(h.counts)
    # (min, 0) first: the CDF rises from the fastest operation measured.
    cx = np.concatenate([[h.min_ns], np.clip(lower + width - 1, h.min, h.max) * h.unit_ns])
    cy = np.concatenate([[0.0], cum / h.count])
    # The last bucket's lower edge is within a bucket width (under 1 %) of
    # the max; the tail ends at the max at the share of operations in that
    # bucket.
    tx = np.concatenate([np.clip(lower, h.min, h.max) * h.unit_ns, [h.max_ns]])
    ty = np.concatenate([(h.count - cum + h.counts) / h.count, [h.counts[-1] / h.count]])
    ci, ti = _thin(cx, cy, 0.02, 0.003), _thin(tx, np.log10(ty), 0.01, 0.02)
    return (
        pd.DataFrame({"latency_ns": cx[ci].round(1), "share": cy[ci].round(5)}),
        pd.DataFrame({"latency_ns": tx[ti].round(1), "share": ty[ti]}),
    )


def _curves(runs_summaries) -> tuple[pd.DataFrame, pd.DataFrame]:
    cdfs, tails = [], []
    for short, s in runs_summaries:
        for op in s.ops:
            if not op.hist.count:
                continue
            for f, out in zip(_distribution(op.hist), (cdfs, tails)):
                f["run"], f["operation"], f["phase"] = short, op.name, op.phase
                out.append(f)
    return pd.concat(cdfs, ignore_index=True), pd.concat(tails, ignore_index=True)


def _ticks(lo: float, hi: float) -> list[float]:
    """Axis ticks at powers of ten, and at 2× and 5× too when the range spans
    under two decades: a log axis left to itself labels 2, 3, … 9 times each
    decade, crowds, and thins into odd values (9 µs, 80 µs)."""
    a, b = int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi)))
    steps = (1, 2, 5) if np.log10(hi / lo) < 2 else (1,)
    return [m * 10.0**k for k in range(a, b + 1) for m in steps if lo <= m * 10.0**k <= hi]


def _distribution_charts(cdfs: pd.DataFrame, tails: pd.DataFrame, floors: pd.DataFrame, phases: list[str]):
    """One panel per operation, each with its own latency range; colour is
    the phase (alone or with which competitor), dash the run."""
    colour = alt.Color(
        "phase:N",
        title="measured",
        scale=alt.Scale(domain=phases),
        legend=alt.Legend(orient="bottom", direction="vertical", labelLimit=400),
    )
    dash = alt.StrokeDash("run:N", title="run", legend=alt.Legend(orient="bottom"))
    tip = ["run:N", "operation:N", "phase:N", alt.Tooltip("latency_ns:Q", title="latency ns", format=".4~s")]

    def panel(data: pd.DataFrame, name: str, y: alt.Y, interpolate: str, share_tip: str) -> alt.LayerChart:
        lo, hi = data.latency_ns.min(), data.latency_ns.max()
        x = alt.X(
            "latency_ns:Q",
            title="latency",
            scale=alt.Scale(type="log", domain=[lo, hi], nice=False),
            axis=alt.Axis(values=_ticks(lo, hi), labelExpr=NS_LABEL),
        )
        layers = [
            alt.Chart(data)
            .mark_line(interpolate=interpolate, strokeWidth=1.5)
            .encode(x, y, colour, dash, tooltip=tip + [alt.Tooltip("share:Q", title=share_tip, format=".4~%")])
        ]
        # The timing floor, where it falls inside this operation's range: left
        # of it the figure is the clock, not the kernel.
        f = floors[(floors.floor_ns >= lo) & (floors.floor_ns <= hi)]
        if not f.empty:
            layers.append(
                alt.Chart(f)
                .mark_rule(color="gray", strokeDash=[2, 2])
                .encode(alt.X("floor_ns:Q"), tooltip=["run:N", alt.Tooltip("floor_ns:Q", title="timing floor p50 ns")])
            )
        return alt.layer(*layers).properties(title=name, width=300, height=220)

    cdf_y = alt.Y("share:Q", title="share of operations ≤ latency", axis=alt.Axis(format="%"))
    cdf = [
        panel(cdfs[cdfs.operation == name], name, cdf_y, "step-after", "share ≤") for name in cdfs.operation.unique()
    ]
    tail_panels = []
    for name in tails.operation.unique():
        t = tails[tails.operation == name]
        bottom = 10.0 ** np.floor(np.log10(t.share.min()))
        tail_y = alt.Y(
            "share:Q",
            title="share of operations ≥ latency",
            scale=alt.Scale(type="log", domain=[bottom, 1], nice=False),
            axis=alt.Axis(values=_ticks(bottom, 1), format="~%"),
        )
        tail_panels.append(panel(t, name, tail_y, "step-before", "share ≥"))
    return alt.concat(*cdf, columns=3), alt.concat(*tail_panels, columns=3)


def _percentile_table(runs_summaries) -> tuple[Table, list[str]]:
    """One row per operation, run and phase, each operation's rows together:
    alone, then with each competitor, so competition's effect reads down
    the rows and in the ×alone columns; the runs of a comparison interleave."""
    columns = ["operation", "run", "measured", "n", *PERCENTILES, "max", "p99/p50", "p50 ×alone", "p99 ×alone", "notes"]
    notes: list[str] = []
    by_op: dict[str, list] = {}
    for short, s in runs_summaries:
        alone = {o.name: o for o in s.ops if o.phase == ALONE}
        for op in sorted(s.ops, key=lambda o: s.phases.index(o.phase)):
            base = alone.get(op.name)
            vs = [quotient(op.q(q), base.q(q)) if base and op is not base else "–" for q in ("p50", "p99")]
            marks = []
            for m in _warnings(op, s.floor.get(op.phase)):
                if m not in notes:
                    notes.append(m)
                marks.append(str(notes.index(m) + 1))
            by_op.setdefault(op.name, []).append(
                [
                    op.name,
                    short,
                    op.phase,
                    f"{op.hist.count:,}",
                    *[ns(op.q(q)) for q in PERCENTILES],
                    ns(op.max_ns),
                    quotient(op.q("p99"), op.q("p50")),
                    *vs,
                    ",".join(marks),
                ]
            )
    rows = [r for name in by_op for r in by_op[name]]
    return Table(
        "percentiles per operation",
        columns,
        rows,
        "merged over workers and repetitions; ×alone: the percentile with competition over the same "
        f"percentile alone, in the same run; – where the sample cannot tell it: {TAIL_RULE}",
    ), notes


def _warnings(op: OpLatency, floor: OpLatency | None) -> list[str]:
    msgs = list(op.warnings)
    if floor and op.q("p50") < FLOOR_RATIO * floor.q("p50"):
        msgs.append(f"p50 is under {FLOOR_RATIO:g}× the timing floor: mostly the clock reads")
    return msgs


def _variability_table(runs_summaries) -> Table:
    labels = [label for _, label in BUCKETS] + [">10ms"]
    rows = []
    for short, s in runs_summaries:
        for phase in s.phases:
            v = s.variability(phase)
            for q in ("p50", "p99"):
                rows.append([short, phase, q, v[q]["operations"], *[pct(v[q][label]) for label in labels]])
    return Table(
        "variability: share of operations whose percentile is at most …",
        ["run", "measured", "percentile", "operations", *labels],
        rows,
        "as the kernel-variability study reports it: cumulative shares, so ≤10µs includes ≤1µs; "
        "the last column is the share above 10 ms; operations: those whose sample tells that percentile",
    )


def _floor_notes(runs_summaries) -> list[Note]:
    out = []
    for short, s in runs_summaries:
        if not s.floor:
            out.append(Note(f"{short}: timing floor not measured (no null probe in this run)", warning=True))
            continue
        parts = [f"{phase}: p50 {ns(o.q('p50'))}, p99 {ns(o.q('p99'))}" for phase, o in s.floor.items()]
        out.append(
            Note(
                f"{short}: timing floor (an empty operation between the two clock reads; included in "
                f"every figure, subtracted from none): " + "; ".join(parts)
            )
        )
    return out


def sections(runs) -> list[Section]:
    summaries: list[tuple[str, LatencySummary]] = [(rd.short, summarize(rd.records)) for rd in runs]
    if not any(s.ops for _, s in summaries):
        return [Section(TITLE, [Note("no complete measurement in these runs", warning=True), *_floor_notes(summaries)])]
    # Alone first (its colour then stays the same in every report), then the
    # competitors in the order the runs measured them.
    phases = sorted(dict.fromkeys(p for _, s in summaries for p in s.phases), key=lambda p: p != ALONE)
    table, notes = _percentile_table(summaries)
    blocks = [table, *[Note(f"{i}. {n}", warning=True) for i, n in enumerate(notes, 1)], *_floor_notes(summaries)]
    timed = [o.hist for _, s in summaries for o in s.ops if o.hist.count]
    if timed:
        cdfs, tails = _curves(summaries)
        floors = pd.DataFrame(
            [{"run": short, "floor_ns": s.floor[ALONE].q("p50")} for short, s in summaries if ALONE in s.floor],
            columns=["run", "floor_ns"],
        )
        cdf, tail = _distribution_charts(cdfs, tails, floors, phases)
        width = max(2.0**-h.sub_bits for h in timed)
        blocks += [
            Figure(
                "latency-cdf",
                "distribution of each operation's latency (CDF)",
                cdf,
                f"from the merged histogram's buckets (each at most {width:.1%} of its value wide), from "
                "the exact minimum to the exact maximum; dotted grey, where it falls in an operation's "
                "range: the timing floor (p50 of an empty operation)",
            ),
            Figure(
                "latency-tail",
                "the tail: share of operations at least this slow",
                tail,
                "the same histograms on log–log axes, where p99 (1 %), p99.9 (0.1 %) and the last few "
                "operations before the maximum can be read; each curve ends at the exact maximum",
            ),
        ]
    blocks.append(_variability_table(summaries))
    return [Section(TITLE, blocks)]
