"""`appscale` runs: speedup and efficiency against CPUs, the user / system /
interrupt time stacked per CPU count, and the Amdahl and USL fits drawn past
the measured range as extrapolations."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from ...analysis.appscale import per_app, summarize_run
from ...analysis.scaling import amdahl, usl
from ...format import pct
from ..appscale import fit_lines
from .page import Figure, Note, Section, Table

EXTRAPOLATE = 4


def sections(runs) -> list[Section]:
    points, times, curves, table, blocks = [], [], [], [], []
    for rd in runs:
        whole = summarize_run(rd.records, rd.run.params.get("available_cpus"))
        single = rd.run.params.get("workload") or " ".join(rd.run.params.get("command") or [])
        for app, s in per_app(whole):
            # a run of several applications (a study's): a line each
            label, what = (f"{rd.short} {app}", app) if app else (rd.short, single)
            for r in s["rows"]:
                if not r["ok"]:
                    table.append(
                        [
                            label,
                            r["n"],
                            "failed",
                            None,
                            None,
                            None,
                            None,
                            None,
                            "; ".join(
                                f"exit {f['code']}" if f["code"] is not None else f"signal {f['signal']}"
                                for f in r["failures"]
                            ),
                        ]
                    )
                    continue
                points.append(
                    {
                        "run": label,
                        "cpus": r["n"],
                        "speedup": r["speedup"],
                        "efficiency": r["efficiency"],
                        "wall_s": r["wall_s"]["median"],
                    }
                )
                for part, v in (("user", r["user_s"]), ("system", r["system_s"]), ("irq+softirq", r["irq_softirq_s"])):
                    times.append({"run": label, "cpus": r["n"], "part": part, "seconds": v or 0.0})
                table.append(
                    [
                        label,
                        r["n"],
                        r["wall_s"]["median"],
                        r["speedup"],
                        pct(r["efficiency"]),
                        r["user_s"],
                        r["system_s"],
                        pct(r["system_share"], 1),
                        "",
                    ]
                )
            top = max((r["n"] for r in s["rows"] if r["ok"]), default=1)
            ns = np.unique(np.geomspace(1, top * EXTRAPOLATE, 60).round(2))
            fits = s["fits"]
            if fits["usl"].get("fitted"):
                u = fits["usl"]
                one = usl(1.0, u["lambda"], u["sigma"], u["kappa"])
                curves += [
                    {
                        "run": label,
                        "model": "USL",
                        "cpus": float(n),
                        "speedup": float(usl(n, u["lambda"], u["sigma"], u["kappa"]) / one),
                        "extrapolated": bool(n > top),
                    }
                    for n in ns
                ]
            if fits["amdahl"].get("fitted"):
                f = fits["amdahl"]["serial_fraction"]
                curves += [
                    {
                        "run": label,
                        "model": "Amdahl",
                        "cpus": float(n),
                        "speedup": float(amdahl(n, f)),
                        "extrapolated": bool(n > top),
                    }
                    for n in ns
                ]
            measured = [r["n"] for r in s["rows"] if r["ok"]]
            blocks += [Note(f"{label} ({what}): {line}") for line in fit_lines(fits, measured)]
    if not points:
        return [
            Section(
                "Application scaling (appscale)",
                [Note("no CPU count was measured successfully", warning=True), *blocks],
            )
        ]
    p = pd.DataFrame(points)
    # ticks at whole CPU counts only: those measured, and powers of two out to the extrapolated end
    top = max(p.cpus.max(), *(c["cpus"] for c in curves)) if curves else p.cpus.max()
    ticks = sorted({int(n) for n in p.cpus} | {2**k for k in range(int(np.log2(top)) + 1)})
    x = alt.X("cpus:Q", title="CPUs", scale=alt.Scale(type="log", base=2), axis=alt.Axis(values=ticks, format="d"))
    speed = (
        alt.Chart(p)
        .mark_line(point=True)
        .encode(
            x,
            alt.Y("speedup:Q", title="speedup"),
            alt.Color("run:N"),
            tooltip=["run", "cpus", "speedup", "efficiency", "wall_s"],
        )
    )
    ideal = (
        alt.Chart(pd.DataFrame({"cpus": [p.cpus.min(), p.cpus.max()]}))
        .mark_line(strokeDash=[2, 2], color="gray")
        .encode(x, alt.Y("cpus:Q"))
    )
    layers = [speed, ideal]
    if curves:
        layers.append(
            alt.Chart(pd.DataFrame(curves))
            .mark_line(strokeDash=[6, 4], opacity=0.7)
            .encode(
                x,
                alt.Y("speedup:Q"),
                alt.Color("run:N"),
                alt.StrokeDash("model:N"),
                tooltip=["run", "model", "cpus", "speedup", "extrapolated"],
            )
        )
    speedup = alt.layer(*layers).properties(width=420, height=260)
    efficiency = (
        alt.Chart(p)
        .mark_line(point=True)
        .encode(x, alt.Y("efficiency:Q", axis=alt.Axis(format="%"), title="efficiency"), alt.Color("run:N"))
        .properties(width=420, height=260)
    )
    stacked = (
        alt.Chart(pd.DataFrame(times))
        .mark_bar()
        .encode(
            alt.X("cpus:O", title="CPUs"),
            alt.Y("seconds:Q", title="CPU seconds (median)"),
            alt.Color("part:N", title="", scale=alt.Scale(domain=["user", "system", "irq+softirq"])),
            alt.Column("run:N", title=None),
            tooltip=["run", "cpus", "part", "seconds"],
        )
        .properties(width=260, height=260)
    )
    blocks = [
        Figure(
            "appscale-speedup",
            "speedup against CPUs",
            alt.hconcat(speedup, efficiency),
            "dotted grey: ideal; dashed: the fits, extrapolated past the largest count measured",
        ),
        Figure(
            "appscale-cpu-time",
            "where the CPU time went, per CPU count",
            stacked,
            "user and system time of the whole process tree; irq+softirq on those CPUs",
        ),
        Table(
            "every CPU count",
            ["run", "CPUs", "wall s", "speedup", "efficiency", "user s", "sys s", "sys share", "failure"],
            table,
        ),
        *blocks,
    ]
    return [Section("Application scaling (appscale)", blocks)]
