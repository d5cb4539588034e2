"""`scale` runs: per probe, throughput per worker, total throughput and
efficiency against workers, each from zero, with the ideal (no loss from
the smallest count), every worker's (or repetition's) rate as a dot, process
and thread series side by side, and the USL fit drawn past the measured
range, dashed; then each series' table with the very cells the terminal
prints (report/scale.py's table_cells), its notes and its USL line."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from ...analysis.scale import summarize
from ...format import plural, share
from ...frames.scale import frames as scale_frames
from ..scale import LEGEND, cost_line, footer_lines, table_cells
from . import flames
from .page import Figure, Note, Section, Table

EXTRAPOLATE = 4  # the USL curve is drawn to this many times the largest count


def _worker_rates(rd) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every worker's rate, and every repetition's total, in the repetitions
    the analysis counts: the run's `workers` frame (frames/scale.py), what
    `export` gives, so that the page draws the exported figures."""
    w = scale_frames(rd.run, rd.records)["workers"]
    rates = pd.DataFrame(
        {
            "probe": w["probe"] + ":" + w["variant"],
            "mode": w["mode"],
            "workers": w["workers"],
            "rep": w["rep"],
            "rate": w["ops_per_s"],
        }
    )
    totals = rates.groupby(["probe", "mode", "workers", "rep"], as_index=False)["rate"].sum()
    return rates, totals.rename(columns={"rate": "total"})


class _Num:
    """A number the terminal's formatting made text, kept right-aligned in
    the page's tables (which left-align text)."""

    def __init__(self, text: str):
        self.text = text

    def __str__(self) -> str:
        return self.text


def _cells(cols: list[str], row: list[str]) -> list:
    text = {"CPUs span", "why (share of time per op)", "note"}
    return [c if col in text else _Num(c) for col, c in zip(cols, row)]


def _finite(x: float | None) -> float | None:
    return x if x is not None and np.isfinite(x) else None


TOP_CAUSES = 7  # per probe, the rest stacked as "other causes"
TOP_LOCKS = 8  # per point, the costliest
TOP_TAKERS = 5  # per point, who took the CPU most
# the engine's names of what took a CPU, where they read badly
WHO = {"other": "another program", "child": "a process a worker forked"}


def _explained_blocks(runs) -> list:
    """scale --explain: per probe, the time per operation stacked by cause
    against workers (the picture OSMark's readers wanted), the knee in
    words, and the costliest locks at every point."""
    rows, locks, takers, notes = [], [], [], []
    for rd in runs:
        for s in summarize(rd.records):
            if s.explained is None:
                continue
            probe = f"{s.probe}:{s.variant} ({s.mode})"
            notes += [Note(f"{rd.short} · {probe}: {t}") for t in (s.explanation, cost_line(s.explained)) if t]
            for e in s.explained:
                if e is None:
                    continue
                point_locks = [c for c in e.causes if c.group == "lock"][:TOP_LOCKS]
                for c in e.causes:
                    for label, ns in _split_by_taker(c):
                        rows.append(
                            {"run": rd.short, "probe": probe, "workers": e.workers, "cause": label, "ns_per_op": ns}
                        )
                    takers.extend(
                        [
                            rd.short,
                            probe,
                            e.workers,
                            t["name"],
                            WHO.get(t["who"], t["who"]),
                            t["ns_per_op"],
                            share(t["share"], 2),
                        ]  # fmt: skip
                        for t in c.takers[:TOP_TAKERS]
                    )
                    if c in point_locks:
                        locks.append(
                            [
                                rd.short,
                                probe,
                                e.workers,
                                c.label,
                                " ← ".join(c.callers[:3]),
                                c.ns_per_op,
                                c.count_per_op,
                            ]
                        )
                rows.append(
                    {
                        "run": rd.short,
                        "probe": probe,
                        "workers": e.workers,
                        "cause": "unexplained",
                        "ns_per_op": max(e.unexplained_ns, 0.0),
                    }
                )
    if not rows:
        return []
    df = pd.DataFrame(rows)
    panels = []
    for probe in sorted(df.probe.unique()):
        dp = df[df.probe == probe].copy()
        top = dp.groupby("cause").ns_per_op.sum().sort_values(ascending=False).index[:TOP_CAUSES]
        dp.loc[~dp.cause.isin(top) & (dp.cause != "unexplained"), "cause"] = "other causes"
        dp = dp.groupby(["run", "probe", "workers", "cause"], as_index=False).ns_per_op.sum()
        encoding = [
            alt.X(
                "workers:Q",
                scale=alt.Scale(type="log", base=2),
                title="workers",
                axis=alt.Axis(values=sorted(dp.workers.unique().tolist())),
            ),
            alt.Y("ns_per_op:Q", stack="zero", title="ns per operation"),
            alt.Color("cause:N", title="cause"),
            alt.Tooltip(["run", "workers", "cause", "ns_per_op"]),
        ]
        if dp.run.nunique() > 1:
            encoding.append(alt.Row("run:N", title=None))
        panels.append(alt.Chart(dp).mark_area().encode(*encoding).properties(title=probe, width=300, height=210))
    caption = (
        "every instant of every worker thread charged to the innermost cause it was in (the explained "
        "repetitions, measured right after the plain ones); what no cause covers is 'unexplained'"
    )
    blocks = [Figure("scale-why", "time per operation by cause", alt.concat(*panels, columns=3), caption), *notes]
    if locks:
        blocks.append(
            Table(
                "contended locks at every point",
                ["run", "probe", "workers", "lock", "callers", "wait ns per op", "waits per op"],
                locks,
            )
        )
    if takers:
        blocks.append(
            Table(
                "who took the workers' CPUs while they waited for one, at every point",
                ["run", "probe", "workers", "taker", "what it is", "wait ns per op", "share of the wait"],
                takers,
            )
        )
    return blocks + _flames(runs)


