"""The terminal tables of a `cluster` run: the measure's own tables
(cluster_measures/), then the outlier rule, a sentence per outlier rank,
what differs between the nodes, and the notes."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..cluster_measures import RankTable, measure

# Beyond this many ranks, the terminal shows the outlier ranks and the spread
# across ranks, not a row per rank (`export` and `show --json` have them all).
MAX_ROWS = 32


def shown(rows: list[dict], every: bool) -> list[dict]:
    """The rows a table shows: all of them, or, with every=False and more
    than MAX_ROWS ranks, the outliers."""
    return rows if every or len(rows) <= MAX_ROWS else [r for r in rows if r["outlier"]]


def _print_table(console: Console, t: RankTable) -> None:
    table = Table(title=t.title, box=None)
    for col in t.cols:
        table.add_column(col, justify="left" if col in t.left else "right")
    for row in t.rows:
        table.add_row(*(Text(x) for x in row))
    console.print(table)
    if t.caption:
        console.print(t.caption, style="dim", highlight=False, markup=False)


def show(console: Console, run, summary) -> None:
    s = summary
    m = measure(s.measure)
    for t in m.tables(s, every=False):
        _print_table(console, t)
    console.print(f"outlier: {s.rule}", style="dim", highlight=False, markup=False)
    for line in m.lines(s):
        console.print(line, highlight=False, markup=False)
    if s.node_diff:
        console.print("what differs between the nodes:", highlight=False)
        for fact, hosts in s.node_diff.items():
            console.print(
                f"  {fact}: " + "; ".join(f"{h}: {v}" for h, v in hosts.items()), highlight=False, markup=False
            )
    elif s.host_count > 1:
        console.print("the nodes' kernel, command line, THP, clock source, governors and IRQ placement are the same")
    for n in s.notes:
        console.print(n, style="yellow", highlight=False, markup=False)
