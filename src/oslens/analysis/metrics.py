"""What `compare` can test: a metric is one figure per repetition of a run
(ops/s per worker at 4 workers, p99 of getppid, share of CPU 3 lost to
noise, wall time on 8 CPUs, ...). Each kind of run names its metrics (its
`metrics` layer in kinds.py); compare.py holds the statistics."""

from __future__ import annotations

import math
from dataclasses import dataclass

HIGHER, LOWER = "higher_is_better", "lower_is_better"


@dataclass
class Metric:
    """One comparable figure of a run: a value per repetition."""

    name: str  # stable key, e.g. "scale/dup:default/process/2 workers/ops per s per worker"
    values: list[float]
    unit: str  # "ops/s", "/s", "ns", "s", "share"
    direction: str  # HIGHER or LOWER
    group: str = ""  # the table it belongs to, e.g. "dup:default (processes)"
    label: str = ""  # its row in that table, e.g. "2 workers · ops/s per worker"

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "values": self.values,
            "unit": self.unit,
            "direction": self.direction,
            "group": self.group,
            "label": self.label,
        }


class Metrics(dict):
    """Metrics by name; add() keeps only finite values and drops a metric with none."""

    def add(self, name: str, values, unit: str, direction: str, group: str, label: str) -> None:
        vals = [float(v) for v in values if v is not None and math.isfinite(v)]
        if vals:
            self[name] = Metric(name, vals, unit, direction, group, label)