def _split_by_taker(c) -> list[tuple[str, float]]:
    """A cause as the chart stacks it: a wait for a CPU split by who took
    the CPU, what no taker was seen for kept as the wait itself."""
    if not c.takers:
        return [(c.label, c.ns_per_op)]
    parts = [(f"{c.label}: {t['name']}", t["ns_per_op"]) for t in c.takers]
    unseen = c.ns_per_op - sum(ns for _, ns in parts)
    return parts + ([(f"{c.label}: taker not seen", unseen)] if unseen > 0 else [])


def _flames(runs) -> list:
    """Per series with sampled stacks: the knee's differential flame graph
    (widths at the larger count, colours how each frame changed since the
    smaller), and each explained point's own, drawn when its reader opens it."""
    knees, points = [], []
    for rd in runs:
        for s in summarize(rd.records):
            slug = f"{s.probe}-{s.variant}-{s.mode}-{rd.run.id}".replace(":", "-")
            where = f"{rd.short} · {s.probe}:{s.variant} ({s.mode})"
            got = {e.workers: e for e in s.explained or [] if e and e.folded}
            k = s.knee
            if k and k.from_workers in got and k.to_workers in got:
                knees += _flame_figure(
                    f"scale-knee-flames-{slug}",
                    f"{where}: the knee's kernel stacks, {k.from_workers} → {k.to_workers} workers",
                    flames.chart(_per_op(got[k.to_workers]), _per_op(got[k.from_workers])),
                    f"sampled stacks of the workers' time at {k.to_workers} workers, width its time per operation, "
                    f"colour how that changed since {k.from_workers} (red grew, blue shrank); the root frames are "
                    "the causes",
                )
            for n, e in got.items():
                points += _flame_figure(
                    f"scale-point-flames-{slug}-{n}",
                    f"{where}, {plural(n, 'worker')}: kernel stacks (flame graph, {e.mode} mode)",
                    flames.chart(_per_op(e)),
                    "width: sampled time per operation; the causes at the root, then the kernel functions "
                    "outermost first ('helper:' the tasks the workers wait on)",
                    on_demand=True,
                )
    return knees + points


def _per_op(e) -> dict[str, float]:
    return {stack: ns for stack, (_, ns) in e.folded.items()}


def _flame_figure(id: str, title: str, drawn, caption: str, on_demand: bool = False) -> list[Figure]:
    if drawn is None:
        return []
    chart, hidden = drawn
    return [Figure(id, title, chart, caption + flames.hidden_note(hidden), on_demand)]


