"""The `latency` section: per-operation percentiles, side by side when the
run measured each operation alone and with competition, then the
variability buckets."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..analysis.histogram import TAIL_RULE
from ..analysis.latency import ALONE, BUCKETS, LatencySummary, OpLatency
from ..format import ns, pct, quotient
from . import verdicts

# An operation whose p50 is under this multiple of the timing floor is
# mostly measuring the clock reads around it.
FLOOR_RATIO = 3.0


def _floor_line(s: LatencySummary) -> Text:
    parts = [f"{phase}: p50 {ns(o.q('p50'))}, p99 {ns(o.q('p99'))}" for phase, o in s.floor.items()]
    if not parts:
        return Text("timing overhead: not measured (no null probe in this run)", style="yellow")
    return Text(
        "timing overhead (an empty operation, included in every figure, subtracted from none): " + "; ".join(parts),
        style="dim",
    )


def _notes(op: OpLatency, floor: OpLatency | None, notes: list[str]) -> str:
    msgs = list(op.warnings)
    if floor and op.q("p50") < FLOOR_RATIO * floor.q("p50"):
        msgs.append(f"p50 is under {FLOOR_RATIO:g}× the timing overhead: mostly the clock reads")
    marks = []
    for m in msgs:
        if m not in notes:
            notes.append(m)
        marks.append(str(notes.index(m) + 1))
    return ",".join(marks)


def render(console: Console, s: LatencySummary) -> None:
    if not s.ops:
        console.print("no complete measurement in this run")
        return
    phases = s.phases
    others = [p for p in phases if p != ALONE]
    t = Table(title="[bold]latency per operation[/] (merged over workers and repetitions)", title_justify="left")
    t.add_column("operation")
    t.add_column("n", justify="right")
    cols = ("p50", "p99", "p99.9")
    for c in cols:
        t.add_column(c, justify="right")
    t.add_column("max", justify="right")
    t.add_column("p99/p50", justify="right")
    for i, _ in enumerate(others):
        for c in ("p50", "p99"):
            t.add_column(f"{c} [{i + 1}]", justify="right", style="cyan")
        t.add_column(f"p99 ×[{i + 1}]", justify="right", style="cyan")
    t.add_column("note")
    notes: list[str] = []
    by_name: dict[str, dict[str, OpLatency]] = {}
    for op in s.ops:
        by_name.setdefault(op.name, {})[op.phase] = op
    for name, per_phase in by_name.items():
        base = per_phase.get(ALONE) or next(iter(per_phase.values()))
        row = [name, f"{base.hist.count:,}"] + [ns(base.q(c)) for c in cols]
        row += [ns(base.max_ns), quotient(base.q("p99"), base.q("p50"))]
        for p in others:
            o = per_phase.get(p)
            row += [ns(o.q("p50")), ns(o.q("p99")), quotient(o.q("p99"), base.q("p99"))] if o else ["–"] * 3
        row.append(Text(_notes(base, s.floor.get(base.phase), notes), style="yellow"))
        t.add_row(*row)
    console.print(t)
    for i, p in enumerate(others):
        console.print(Text(f"  [{i + 1}] {p}", style="cyan"))
    for i, n in enumerate(notes, 1):
        console.print(Text(f"  {i}. {n}", style="yellow"))
    if any(o.absent() for o in [*s.ops, *s.floor.values()]):
        console.print(Text(f"  – where the sample cannot tell it: {TAIL_RULE}", style="dim"))
    console.print(_floor_line(s))
    _variability(console, s)


def _variability(console: Console, s: LatencySummary) -> None:
    t = Table(
        title="[bold]variability[/]: share of operations (those whose sample tells the percentile) "
        "whose percentile is at most …",
        title_justify="left",
    )
    t.add_column("")
    for _, label in BUCKETS:
        t.add_column(label, justify="right")
    t.add_column(">10ms", justify="right")
    for phase in s.phases:
        v = s.variability(phase)
        for q in ("p50", "p99"):
            row = [pct(v[q][label]) for _, label in BUCKETS]
            t.add_row(f"{q} {phase} ({v[q]['operations']})", *row, pct(v[q][">10ms"]))
    console.print(t)


def show(console: Console, run, summary: LatencySummary) -> None:
    render(console, summary)
    if summary.study:
        verdicts.show(console, run, summary.study)
