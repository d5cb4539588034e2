"""The `scale` section: one table per probe series, as the command prints it."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..analysis.scale import Series, run_notes
from ..format import pct, seconds, si

LEGEND = (
    "imbalance = fastest worker's rate / slowest's · sys = kernel share of the workers' CPU "
    "time · efficiency = per-worker rate relative to the smallest worker count"
)


def _interval(iv, fmt=si) -> str:
    if iv.n < 2:
        return fmt(iv.median)
    return f"{fmt(iv.median)} [{fmt(iv.low)}–{fmt(iv.high)}]"


def series_table(s: Series, summary: str) -> tuple[Table, list[str]]:
    """The table of one series and the notes its rows point to."""
    fixed_work = s.fixed == "ops"
    t = Table(title=f"[bold]{s.title}[/] — {summary}", title_justify="left")
    t.add_column("workers", justify="right")
    if fixed_work:
        t.add_column("fastest", justify="right")
        t.add_column("slowest", justify="right")
    t.add_column("total ops/s", justify="right")
    coverage = min(p.per_worker.coverage for p in s.points)
    t.add_column(f"per worker [{coverage:.0%} CI]", justify="right", no_wrap=True)
    t.add_column(f"efficiency vs {s.baseline_workers}", justify="right")
    t.add_column("imbalance", justify="right")
    t.add_column("sys", justify="right")
    t.add_column("note")
    notes: list[str] = []
    for p in s.points:
        marks = []
        for w in p.warnings:
            if w not in notes:
                notes.append(w)
            marks.append(str(notes.index(w) + 1))
        row = [str(p.workers)]
        if fixed_work:
            row += [seconds(p.fastest_s.median), seconds(p.slowest_s.median)]
        row += [
            si(p.total.median),
            _interval(p.per_worker),
            pct(p.efficiency),
            f"{p.imbalance:.2f}",
            pct(p.sys_share),
            Text(",".join(marks), style="yellow"),
        ]
        t.add_row(*row)
    return t, notes


def _usl_line(s: Series) -> str:
    if s.usl:
        u = s.usl
        peak = f"; total throughput would peak near {u.peak_n:.0f} workers (extrapolated)" if u.peak_n else ""
        return f"USL: σ={u.sigma:.3g} (contention), κ={u.kappa:.3g} (coherency), R²={u.r2:.3f}{peak}"
    return f"USL: not fitted, {s.usl_note}" if s.usl_note else ""


def render(console: Console, series: list[Series], summaries: dict[str, str]) -> None:
    if not series:
        console.print("no complete measurement in this run")
        return
    for s in series:
        if not s.points:
            console.print(f"{s.title}: no complete repetition")
            continue
        table, notes = series_table(s, summaries.get(s.probe, ""))
        console.print(table)
        for i, n in enumerate(notes, 1):
            console.print(Text(f"  {i}. {n}", style="yellow"))
        console.print(Text(f"  {_usl_line(s)}", style="dim"))
    console.print(Text(LEGEND, style="dim"))
    for n in run_notes(series):
        console.print(Text(f"note: {n}", style="yellow"))


def show(console: Console, run, summary) -> None:
    from .. import engine  # the probes' one-line descriptions

    render(console, summary.series, {name: p.summary for name, p in engine.probes().items()})
