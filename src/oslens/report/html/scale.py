"""`scale` runs: throughput per worker against workers for each probe, with
the ideal (no loss from the smallest count), every worker's rate as a dot
(the per-worker spread), process and thread series side by side, and the
USL fit drawn past the measured range, dashed, as an extrapolation."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from ...analysis.scale import run_notes, summarize
from ...records import scale_points
from .page import Figure, Note, Section, Table

EXTRAPOLATE = 4  # the USL curve is drawn to this many times the largest count


def _worker_rates(records: list[dict]) -> pd.DataFrame:
    """Every worker's rate in the repetitions the analysis counts."""
    rows = [
        {
            "probe": f"{p.probe}:{p.variant}",
            "mode": p.mode,
            "workers": p.workers,
            "rep": w["rep"],
            "rate": w["ops_per_sec"],
        }
        for p in scale_points(records)
        for ws in p.complete
        for w in ws
    ]
    return pd.DataFrame(rows)


TOP_CAUSES = 7  # per probe, the rest stacked as "other causes"
TOP_LOCKS = 8  # per point, the costliest


def _explained_blocks(runs) -> list:
    """scale --explain: per probe, the time per operation stacked by cause
    against workers (the picture OSMark's readers wanted), the knee in
    words, and the costliest locks at every point."""
    rows, locks, notes = [], [], []
    for rd in runs:
        for s in summarize(rd.records):
            if s.explained is None:
                continue
            probe = f"{s.probe}:{s.variant} ({s.mode})"
            if s.explanation:
                notes.append(Note(f"{rd.short} · {probe}: {s.explanation}"))
            for e in s.explained:
                if e is None:
                    continue
                point_locks = [c for c in e.causes if c.group == "lock"][:TOP_LOCKS]
                for c in e.causes:
                    rows.append(
                        {
                            "run": rd.short,
                            "probe": probe,
                            "workers": e.workers,
                            "cause": c.label,
                            "ns_per_op": c.ns_per_op,
                        }
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
    return blocks


def sections(runs) -> list[Section]:
    medians, ideal, fits, dots, table, notes = [], [], [], [], [], []
    for rd in runs:
        series = summarize(rd.records)
        notes += [Note(f"{rd.short}: {n}", warning=True) for n in run_notes(series)]
        rates = _worker_rates(rd.records)
        if not rates.empty:
            rates["run"] = rd.short
            dots.append(rates)
        for s in series:
            probe = f"{s.probe}:{s.variant}"
            for p in s.points:
                medians.append(
                    {
                        "run": rd.short,
                        "probe": probe,
                        "mode": s.mode,
                        "workers": p.workers,
                        "per_worker": p.per_worker.median,
                        "low": p.per_worker.low,
                        "high": p.per_worker.high,
                    }
                )
                table.append(
                    [
                        rd.short,
                        probe,
                        s.mode,
                        p.workers,
                        p.total.median,
                        p.per_worker.median,
                        p.efficiency,
                        p.sys_share,
                        "; ".join(p.warnings),
                    ]
                )
            if s.points:
                base = s.points[0]
                ideal += [
                    {"run": rd.short, "probe": probe, "mode": s.mode, "workers": n, "ideal": base.per_worker.median}
                    for n in (base.workers, s.points[-1].workers)
                ]
            if s.usl:
                top = max(p.workers for p in s.points)
                ns = np.unique(np.geomspace(1, top * EXTRAPOLATE, 60).round(2))
                for n in ns:
                    fits.append(
                        {
                            "run": rd.short,
                            "probe": probe,
                            "mode": s.mode,
                            "workers": float(n),
                            "usl": float(s.usl.predict(n)) / n,
                            "extrapolated": bool(n > top),
                        }
                    )
    if not medians:
        return [Section("Scalability (scale)", [Note("no complete measurement in these runs", warning=True)])]
    m = pd.DataFrame(medians)
    d = pd.concat(dots) if dots else pd.DataFrame(columns=["run", "probe", "mode", "workers", "rep", "rate"])
    f = pd.DataFrame(fits) if fits else pd.DataFrame(columns=["run", "probe", "mode", "workers", "usl", "extrapolated"])
    i = pd.DataFrame(ideal)
    colour = alt.Color("mode:N", title="workers as")
    x = alt.X(
        "workers:Q",
        scale=alt.Scale(type="log", base=2),
        title="workers",
        axis=alt.Axis(values=sorted(m.workers.unique().tolist())),
    )
    panels = []
    for probe in sorted(m.probe.unique()):
        mp, dp, fp, ip = m[m.probe == probe], d[d.probe == probe], f[f.probe == probe], i[i.probe == probe]
        layers = [
            alt.Chart(mp)
            .mark_line(point=True)
            .encode(
                x,
                alt.Y("per_worker:Q", title="ops/s per worker", scale=alt.Scale(zero=False)),
                colour,
                alt.StrokeDash("run:N", title="run"),
                tooltip=["run", "probe", "mode", "workers", "per_worker", "low", "high"],
            ),
            alt.Chart(mp).mark_errorbar().encode(x, alt.Y("low:Q", title=""), alt.Y2("high:Q"), colour),
            alt.Chart(ip).mark_line(strokeDash=[2, 2], color="gray").encode(x, alt.Y("ideal:Q"), detail="mode:N"),
        ]
        if not dp.empty:
            layers.append(
                alt.Chart(dp)
                .mark_circle(size=12, opacity=0.35)
                .encode(x, alt.Y("rate:Q"), colour, tooltip=["run", "probe", "mode", "workers", "rep", "rate"])
            )
        if not fp.empty:
            layers.append(
                alt.Chart(fp)
                .mark_line(strokeDash=[6, 4], opacity=0.8)
                .encode(
                    x, alt.Y("usl:Q"), colour, detail="run:N", tooltip=["run", "mode", "workers", "usl", "extrapolated"]
                )
            )
        panels.append(alt.layer(*layers).properties(title=probe, width=300, height=210))
    chart = alt.concat(*panels, columns=3)
    caption = (
        "line: median ops/s per worker over repetitions, bars: its interval; dots: every worker of every "
        "repetition; dotted grey: no loss from the smallest count; dashed: the USL fit, extrapolated past "
        "the largest count measured"
    )
    blocks = [
        Figure("scale-per-worker", "throughput per worker against workers", chart, caption),
        Table(
            "every point",
            ["run", "probe", "mode", "workers", "total ops/s", "per worker", "efficiency", "sys share", "notes"],
            table,
        ),
        *notes,
        *_explained_blocks(runs),
    ]
    return [Section("Scalability (scale)", blocks)]
