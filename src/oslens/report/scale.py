"""The `scale` section: one table per probe series, as the command prints it."""

from __future__ import annotations

import math

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..analysis.scale import PointStats, Series, confidence_note
from ..format import ns, pct, seconds, si, sig
from . import verdicts
from .usl import usl_line

LEGEND = (
    "per worker = median ops/s of one worker [interval, its confidence, repetitions] · "
    "efficiency = per-worker rate relative to the smallest worker count [the ratio of the two intervals, "
    "its confidence at least the sum of theirs less 100 %; ↑ wholly above 100 %] · "
    "imbalance = fastest worker's rate / slowest's · "
    "sys = kernel share of the workers' CPU time · CPUs span = sockets and physical cores shared by SMT "
    "siblings among the workers' CPUs"
)


def _per_worker(p: PointStats) -> str:
    iv = p.per_worker
    if iv.n < 2:
        return f"{si(iv.median)} [1 rep, no interval]"
    return f"{si(iv.median)} [{si(iv.low)}–{si(iv.high)}, {iv.coverage:.0%}, {iv.n} reps]"


def _pcts(*xs: float, above: bool = False) -> list[str]:
    """Percentages, with a decimal or two more when `above` (an interval
    wholly above 100 %) would otherwise print its low end as 100 %."""
    for d in range(3):
        out = [f"{x:.{d}%}" if math.isfinite(x) else "–" for x in xs]
        if not above or all(t != f"{1:.{d}%}" for t in out):
            break
    return out


def _efficiency(p: PointStats) -> str:
    if p.efficiency is None:
        return "–"
    iv = p.efficiency_ci
    if iv is None or iv.n < 2:
        return pct(p.efficiency)
    med, low, high = _pcts(iv.median, iv.low, iv.high, above=p.superlinear)
    if iv.coverage <= 0:  # the two intervals' confidences sum to 100 % or less: this one states nothing
        return f"{med} [no interval: too few repetitions]"
    return f"{med} [{low}–{high}, ≥{iv.coverage:.0%}]" + (" ↑" if p.superlinear else "")


def _span(p: PointStats) -> str:
    if p.sockets is None:
        return "–"
    sockets = f"{p.sockets} socket{'s' if p.sockets != 1 else ''}"
    k = p.smt_shared_cores
    if not k:
        return f"{sockets}, no SMT"
    if p.smt_per_core == 2:
        return f"{sockets}, {k} SMT pair{'s' if k != 1 else ''}"
    return f"{sockets}, {k} core{'s' if k != 1 else ''} with up to {p.smt_per_core} SMT siblings"


def table_cells(s: Series) -> tuple[list[str], list[list[str]], list[str]]:
    """The columns, the rows' cells (text) and the notes the rows point to,
    of one series: what the terminal and the HTML report both show."""
    fixed_work = s.fixed == "ops"
    cols = ["workers", "CPUs span"]
    if fixed_work:
        cols += ["fastest", "slowest"]
    cols += ["total ops/s", "per worker ops/s", f"efficiency vs {s.baseline_workers}", "imbalance", "sys"]
    if s.explained is not None:
        cols.append("why (share of time per op)")
    cols.append("note")
    notes: list[str] = []
    rows = []
    for i, p in enumerate(s.points):
        marks = []
        for w in p.warnings:
            if w not in notes:
                notes.append(w)
            marks.append(str(notes.index(w) + 1))
        row = [str(p.workers), _span(p)]
        if fixed_work:
            row += [seconds(p.fastest_s.median), seconds(p.slowest_s.median)]
        row += [si(p.total.median), _per_worker(p), _efficiency(p), f"{p.imbalance:.2f}", pct(p.sys_share)]
        if s.explained is not None:
            row.append(_why(s.explained[i]))
        row.append(",".join(marks))
        rows.append(row)
    return cols, rows, notes


def footer_lines(s: Series, notes: list[str]) -> list[tuple[str, bool]]:
    """Under a series' table, as (text, is a warning): the numbered notes
    its rows point to, the rows short of confidence, and the USL fit."""
    lines = [(f"{i}. {n}", True) for i, n in enumerate(notes, 1)]
    short = confidence_note(s)
    if short:
        lines.append((short, True))
    lines.append((usl_text(s), False))
    if s.image:
        lines.append((s.image, False))
    return lines


