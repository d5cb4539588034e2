"""A `serve` run in the terminal: the servers under load side by side, what
ran where, then each server's profile as `oslens profile` shows it, and a
study's verdicts when the run is one."""

from __future__ import annotations

from rich.console import Console
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from ..analysis.serve import describe, job_results, rep_notes
from ..format import count, ns, rate, share
from . import verdicts


def _ms(x: float | None) -> str:
    return ns(x * 1e6) if x is not None else "–"


def render(console: Console, summary: dict) -> None:
    t = Table(title="[bold]Servers under load[/] (median of the repetitions; a job: its whole run)",
              title_justify="left")  # fmt: skip
    for col in ("server", "stands for", "requests/s", "errors", "p50", "p99", "kernel share", "syscalls/s",
                "switches/s (vol · invol)", "faults/s", "lock wait"):  # fmt: skip
        t.add_column(col, justify="left" if col in ("server", "stands for") else "right")
    for s in summary["servers"]:
        f, reps = s["figures"], s["reps"]
        lat = reps[len(reps) // 2]["latency_ms"] if reps else {}
        t.add_row(
            Text(s["label"]),
            Text(s["stands_for"]),
            rate(f.get("per_s")),
            Text(count(sum(r["errors"] or 0 for r in reps)), style="" if s["answered"] else "red"),
            _ms(lat.get("p50")),
            _ms(lat.get("p99")),
            share(f.get("kernel_share")),
            rate(f.get("syscalls_per_s")),
            f"{rate(f.get('voluntary_per_s'))} · {rate(f.get('involuntary_per_s'))}",
            rate(f.get("faults_per_s")),
            ns(f.get("lock_wait_ns")),
        )
    console.print(t)
    for s in summary["servers"]:
        console.print(Text(f"  {describe(s)}", style="dim"))
        if results := job_results(s):
            console.print(Text(f"  {results}"))
        for text, level in rep_notes(s):
            console.print(Text(f"  {text}", style={"note": "dim", "warning": "yellow", "failure": "red"}[level]))


def show(console: Console, run, summary: dict) -> None:
    from ..profile.summary import render as render_profile

    render(console, summary)
    if summary.get("study"):
        console.print()
        verdicts.show(console, run, summary["study"])
    for s in summary["servers"]:
        if s["profile"] is None:
            continue
        console.print()
        whole = "its whole run" if s["job"] else "under load"
        console.print(Rule(f"{s['label']}: its profile, {whole} (last repetition)"))
        render_profile(console, s["profile"])
