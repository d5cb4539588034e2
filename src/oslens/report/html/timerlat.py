"""`timerlat` runs: per CPU, the distribution of the thread's and the timer
interrupt's lateness (how often a wake-up is later than x, on log axes, the
tail where it matters), what held the worst wake-ups back, and the per-CPU
numbers. A run measured alone and with competition has a series for each
phase; several runs overlay as further series."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from ...analysis.timerlat import TimerlatSummary, analyze
from ...format import ns
from ..timerlat import COLUMNS, LEGEND, cpu_row, notes
from .noise import NS_LABEL
from .page import Figure, Note, Section, Table

TITLE = "Timer wake-up latency (timerlat)"
MAX_POINTS = 2000  # points drawn per series and CPU: evenly spaced in rank, the tail kept whole
TAIL_KEPT = 200  # the longest wake-ups are all drawn


def _series(runs) -> list[tuple[str, TimerlatSummary]]:
    out = []
    for rd in runs:
        for phase, s in analyze(rd.run, rd.records).phases.items():
            if s.cpus:
                out.append((f"{rd.short} · {phase}" if len(runs) > 1 else phase, s))
    return out


def _exceedance(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(value, share of all the wake-ups at least that late), for the values
    a log axis can draw (> 0), thinned to MAX_POINTS with the longest
    TAIL_KEPT all kept."""
    v = np.sort(values)
    share = (v.size - np.arange(v.size)) / max(v.size, 1)
    drawn = v > 0
    v, share = v[drawn], share[drawn]
    if v.size > MAX_POINTS:
        keep = np.unique(
            np.concatenate(
                [
                    np.linspace(0, v.size - TAIL_KEPT, MAX_POINTS - TAIL_KEPT).astype(int),
                    np.arange(v.size - TAIL_KEPT, v.size),
                ]
            )
        )
        v, share = v[keep], share[keep]
    return v, share


def _distribution(series) -> Figure | None:
    rows = []
    for label, s in series:
        if not s.wakes:
            continue
        cpu = np.array([w.cpu for w in s.wakes])
        thread = np.array([w.thread_ns for w in s.wakes], dtype=float)
        irq = np.array([np.nan if w.irq_ns is None else w.irq_ns for w in s.wakes], dtype=float)
        for c in np.unique(cpu):
            mine = cpu == c
            for what, vals in (("thread", thread[mine]), ("IRQ", irq[mine][~np.isnan(irq[mine])])):
                v, share = _exceedance(vals)
                rows += [
                    {"series": label, "cpu": f"CPU {c}", "latency": what, "ns": float(x), "share": float(p)}
                    for x, p in zip(v, share)
                ]
    if not rows:
        return None
    data = pd.DataFrame(rows)
    chart = (
        alt.Chart(data)
        .mark_line(interpolate="step-after")
        .encode(
            x=alt.X("ns:Q", scale=alt.Scale(type="log"), title="latency", axis=alt.Axis(labelExpr=NS_LABEL)),
            y=alt.Y("share:Q", scale=alt.Scale(type="log"), title="share of wake-ups at least this late"),
            color=alt.Color("cpu:N", title="CPU"),
            strokeDash=alt.StrokeDash(
                "latency:N", title="latency", scale=alt.Scale(domain=["thread", "IRQ"], range=[[1, 0], [4, 3]])
            ),
            tooltip=[
                "series",
                "cpu",
                "latency",
                alt.Tooltip("ns:Q", format=",.0f"),
                alt.Tooltip("share:Q", format=".2e"),
            ],
        )
        .properties(width=560, height=260)
        .facet(row=alt.Row("series:N", title=None))
    )
    return Figure(
        "timerlat-latency",
        "how late each CPU's thread woke, and its timer fired",
        chart,
        "Each wake-up kept: thread latency (solid: the expiry to the thread reading the clock) and IRQ latency "
        "(dashed: the expiry to the timer's callback, where the kernel trace saw it fire — or to its interrupt's "
        "entry where the notes say so; a latency of 0 counts in the shares but has no point on the log axis); the "
        "tail at the right is what a real-time deadline meets.",
    )


def _worst(series) -> list:
    rows = []
    for label, s in series:
        for i, w in enumerate(s.worst):
            rows += [
                {"series": label, "wake-up": f"#{i + 1} CPU {w.cpu}, {ns(w.thread_ns)}", "order": i, "what": what,
                 "from": a, "to": b, "ns": b - a}
                for a, b, what in w.timeline
            ]  # fmt: skip
    if not rows:
        return []
    chart = (
        alt.Chart(pd.DataFrame(rows))
        .mark_bar()
        .encode(
            y=alt.Y("wake-up:N", sort=alt.EncodingSortField("order"), title=None),
            x=alt.X("from:Q", title="time after the timer's expiry", axis=alt.Axis(labelExpr=NS_LABEL)),
            x2="to:Q",
            color=alt.Color("what:N", title="what held it back", legend=alt.Legend(labelLimit=420)),
            tooltip=[
                "series",
                "wake-up",
                "what",
                alt.Tooltip("from:Q", format=",.0f"),
                alt.Tooltip("ns:Q", format=",.0f"),
            ],
        )
        .properties(width=560)
        .facet(row=alt.Row("series:N", title=None))
    )
    return [
        Figure(
            "timerlat-worst",
            "the worst wake-ups, from the timer's expiry to the thread running",
            chart,
            "Each instant charged to the innermost event on the wake-up's CPU then: before the timer interrupt, an "
            "idle CPU waking or a task that ran with interrupts off (or a vCPU not run); after it, interrupts, "
            "softirqs and the tasks that ran before the thread could; after the switch, the thread's own return "
            "from its sleep.",
        )
    ]


def _per_cpu(series) -> list:
    rows, out = [], []
    for label, s in series:
        rows += [[label, *cpu_row(c)] for c in s.cpus]
        out += [Note(f"{label}: {text}", warning) for text, warning in notes(s)]
    table = Table(
        "per CPU",
        ["series", *COLUMNS],
        rows,
        f"missed: periods skipped by a wake-up later than a whole period. {LEGEND}",
    )
    return [table, *out]


def sections(runs) -> list[Section]:
    series = _series(runs)
    if not series:
        return [Section(TITLE, [Note("no complete measurement in these runs", warning=True)])]
    figure = _distribution(series)
    blocks = [figure] if figure else []
    blocks += _per_cpu(series)
    blocks += _worst(series)
    return [Section(TITLE, blocks)]
