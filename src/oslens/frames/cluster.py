"""The frames of a `cluster` run; the main one is the measure's own
(`ranks` for noise and bsp, `latency`, `scale`, `timerlat`), each declared
by its measure's module (cluster_measures/).

`ranks`: one row per rank of the job: its host, CPUs, noise share,
detour rate, longest and 99th-percentile detour, top cause, and whether it
is an outlier (the rule is in `show --json`). `steps` (cluster bsp): one
row per rank and measured step: its work time, its wait in the collective,
its detour time, and whether it was the last to arrive. `latency` (cluster
latency): one row per rank and operation, its percentiles. `scale` (cluster
scale): one row per rank, probe and worker count. `timerlat` (cluster
timerlat): one row per rank, its threads' wake-up latency and the worst
one's cause. Times are ns.
"""

from __future__ import annotations

from ..cluster_measures import MEASURES, measure
from . import describe, table

COLUMNS = {name: spec for m in MEASURES for name, spec in measure(m).COLUMNS.items()}
__doc__ += describe(COLUMNS)


def frames(run, records: list[dict]) -> dict:
    from ..analysis.cluster import analyze

    s = analyze(run, records)
    m = measure(s.measure)
    built = m.frame_rows(s, records)
    return {name: table(run.id, built[name], COLUMNS[name]) for name in m.FRAMES}
