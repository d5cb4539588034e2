"""A study's findings beside this kernel's, in the terminal: the findings
measured here, each with the paper's figure, this kernel's, the verdict and
why; the rest counted by what they would need; and what the study says a
reader needs beside them (studies/verdict.py makes the verdicts)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from .. import kinds
from ..format import plural

# How a finding's verdict is coloured.
VERDICT_STYLE = {"agrees": "green", "differs": "red", "cannot tell here": "yellow"}


def show(console: Console, run, rows: list[dict]) -> None:
    study = kinds.study(run.params["study"])
    measured = [r for r in rows if r["here"] != "not measured"]
    t = Table(title=f"[bold]{study.name}[/]: the paper and this kernel", title_justify="left")
    for col in ("finding", "the paper", "this kernel", "verdict", "why"):
        t.add_column(col)
    for r in measured:
        t.add_row(Text(r["measure"]), Text(r["paper"]), Text(r["here"]),
                  Text(r["verdict"], style=VERDICT_STYLE.get(r["verdict"], "")), Text(r["reason"]))  # fmt: skip
    console.print(t)
    rest: dict[str, int] = {}
    for r in rows:
        if r["here"] == "not measured":
            rest[r["reason"]] = rest.get(r["reason"], 0) + 1
    for why, n in sorted(rest.items(), key=lambda kv: -kv[1]):
        console.print(Text(f"  {plural(n, 'more finding')}: cannot tell here — {why}", style="yellow"))
    for line in study.load("context")(run) if study.context else []:
        console.print(Text(f"  {line}", style="dim"))


def show_across(console: Console, row: dict, not_run: list[str]) -> None:
    """The finding that needs several kernels, judged across the study's
    runs (study kernels --kernels), and the kernels that could not be run."""
    kernels = ", ".join(row.get("kernels") or []) or "none run"
    t = Table(title=f"[bold]kernels[/]: the paper and these kernels ({kernels})", title_justify="left")
    for col in ("finding", "the paper", "these kernels", "verdict", "why"):
        t.add_column(col)
    t.add_row(Text(row["measure"]), Text(row["paper"]), Text(row["here"]),
              Text(row["verdict"], style=VERDICT_STYLE.get(row["verdict"], "")), Text(row["reason"]))  # fmt: skip
    console.print(t)
    for line in not_run:
        console.print(Text(f"  not run: {line}", style="yellow"))
