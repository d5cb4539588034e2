"""`oslens compare` in the terminal: the run lines, the machine and
parameter differences, and one table per group of metrics with the
verdicts. The statistics and the words of each verdict are compare.py's;
this module only lays them out."""

from __future__ import annotations

import json

from rich.console import Console
from rich.table import Table
from rich.text import Text

from .. import kinds
from ..analysis import kstacks
from ..analysis.stats import Interval
from ..compare import (
    HIGHER,
    IMPROVEMENT,
    NOT_SIGNIFICANT,
    NOT_TESTABLE,
    REGRESSION,
    WITHIN,
    Comparison,
    ManyComparison,
    MetricComparison,
    PointFunctions,
    dig,
    few,
    fmt_value,
)
from ..format import ns as fmt_ns
from ..format import p_value, plural, share, signed_pct
from ..store import Run


def _interval(iv: Interval, unit: str) -> str:
    if iv.n < 2:
        return fmt_value(iv.median, unit)
    return f"{fmt_value(iv.median, unit)} [{fmt_value(iv.low, unit)}–{fmt_value(iv.high, unit)}]"


def _change_cell(m: MetricComparison) -> str:
    text = signed_pct(m.change)
    if m.ratio_ci is not None:
        text += f" [{(m.ratio_ci[0] - 1) * 100:+.1f}, {(m.ratio_ci[1] - 1) * 100:+.1f}]"
    return text


_STYLE = {
    REGRESSION: "bold red",
    IMPROVEMENT: "bold green",
    WITHIN: "cyan",
    NOT_SIGNIFICANT: "dim",
    NOT_TESTABLE: "yellow",
}


def _verdict_cell(m: MetricComparison) -> Text:
    if m.verdict == NOT_TESTABLE:
        why = f"n={m.a.n}/{m.b.n}" if m.untestable_because == "few repetitions" else m.untestable_because
        return Text(f"not testable ({why})", style=_STYLE[NOT_TESTABLE])
    return Text(m.verdict, style=_STYLE[m.verdict])


def _table(
    title: str, rows: list[MetricComparison], c: Comparison, notes: list[str], with_group: bool = False
) -> Table:
    t = Table(title=Text(title, style="bold"), title_justify="left")
    if with_group:
        t.add_column("group")
    t.add_column("metric", no_wrap=True)
    t.add_column(f"A: run {c.a.id} median [CI]", justify="right", no_wrap=True)
    t.add_column(f"B: run {c.b.id} median [CI]", justify="right", no_wrap=True)
    t.add_column("change [CI]", justify="right", no_wrap=True)
    t.add_column("p", justify="right")
    t.add_column("p adj.", justify="right")
    t.add_column("verdict")
    t.add_column("note")
    for m in rows:
        marks = []
        for w in m.warnings:
            if w not in notes:
                notes.append(w)
            marks.append(str(notes.index(w) + 1))
        arrow = "↑" if m.metric.direction == HIGHER else "↓"
        cells = [Text(m.metric.group)] if with_group else []
        cells += [
            Text(f"{m.metric.label} {arrow}"),
            _interval(m.a, m.metric.unit),
            _interval(m.b, m.metric.unit),
            _change_cell(m),
            p_value(m.p),
            p_value(m.q),
            _verdict_cell(m),
            Text(",".join(marks), style="yellow"),
        ]
        t.add_row(*cells)
    return t


def _functions_table(pf: PointFunctions, c: Comparison) -> Table:
    """One point both runs sampled: its kernel functions that changed most."""
    alpha = 1 - c.confidence
    t = Table(
        title=Text(f"{pf.point} · kernel functions that changed most (sampled, self time per {pf.per})", style="bold"),
        title_justify="left",
        caption=f"samples: A {pf.a_samples}, B {pf.b_samples}; each time to the digits its samples carry (≈ 1/√n)",
        caption_justify="left",
    )
    t.add_column("function", no_wrap=True)
    t.add_column("callers")
    t.add_column(f"A: run {c.a.id}", justify="right", no_wrap=True)
    t.add_column(f"B: run {c.b.id}", justify="right", no_wrap=True)
    t.add_column("change", justify="right", no_wrap=True)
    t.add_column("samples A/B", justify="right")
    t.add_column("p adj.", justify="right")
    t.add_column("sampling error")
    for f in pf.changes:
        beyond = f.beyond_sampling_error(alpha)
        t.add_row(
            Text(f.name),
            Text(" ← ".join(f.callers[:2]), style="dim"),
            fmt_ns(f.a_ns, kstacks.digits(f.a_samples)),
            fmt_ns(f.b_ns, kstacks.digits(f.b_samples)),
            ("+" if f.delta_ns >= 0 else "−") + fmt_ns(abs(f.delta_ns), kstacks.digits(min(f.a_samples, f.b_samples))),
            f"{f.a_samples}/{f.b_samples}",
            p_value(f.q),
            Text("beyond it", style="bold") if beyond else Text("within it", style="dim"),
        )
    return t


