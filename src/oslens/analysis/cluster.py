"""What a `cluster` run found, for every measure (cluster_measures/): the
job's ranks and hosts, the outlier rule each measure applies to its own
figure, what differs between the nodes, and the notes.

Outliers: a rank is one when its figure exceeds the median of the other
ranks by more than K times their spread, the spread being their median
absolute deviation (× 1.4826, a standard deviation under normality) but
never less than MIN_SPREAD of that median: identical quiet nodes do not
make every wiggle an outlier. A verdict needs MIN_RANKS ranks: against a
single other rank there is no spread, and any gap beyond MIN_SPREAD made
the higher one an outlier. Each rank's threshold is kept, so that what is
quoted is what the rule compared."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..cluster_measures import MEASURES, measure
from ..format import json_safe, plural
from ..records import Node, by_rank, nodes, rank_host
from .metrics import Metrics

K = 3.0
MIN_SPREAD = 0.10
MIN_RANKS = 3
MAD_SCALE = 1.4826


@dataclass
class ClusterSummary:
    measure: str
    hosts: dict[int, str]  # rank -> its host
    node_diff: dict[str, dict[str, str]]  # fact -> host -> value, only facts that differ
    ranks: list = field(default_factory=list)  # a row per rank, where the measure is noise (cluster_measures.noise)
    data: Any = None  # the measure's own results
    rule: str = ""  # the outlier rule it applied
    notes: list[str] = field(default_factory=list)

    @property
    def host_count(self) -> int:
        return len(set(self.hosts.values()))

    def to_dict(self) -> dict:
        return json_safe(
            {
                "measure": self.measure,
                "ranks": [{k: v for k, v in vars(r).items() if k != "by_cause"} for r in self.ranks],
                "outlier_rule": self.rule,
                "node_diff": self.node_diff,
                "hosts": self.host_count,
                **{name: (self.data if name == self.measure else None) for name in MEASURES if name != "noise"},
                "notes": self.notes,
            }
        )


def thresholds(values: dict[int, float], k: float = K) -> dict[int, float]:
    """Each key's threshold: the others' median plus k spreads, the value
    beyond which it is an outlier. None for a key with fewer than
    MIN_RANKS - 1 others to compare with."""
    out = {}
    for key in values:
        others = np.array([x for o, x in values.items() if o != key and np.isfinite(x)])
        if len(others) < MIN_RANKS - 1:
            continue
        med = float(np.median(others))
        spread = max(MAD_SCALE * float(np.median(np.abs(others - med))), MIN_SPREAD * abs(med))
        out[key] = med + k * spread
    return out


def outliers(values: dict[int, float], k: float = K) -> set[int]:
    """The keys whose value is beyond their threshold (thresholds)."""
    limits = thresholds(values, k)
    return {key for key, v in values.items() if key in limits and np.isfinite(v) and v > limits[key]}


def flag(rows: list[dict], figure: str, threshold: str = "threshold", lower_is_worse: bool = False) -> None:
    """Mark each row (a dict with `rank`) an outlier or not by its `figure`,
    keeping the threshold it was compared with under `threshold`; a figure
    that is lower when worse (a rate) is compared negated."""
    sign = -1.0 if lower_is_worse else 1.0
    values = {r["rank"]: sign * r[figure] for r in rows if r.get(figure) is not None and np.isfinite(r[figure])}
    flagged, limits = outliers(values), thresholds(values)
    for r in rows:
        r["outlier"] = r["rank"] in flagged
        r[threshold] = sign * limits[r["rank"]] if r["rank"] in limits else None


def rule(what: str, above: bool = True) -> str:
    side = "above" if above else "below"
    sign = "+" if above else "−"
    return (
        f"{what} {side} the other ranks' median {sign} {K:g} × max(MAD × {MAD_SCALE}, {MIN_SPREAD:.0%} of that median),"
        f" given {MIN_RANKS} ranks at least"
    )


def too_few(s: ClusterSummary, n: int) -> None:
    """Notes a job too small for an outlier verdict: n ranks judged."""
    if n < MIN_RANKS:
        others = MIN_RANKS - 1
        s.notes.append(
            f"{plural(n, 'rank')}: too few for an outlier verdict, which compares a rank with at least {others} others"
        )


def node_facts(n: Node) -> dict[str, str]:
    """What node_diff compares of a node, by the name it shows; governors
    and IRQ placement summarised."""
    irqs = n.irq_affinity
    return {
        "kernel": str(n.kernel),
        "kernel_version": str(n.kernel_version),
        "cmdline": str(n.cmdline),
        "thp": str(n.thp),
        "thp_defrag": str(n.thp_defrag),
        "clocksource": str(n.clocksource),
        "isolated": str(n.isolated),
        "nohz_full": str(n.nohz_full),
        "governor": ",".join(sorted(set(n.governor.values()))) or "none (no cpufreq)",
        "irq placement": "; ".join(
            f"{cpus}: {sum(1 for v in irqs.values() if v == cpus)} IRQs" for cpus in sorted(set(irqs.values()))
        ),
    }


def node_diff(records: list[dict]) -> dict[str, dict[str, str]]:
    """The node facts (one `node` record per host) that are not the same on
    every host, per host."""
    facts: dict[str, dict[str, str]] = defaultdict(dict)
    for host, n in nodes(records).items():
        for key, value in node_facts(n).items():
            facts[key][host] = value
    return {k: v for k, v in facts.items() if len(set(v.values())) > 1}


def measure_of(run) -> str:
    return (run.params or {}).get("measure", "noise")


def analyze(run, records: list[dict]) -> ClusterSummary:
    ranks = by_rank(records)
    s = ClusterSummary(measure_of(run), {rank: rank_host(recs) for rank, recs in ranks.items()}, node_diff(records))
    measure(s.measure).summarize(s, ranks, records)
    return s


def metrics(run, records: list[dict]) -> Metrics:
    s = analyze(run, records)
    out = Metrics()
    measure(s.measure).metrics(s, out)
    return out
