"""The HTML section of `cluster` runs: per run, the measure's figures of
the ranks side by side (drawn from the run's tidy frames, frames/cluster.py)
and its tables (cluster_measures/), then the outliers and what differs
between the nodes."""

from __future__ import annotations

import altair as alt

from ...analysis.cluster import analyze
from ...cluster_measures import measure
from ...frames.cluster import frames
from .page import Note, Section, Table

# The colour of an outlier rank, in every measure's figure.
OUTLIER = alt.Color("outlier:N", title="outlier", scale=alt.Scale(domain=[False, True], range=["#4c78a8", "#e45756"]))


def sections(runs) -> list[Section]:
    blocks = []
    for rd in runs:
        s = analyze(rd.run, rd.records)
        m = measure(s.measure)
        blocks += m.figures(rd, s, frames(rd.run, rd.records))
        for t in m.tables(s):
            caption = "; ".join(x for x in (t.caption, f"outlier: {s.rule}" if t.judged else "") if x)
            blocks.append(Table(f"{rd.label}: {t.title}", t.cols, t.rows, caption=caption))
        blocks += [Note(line, warning=True) for line in m.lines(s)]
        for fact, hosts in s.node_diff.items():
            blocks.append(Note(f"{fact} differs: " + "; ".join(f"{h}: {v}" for h, v in hosts.items())))
        blocks += [Note(n, warning=True) for n in s.notes]
    return [Section("Cluster", blocks)] if blocks else []