def sections(runs) -> list[Section]:
    points, ideal, fits, dots, totals, tables = [], [], [], [], [], []
    for rd in runs:
        series = summarize(rd.records)
        rates, reps = _worker_rates(rd)
        if not rates.empty:
            dots.append(rates.assign(run=rd.short))
            totals.append(reps.assign(run=rd.short))
        for s in series:
            if not s.points:
                tables.append(Note(f"{rd.short} · {s.title}: no complete repetition", warning=True))
                continue
            probe = f"{s.probe}:{s.variant}"
            key = {"run": rd.short, "probe": probe, "mode": s.mode}
            for p in s.points:
                e = p.efficiency_ci
                points.append(
                    {
                        **key,
                        "workers": p.workers,
                        "per_worker": p.per_worker.median,
                        "per_worker_low": p.per_worker.low,
                        "per_worker_high": p.per_worker.high,
                        "total": p.total.median,
                        "total_low": p.total.low,
                        "total_high": p.total.high,
                        "efficiency": _finite(p.efficiency),
                        "efficiency_low": _finite(e.low if e else p.efficiency),
                        "efficiency_high": _finite(e.high if e else p.efficiency),
                        "reps": p.reps,
                    }
                )
            base, top = s.points[0], s.points[-1].workers
            ideal += [
                {
                    **key,
                    "workers": n,
                    "per_worker": base.per_worker.median,
                    "total": base.per_worker.median * n,
                    "efficiency": 1.0,
                }
                for n in (base.workers, top)
            ]
            if s.usl:
                for n in np.unique(np.geomspace(1, top * EXTRAPOLATE, 60).round(2)):
                    x = float(s.usl.predict(n))
                    fits.append(
                        {**key, "workers": float(n), "total": x, "per_worker": x / n, "extrapolated": bool(n > top)}
                    )
            cols, rows, notes = table_cells(s)
            tables.append(Table(f"{rd.short} · {s.title}", cols, [_cells(cols, r) for r in rows]))
            tables += [Note(f"{rd.short} · {probe} ({s.mode}): {t}", warning=w) for t, w in footer_lines(s, notes)]
    if not points:
        return [
            Section("Scalability (scale)", [Note("no complete measurement in these runs", warning=True), *tables]),
        ]
    m = pd.DataFrame(points)
    frames = {
        "dots": pd.concat(dots) if dots else pd.DataFrame(columns=["run", "probe", "mode", "workers", "rep", "rate"]),
        "totals": pd.concat(totals)
        if totals
        else pd.DataFrame(columns=["run", "probe", "mode", "workers", "rep", "total"]),
        "fits": pd.DataFrame(fits)
        if fits
        else pd.DataFrame(columns=["run", "probe", "mode", "workers", "total", "per_worker", "extrapolated"]),
        "ideal": pd.DataFrame(ideal),
    }
    counts = sorted(m.workers.unique().tolist())
    blocks = [
        Figure(
            "scale-per-worker",
            "throughput per worker against workers",
            _panels(m, frames, counts, "per_worker", "ops/s per worker", "dots", "rate"),
            "line: median ops/s per worker over repetitions, bars: its interval; dots: every worker of every "
            "repetition; dotted grey: no loss from the smallest count; dashed: the USL fit, extrapolated past "
            "the largest count measured",
        ),
        Figure(
            "scale-total",
            "total throughput against workers",
            _panels(m, frames, counts, "total", "ops/s, all workers", "totals", "total"),
            "line: median total ops/s over repetitions, bars: its interval; dots: every repetition; dotted grey: "
            "linear scaling from the smallest count; dashed: the USL fit, extrapolated past the largest count",
        ),
        Figure(
            "scale-efficiency",
            "efficiency against workers",
            _panels(m, frames, counts, "efficiency", "efficiency", None, None),
            "per-worker rate relative to the smallest count; bars: the ratio of the two points' intervals; "
            "dotted grey: 100 % (no loss)",
        ),
        *tables,
        Note(LEGEND),
        *_explained_blocks(runs),
    ]
    return [Section("Scalability (scale)", blocks)]


def _panels(m, frames, counts, field, title, dots, dot_field):
    """One panel per probe of `field` against workers: the median line, its
    interval, the dots, the ideal and (for throughput) the USL fit. Both axes
    padded so no mark sits on the frame, y from zero."""
    colour = alt.Color("mode:N", title="workers as")
    x = alt.X(
        "workers:Q",
        scale=alt.Scale(type="log", base=2, padding=12),
        title="workers",
        axis=alt.Axis(values=counts),
    )
    fmt = "%" if field == "efficiency" else "~s"
    y_scale = alt.Scale(zero=True, nice=True)  # from 0; nice leaves room above the top mark
    panels = []
    for probe in sorted(m.probe.unique()):
        mp = m[m.probe == probe]
        bars = mp.dropna(subset=[f"{field}_low", f"{field}_high"])
        layers = [
            alt.Chart(mp)
            .mark_line(point=True, clip=False)
            .encode(
                x,
                alt.Y(f"{field}:Q", title=title, scale=y_scale, axis=alt.Axis(format=fmt)),
                colour,
                alt.StrokeDash("run:N", title="run"),
                tooltip=["run", "probe", "mode", "workers", field, f"{field}_low", f"{field}_high", "reps"],
            ),
            alt.Chart(bars)
            .mark_errorbar()
            .encode(x, alt.Y(f"{field}_low:Q", title=""), alt.Y2(f"{field}_high:Q"), colour),
        ]
        ip = frames["ideal"][frames["ideal"].probe == probe]
        layers.append(
            alt.Chart(ip).mark_line(strokeDash=[2, 2], color="gray").encode(x, alt.Y(f"{field}:Q"), detail="mode:N")
        )
        if dots:
            dp = frames[dots][frames[dots].probe == probe]
            if not dp.empty:
                layers.append(
                    alt.Chart(dp)
                    .mark_circle(size=12, opacity=0.35, clip=False)
                    .encode(
                        x,
                        alt.Y(f"{dot_field}:Q"),
                        colour,
                        tooltip=["run", "probe", "mode", "workers", "rep", dot_field],
                    )
                )
        fp = frames["fits"][frames["fits"].probe == probe] if field != "efficiency" else frames["fits"].iloc[0:0]
        if not fp.empty:
            layers.append(
                alt.Chart(fp)
                .mark_line(strokeDash=[6, 4], opacity=0.8)
                .encode(
                    x,
                    alt.Y(f"{field}:Q"),
                    colour,
                    detail="run:N",
                    tooltip=["run", "mode", "workers", field, "extrapolated"],
                )
            )
        panels.append(alt.layer(*layers).properties(title=probe, width=300, height=210))
    return alt.concat(*panels, columns=3)