def _run_line(label: str, r: Run) -> Text:
    m = r.machine or {}
    status = "" if r.status == "complete" else f" ({r.status})"
    return Text(
        f"{label}: run {r.id} {r.kind}{status} · {r.started} · {r.host} · "
        f"Linux {dig(m, 'kernel', 'release') or '?'} · {dig(m, 'cpu', 'model_name') or '?'}"
    )


def _short(v, limit: int = 70) -> str:
    text = v if isinstance(v, str) else json.dumps(v, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


MAX_DIFF_ROWS = 20


def _context(console: Console, c: Comparison) -> None:
    """What the two runs are, and how they differ besides their figures:
    the machine and kernel, the parameters, the load before each."""
    console.print(Text(f"compare {c.kind} runs: B against A", style="bold"))
    console.print(_run_line("A", c.a))
    console.print(_run_line("B", c.b))

    if c.machine_diff:
        t = Table(title=Text("machine and kernel: what differs", style="bold"), title_justify="left")
        t.add_column("")
        t.add_column(f"A: run {c.a.id}")
        t.add_column(f"B: run {c.b.id}")
        for d in c.machine_diff[:MAX_DIFF_ROWS]:
            t.add_row(Text(d["key"]), Text(_short(d["a"])), Text(_short(d["b"])))
        console.print(t)
        if len(c.machine_diff) > MAX_DIFF_ROWS:
            console.print(Text(f"  … and {len(c.machine_diff) - MAX_DIFF_ROWS} more (--json lists all)", style="dim"))
    else:
        console.print(Text("machine and kernel: the same recorded metadata in both runs", style="dim"))
    if c.params_diff:
        console.print(
            Text(
                "parameters that differ: "
                + "; ".join(f"{d['key']} {_short(d['a'], 30)} vs {_short(d['b'], 30)}" for d in c.params_diff),
                style="yellow",
            )
        )
    la, lb = c.load["a"], c.load["b"]
    if la.get("busy_share") is not None or lb.get("busy_share") is not None:

        def busy(x):
            return "?" if x.get("busy_share") is None else f"{x['busy_share']:.0%} busy"

        console.print(Text(f"load just before the run: A {busy(la)}, B {busy(lb)}", style="dim"))


def _findings_table(c: Comparison) -> Table:
    """A study both runs re-ran, finding by finding: the changed verdicts first."""
    from .verdicts import VERDICT_STYLE

    changed = sum(1 for f in c.findings if f.changed)
    t = Table(
        title=Text(f"study {c.a.params.get('study')}, finding by finding: {plural(changed, 'verdict')} changed",
                   style="bold"),
        title_justify="left",
    )  # fmt: skip
    for col in ("finding", "the paper", f"A: run {c.a.id}", "", f"B: run {c.b.id}", ""):
        t.add_column(col)
    for f in c.findings:
        t.add_row(
            Text(f.measure),
            Text(f.paper),
            Text(_short(f.a_here, 40)),
            Text(f.a_verdict, style=VERDICT_STYLE.get(f.a_verdict, "")),
            Text(_short(f.b_here, 40)),
            Text(f.b_verdict + (" (changed)" if f.changed else ""), style=VERDICT_STYLE.get(f.b_verdict, "")),
        )
    return t


def render(console: Console, comparison: Comparison) -> None:
    c = comparison
    _context(console, c)

    notes: list[str] = []
    flagged = c.regressions + c.improvements
    if flagged and len(flagged) < len(c.metrics):
        flagged.sort(key=lambda m: (m.verdict != REGRESSION, -abs(m.change or 0)))
        console.print(
            _table(
                f"{plural(len(c.regressions), 'regression')}, {plural(len(c.improvements), 'improvement')} "
                f"beyond {share(c.threshold)}",
                flagged,
                c,
                notes,
                with_group=True,
            )
        )
    groups: dict[str, list[MetricComparison]] = {}
    for m in c.metrics:
        groups.setdefault(m.metric.group, []).append(m)
    for group, rows in groups.items():
        console.print(_table(group, rows, c, notes))
    for pf in c.functions:
        console.print(_functions_table(pf, c))
    if c.findings:
        console.print(_findings_table(c))
    for i, n in enumerate(notes, 1):
        console.print(Text(f"  {i}. {n}", style="yellow"))
    if c.only_a or c.only_b:
        for side, run, names in (("A", c.a, c.only_a), ("B", c.b, c.only_b)):
            if names:
                console.print(Text(f"only in {side} (run {run.id}), not compared: {few(names, 6)}", style="yellow"))

    counts = c.counts()
    console.print(
        Text(
            f"{len(c.metrics)} metric{'s' if len(c.metrics) != 1 else ''}: "
            + ", ".join(f"{n} {v}" for v, n in counts.items() if n),
            style="bold",
        )
    )
    if kinds.get(c.kind).repeated:  # one value a side: no test to miss, nothing to say why
        for why in ("few repetitions", "tied values", "identical values"):
            first = next((m for m in c.metrics if m.untestable_because == why), None)
            if first is not None:
                console.print(Text(first.reason, style="yellow"))
    console.print(
        Text(
            f"test: {c.test_description()}. median [CI]: {c.confidence:.0%} order-statistic interval "
            f"where the repetitions allow it; change [CI]: B/A − 1 with a {c.confidence:.0%} "
            f"percentile-bootstrap interval (≥ 5 repetitions each); ↑/↓: higher/lower is better",
            style="dim",
        )
    )
    for n in c.notes:
        console.print(Text(f"note: {n}", style="yellow"))


def render_many(console: Console, c: ManyComparison) -> None:
    """Runs B, C, … against baseline A: a row per metric, a column per run
    with its change and verdict (adjusted over every test of the table)."""

    def line(r: Run, label: str) -> Text:
        tags = " ".join(f"{k}={v}" for k, v in r.tags.items())
        kernel = dig(r.machine, "kernel", "release") or "?"
        return Text(f"{label}: run {r.id} · {r.started} · {r.host} · Linux {kernel}" + (f" · {tags}" if tags else ""))

    console.print(Text(f"compare {c.kind} runs: each against the baseline", style="bold"))
    console.print(line(c.baseline, "baseline"))
    for r in c.others:
        console.print(line(r, f"run {r.id}"))
    t = Table(title=f"change against run {c.baseline.id}; {share(c.threshold)} threshold; p adjusted over all "
              f"{plural(sum(1 for row in c.rows.values() for m in row if m is not None and m.p is not None), 'test')}",
              title_justify="left")  # fmt: skip
    t.add_column("metric")
    t.add_column(f"run {c.baseline.id}", justify="right")
    for r in c.others:
        t.add_column(f"run {r.id}", justify="right")
    for name, row in c.rows.items():
        first = next(m for m in row if m is not None)
        cells = [Text(name), Text(_interval(first.a, first.metric.unit))]
        for m in row:
            if m is None:
                cells.append(Text("–"))
                continue
            style = _STYLE.get(m.verdict, "")
            mark = {REGRESSION: " ▲", IMPROVEMENT: " ▼"}.get(m.verdict, "")
            if m.verdict == NOT_TESTABLE:
                cells.append(Text(f"{signed_pct(m.change)} (not testable)", style=style))
            else:
                cells.append(Text(f"{signed_pct(m.change)} {m.verdict}{mark}", style=style))
        t.add_row(*cells)
    console.print(t)
    for i, n in enumerate(c.notes, 1):
        console.print(Text(f"  {i}. {n}", style="yellow"))
