"""The `scale` section: one table per probe series, as the command prints it."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..analysis.scale import Series, run_notes
from ..format import ns, pct, seconds, si

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
    if s.explained is not None:
        t.add_column("why (share of time per op)")
    t.add_column("note")
    notes: list[str] = []
    for i, p in enumerate(s.points):
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
        ]
        if s.explained is not None:
            row.append(_why(s.explained[i]))
        row += [
            Text(",".join(marks), style="yellow"),
        ]
        t.add_row(*row)
    return t, notes


def _why(e) -> str:
    """The two costliest causes of a point's time per operation."""
    if e is None:
        return "—"
    top = [f"{c.label} {c.ns_per_op / e.ns_per_op:.0%}" for c in e.causes[:2] if e.ns_per_op > 0]
    return ", ".join(top)


def explanation_lines(s: Series) -> list[str]:
    """Under a series: the knee named, what attribution cost, what it lacked."""
    if s.explanation is None:
        return []
    lines = [f"why: {s.explanation}"]
    got = [e for e in s.explained or [] if e]
    for e in got:
        extras = []
        if e.ipis_sent_per_op >= 0.01 or e.ipis_received_per_op >= 0.01:
            extras.append(f"IPIs sent {e.ipis_sent_per_op:.2g}/op, received {e.ipis_received_per_op:.2g}/op")
        remote = e.tlb_flushes_per_op.get("remote_shootdown", 0)
        if remote >= 0.01:
            extras.append(f"TLB shootdowns received {remote:.2g}/op")
        if e.latency_ns:
            lat = e.latency_ns
            extras.append(f"op p50 {ns(lat['p50'])} p99 {ns(lat['p99'])} p99.9 {ns(lat['p99.9'])}")
        if "all" in e.run_lengths:
            rl = e.run_lengths["all"]
            short, long_ = rl.over.get(1000, (0, 0)), rl.over.get(10000, (0, 0))
            extras.append(
                f"kernel entries {rl.count}, mean {ns(rl.mean_ns)}, {1 - short[0]:.1%} ≤ 1 µs; "
                f"{long_[1]:.0%} of kernel time in the {long_[0]:.2%} longer than 10 µs"
            )
        if extras:
            lines.append(f"  {e.workers} worker{'s' if e.workers > 1 else ''}: " + "; ".join(extras))
    costs = [e.cost for e in got if e.cost is not None]
    if costs:
        lines.append(
            f"  attribution ran in separate repetitions right after each point; it cost "
            f"{min(costs):.0%}–{max(costs):.0%} of the throughput there (the figures above are the plain ones)"
        )
    missing = sorted({m for e in got for m in e.missing})
    if missing:
        lines.append("  not attributed on this kernel: " + ", ".join(missing))
    for n in sorted({n for e in got for n in e.notes}):
        lines.append(f"  {n}")
    return lines


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
        for line in explanation_lines(s):
            console.print(Text(f"  {line}", style="cyan" if line.startswith("why") else "dim"))
    console.print(Text(LEGEND, style="dim"))
    for n in run_notes(series):
        console.print(Text(f"note: {n}", style="yellow"))


def study_table(console: Console, rows: list[dict]) -> None:
    """OSMark's findings beside this run's, a verdict per probe."""
    t = Table(
        title="[bold]OSMark re-run[/] — the paper (32-core AMD, Linux 2.6.26) and this kernel", title_justify="left"
    )
    t.add_column("probe")
    t.add_column("the paper")
    t.add_column("this kernel")
    for r in rows:
        t.add_row(r["probe"], Text(r["paper"]), Text(r["today"]))
    console.print(t)
    for r in rows:
        console.print(Text(f"  {r['verdict']}"))


def show(console: Console, run, summary) -> None:
    from .. import engine  # the probes' one-line descriptions

    render(console, summary.series, {name: p.summary for name, p in engine.probes().items()})
    if summary.study:
        study_table(console, summary.study)
