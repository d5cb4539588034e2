"""The `envs` section: per operation, a row per environment — p50, p99,
p99.9 and throughput, each with its ratio to native and whether the rounds
tell it apart — and how each environment was made."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..analysis.envs import FIGURES, NATIVE, Comparison, EnvsSummary
from ..analysis.histogram import TAIL_RULE
from ..envs import made
from ..format import ns, ratio, si

UNTOLD, UNTESTED = "~", "?"
UNTESTED_MEANS = "untested (one round, or rounds too short to tell the percentile)"
NO_RATIO = "n/a"  # with its reason below the table


def no_ratio_reasons(rows) -> list[str]:
    """Why ratios are not given, each reason once, naming the figures it takes."""
    reasons: dict[str, list[str]] = {}
    for r in rows:
        for fig, c in r.vs_native.items():
            if c.why:
                reasons.setdefault(c.why, []).append(f"{r.env} {fig}")
    return [f"{NO_RATIO} ({', '.join(where)}): {why}" for why, where in reasons.items()]


def ratio_cell(c: Comparison | None) -> Text:
    if c is None:
        return Text("–")
    if c.ratio is None:
        return Text(NO_RATIO, style="dim")
    text = ratio(c.ratio)
    if c.p is None:
        return Text(f"{text} {UNTESTED}", style="dim")
    return Text(text, style="bold") if c.told else Text(f"{text} {UNTOLD}", style="dim")


def figure_text(figure: str, value: float | None) -> str:
    """A figure of FIGURES as printed: a latency, or the throughput; – for
    a percentile too few operations tell."""
    if value is None:
        return "–"
    return si(value) if figure == "ops/s" else ns(value)


def untold_line(rows) -> str | None:
    """What a – among the percentiles means, where there is one."""
    if any(v is None for r in rows for v in r.figures.values()):
        return f"– where the operations cannot tell the percentile: {TAIL_RULE}"
    return None


def made_line(label: str, env: dict) -> str:
    """How an environment was made, with its kernel and what its timings are worth."""
    if env.get("name", label) == NATIVE:
        return f"{label}: the host itself"
    line = f"{label}: {made(env)}"
    kernel = (env.get("inside") or {}).get("kernel", {}).get("release") or env.get("kernel")
    if kernel:
        line += f", kernel {kernel}"
    return line + (f" — {env['note']}" if env.get("note") else "")


def show(console: Console, run, s: EnvsSummary) -> None:
    if not s.operations:
        console.print("no complete round in this run")
    for op, rows in s.operations.items():
        t = Table(title=f"[bold]{op}[/] per operation, by environment", title_justify="left")
        t.add_column("environment")
        t.add_column("n", justify="right")
        t.add_column("rounds", justify="right")
        for f in FIGURES:
            t.add_column(f, justify="right")
            t.add_column("vs native", justify="right")
        for r in rows:
            cells: list = [Text(r.env), f"{r.count:,}", str(r.rounds)]
            for f in FIGURES:
                cells += [figure_text(f, r.figures[f]), ratio_cell(r.vs_native.get(f)) if r.env != NATIVE else Text("")]
            t.add_row(*cells)
        console.print(t)
        for line in no_ratio_reasons(rows):
            console.print(Text(f"  {line}", style="yellow"))
    for label in s.envs:
        env = s.environments.get(label, {})
        style = "yellow" if env.get("note") else "dim"
        console.print(Text(f"  {made_line(label, env)}", style=style))
    for w in s.warnings:
        console.print(Text(f"  {w}", style="yellow"))
    if line := untold_line(r for rows in s.operations.values() for r in rows):
        console.print(Text(line, style="dim"))
    console.print(
        Text(
            "p50/p99/p99.9 = percentiles of every round's operations pooled · ops/s = median round's throughput, "
            "all workers · vs native = ratio to native's figure; bold: the rounds tell the two apart (Mann-Whitney "
            f"on the per-round figures, false discovery rate 5 % over the run); {UNTOLD}: they cannot; "
            f"{UNTESTED}: {UNTESTED_MEANS}",
            style="dim",
        )
    )