def usl_text(s: Series) -> str:
    measured = [p.workers for p in s.points]
    if s.usl is None:
        return usl_line(None, measured, "workers", why=s.usl_note or "no data")
    peak = f"{si(s.usl.peak_x)} ops/s total" if s.usl.peak_x is not None else ""
    return usl_line(s.usl.to_dict(), measured, "workers", peak)


def series_table(s: Series, summary: str) -> tuple[Table, list[str]]:
    """The table of one series and the notes its rows point to."""
    cols, rows, notes = table_cells(s)
    t = Table(title=f"[bold]{s.title}[/] — {summary}", title_justify="left")
    for c in cols:
        wide = c.startswith(("per worker", "efficiency", "CPUs span"))
        t.add_column(c, justify="left" if c in ("note", "why (share of time per op)") else "right", no_wrap=wide)
    for p, row in zip(s.points, rows):
        cells: list = list(row)
        cells[-1] = Text(row[-1], style="yellow")
        if p.superlinear:
            k = cols.index(f"efficiency vs {s.baseline_workers}")
            cells[k] = Text(row[k], style="bold yellow")
        t.add_row(*cells)
    return t, notes


def _why(e) -> str:
    """The two costliest causes of a point's time per operation."""
    if e is None:
        return "—"
    top = [f"{c.text()} {c.ns_per_op / e.ns_per_op:.0%}" for c in e.causes[:2] if e.ns_per_op > 0]
    return ", ".join(top)


def _percent_range(xs: list[float], digits: int = 0) -> str:
    lo, hi = f"{min(xs):.{digits}%}", f"{max(xs):.{digits}%}"
    return lo if lo == hi else f"{lo}–{hi}"


def _cost_bounds(got: list) -> str:
    """How far both sides' repetitions bound the cost: the widest bounds over
    the points, at the least confidence any of them has."""
    costed = [e for e in got if e.cost is not None]
    confidence = min(e.cost_confidence or 0.0 for e in costed)
    if not confidence:
        return ", too few repetitions to bound it"
    low, high = min(e.cost_low for e in costed), max(e.cost_high for e in costed)
    return f", between {low:.0%} and {high:.0%} at {confidence:.0%} confidence"


def cost_line(explained: list) -> str | None:
    """What attribution cost over a series' explained points (None where a
    point was not explained): the throughput it took, and in light mode its
    programs' share of the workers' time (a floor the throughput's noise
    cannot hide)."""
    got = [e for e in explained if e]
    costs = [e.cost for e in got if e.cost is not None]
    shares = [e.program_share for e in got if e.program_share is not None]
    if not costs and not shares:
        return None
    modes = " and ".join(sorted({e.mode for e in got}))
    line = f"attribution ({modes} mode) ran in separate repetitions right after each point"
    if costs:
        line += f"; it cost {_percent_range(costs)} of the throughput there{_cost_bounds(got)} (the figures above are "
        line += "the plain ones)"
    if shares:
        line += (
            f"; its programs ran {_percent_range(shares, 1)} of the workers' time (the kernel's BPF statistics; the "
            "clock's interrupts and the tracepoints' dispatch are not in it)"
        )
    return line


def point_lines(e) -> list[str]:
    """What one explained point adds under the table, each a short clause."""
    extras = []
    if e.ipis_sent_per_op is None:  # light mode counts what it receives, not what it sends
        if e.ipis_received_per_op >= 0.01:
            extras.append(f"IPIs received {sig(e.ipis_received_per_op, 2)}/op (sent: not counted in light mode)")
    elif e.ipis_sent_per_op >= 0.01 or e.ipis_received_per_op >= 0.01:
        extras.append(f"IPIs sent {sig(e.ipis_sent_per_op, 2)}/op, received {sig(e.ipis_received_per_op, 2)}/op")
    remote = (e.tlb_flushes_per_op or {}).get("remote_shootdown", 0)
    if remote >= 0.01:
        extras.append(f"TLB shootdowns received {sig(remote, 2)}/op")
    if e.latency_ns:
        extras.append(_op_latency(e.latency_ns))
    if observed := _observer_effect(e):
        extras.append(observed)
    if "all" in e.run_lengths:
        rl = e.run_lengths["all"]
        short, long_ = rl.over.get(1000, (0, 0)), rl.over.get(10000, (0, 0))
        extras.append(
            f"kernel entries {rl.count}, mean {ns(rl.mean_ns)}, {1 - short[0]:.1%} ≤ 1 µs; "
            f"{long_[1]:.0%} of kernel time in the {long_[0]:.2%} longer than 10 µs"
        )
    if e.helpers:
        top = ", ".join(f"{c.label} {ns(c.ns_per_op)}" for c in e.helpers[:3])
        extras.append(f"meanwhile {e.helped_by}: {ns(sum(c.ns_per_op for c in e.helpers))}/op, most in {top}")
    if e.stacks and e.stacks.functions:
        top = ", ".join(f"{f.name} {ns(f.self_ns)}" for f in e.stacks.functions[:3])
        extras.append(f"kernel {ns(e.stacks.kernel_ns)}/op sampled, most in {top}")
    return extras


