"""What `oslens cluster` measures on every rank of a job: one module per
measure, one entry in MEASURES, and its subcommand in commands/cluster.py.

A run of kind `cluster` is one measure taken on every rank at once. The
layers of the kind (analysis/cluster.py, report/cluster.py,
report/html/cluster.py, frames/cluster.py) do what every measure shares —
the job's ranks and hosts, the outlier rule, the node facts that differ,
the notes — and ask the measure's module for the rest:

    FRAMES     the frames it has, its main one first
    COLUMNS    {frame: {column: (dtype, meaning)}} of the frames it makes
    summarize(summary, ranks, records)
               fills summary.ranks (a row per rank, where it measures
               noise), summary.data (its own results: what `show --json`
               has under the measure's name) and summary.rule
    tables(summary, every) -> [RankTable]
               the terminal's and the HTML's tables (every=False: with many
               ranks, the outliers only)
    lines(summary) -> [str]
               a sentence per outlier rank, and what a reader needs beside
               the tables
    frame_rows(summary, records) -> {frame: [row]}
    figures(rd, summary, frames) -> [report.html.page.Figure]
    metrics(summary, out: analysis.metrics.Metrics)
               what `compare` can test

Modules are imported only when a cluster run is analysed or the cluster
kind's frames are described (frames/cluster.py gathers their COLUMNS), so
listing runs loads none of them."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from types import ModuleType

MEASURES = {
    "noise": ".noise",
    "bsp": ".bsp",
    "latency": ".latency",
    "scale": ".scale",
    "timerlat": ".timerlat",
}


@dataclass
class RankTable:
    """One table of a measure: a title (the HTML puts the run's label before
    it), its columns, its rows (text) and what to read under it."""

    title: str
    cols: list[str]
    rows: list[list[str]]
    caption: str = ""
    left: set[str] = field(default_factory=lambda: {"host", ""})  # columns of text, not figures
    judged: bool = True  # its rows are ranks the outlier rule judged (the HTML quotes the rule under it)


def measure(name: str) -> ModuleType:
    """The module of a measure (analysis.cluster: a run stored before
    `measure` was kept is noise)."""
    if name not in MEASURES:
        from ..errors import UsageError

        raise UsageError(f"a cluster run of '{name}', which this oslens does not know (it knows {', '.join(MEASURES)})")
    return importlib.import_module(MEASURES[name], __name__)