def explanation_lines(s: Series) -> list[str]:
    """Under a series: the knee named, what attribution cost, what it lacked."""
    if s.explanation is None and not any(s.explained or []):
        return []
    lines = [f"why: {s.explanation}"] if s.explanation else []
    got = [e for e in s.explained or [] if e]
    for e in got:
        if extras := point_lines(e):
            lines.append(f"  {e.workers} worker{'s' if e.workers > 1 else ''}: " + "; ".join(extras))
    if cost := cost_line(got):
        lines.append(f"  {cost}")
    missing = sorted({m for e in got for m in e.missing})
    if missing:
        lines.append("  not attributed on this kernel: " + ", ".join(missing))
    for n in sorted({n for e in got for n in e.notes}):
        lines.append(f"  {n}")
    return lines


def render(console: Console, series: list[Series], summaries: dict[str, str]) -> None:
    if not series:
        console.print("no complete measurement in this run")
        return
    for s in series:
        if not s.points:
            console.print(f"{s.title}: no complete repetition")
            continue
        # a variant's own help where the engine has it (old stored variants: the probe's summary)
        table, notes = series_table(s, summaries.get(f"{s.probe}:{s.variant}") or summaries.get(s.probe, ""))
        console.print(table)
        for line, warning in footer_lines(s, notes):
            console.print(Text(f"  {line}", style="yellow" if warning else "dim"))
        for line in explanation_lines(s):
            console.print(Text(f"  {line}", style="cyan" if line.startswith("why") else "dim"))
    console.print(Text(LEGEND, style="dim"))


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
    # the probes' words as the run stored them (a run stored before they were has none)
    render(console, summary.series, run.params.get("descriptions") or {})
    if summary.study and "here" in summary.study[0]:
        verdicts.show(console, run, summary.study)
    elif summary.study:
        study_table(console, summary.study)


def _op_latency(lat: dict) -> str:
    """An explained point's operation latency: the percentiles its timed
    operations can tell (no p99.9 from 500 of them), and how many those are."""
    told = [f"{q} {ns(lat[q])}" for q in ("p50", "p99", "p99.9") if lat.get(q) is not None]  # None: not told
    every = lat.get("every") or 1
    if isinstance(every, (list, tuple)):
        sampled = f", 1 in {every[0]:,} to {every[1]:,}"
    else:
        sampled = f", 1 in {every:,}" if every > 1 else ""
    return f"op {' '.join(told) or 'latency: too few timed'} ({lat['timed']:,} timed{sampled})"


# Above this cost the explained twin is not the plotted point: it ran slower, met
# each lock less often, and so waited less at it than the plain point does.
OBSERVER_COST = 0.05


def _observer_effect(e) -> str | None:
    """Where a point's twin cost more than OBSERVER_COST: its causes
    understate the plain point's contention, by how much its lock wait per
    op says; None where it cost less, or its cost is not known."""
    if e.cost is None or e.cost <= OBSERVER_COST:
        return None
    wait = sum(c.ns_per_op for c in e.causes if c.group == "lock")
    surely = e.cost_low is not None and e.cost_low > OBSERVER_COST
    says = "understate" if surely else "may understate"
    locks = f"; its lock wait, {ns(wait)}/op, is that of workers {e.cost:.0%} slower" if wait else ""
    return f"attribution slowed this point by {e.cost:.0%}: its causes {says} the plain point's contention{locks}"
