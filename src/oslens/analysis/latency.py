"""What a `latency` run found, from its stored records alone: per operation
the merged histogram over workers and repetitions, its percentiles, the
cost of timing itself (the null probe), and the variability buckets of the
kernel-variability study."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from ..format import plural
from ..records import by_context
from .histogram import TAIL_RULE, Histogram, merge_all, untold
from .metrics import LOWER, Metrics
from .stats import SPREAD_LIMIT, relative_spread

QUANTILES = {"p50": 50, "p90": 90, "p99": 99, "p99.9": 99.9, "p99.99": 99.99}
# Upper bounds of the variability buckets, in ns, and their labels.
BUCKETS = ((1e3, "≤1µs"), (1e4, "≤10µs"), (1e5, "≤100µs"), (1e6, "≤1ms"), (1e7, "≤10ms"))
ALONE = "alone"


@dataclass
class OpLatency:
    probe: str
    variant: str
    phase: str  # "alone" or "with <competitor>"
    hist: Histogram
    reps: int
    workers: int
    cycles_per_ns: float | None  # TSC ticks per ns, where the TSC was the clock
    rep_p50_ns: list[float]
    warnings: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.probe if self.variant == "default" else f"{self.probe}:{self.variant}"

    def q(self, label: str) -> float:
        """The percentile, NaN where the sample cannot tell it (TAIL_RULE)."""
        return float(self.hist.told_percentiles([QUANTILES[label]])[0])

    def absent(self) -> dict[str, str]:
        """The percentiles not given, each with why."""
        n = self.hist.count
        return {k: untold(k, q, n) for k, q in QUANTILES.items() if self.q(k) != self.q(k)}

    @property
    def max_ns(self) -> float:
        """The slowest operation, NaN when none was timed (not 0 ns)."""
        return self.hist.max_ns if self.hist.count else float("nan")

    def to_dict(self) -> dict:
        timed = self.hist.count > 0
        d = {
            "probe": self.probe,
            "variant": self.variant,
            "phase": self.phase,
            "count": self.hist.count,
            "reps": self.reps,
            "workers": self.workers,
            "min_ns": self.hist.min_ns if timed else None,
            "max_ns": self.hist.max_ns if timed else None,
            "mean_ns": self.hist.mean_ns if timed else None,
            "std_ns": self.hist.std_ns if self.hist.count > 1 else None,
            "rep_p50_ns": self.rep_p50_ns,
            "warnings": self.warnings,
        }
        d.update({f"{k}_ns": _finite(self.q(k)) for k in QUANTILES})
        d["absent_percentiles"] = self.absent()
        if self.cycles_per_ns:
            d.update({f"{k}_cycles": _finite(self.q(k) * self.cycles_per_ns) for k in QUANTILES})
            d["mean_cycles"] = self.hist.mean_ns * self.cycles_per_ns if timed else None
        return d


def _finite(x: float) -> float | None:
    return x if x == x else None


@dataclass
class LatencySummary:
    ops: list[OpLatency]  # the catalogue, in run order
    floor: dict[str, OpLatency]  # phase -> the null probe: timing overhead
    phases: list[str]
    study: list[dict] | None = None  # `oslens study NAME`: the paper's findings beside what was measured

    def variability(self, phase: str) -> dict[str, dict[str, float | None]]:
        """Share of operations whose p50 (p99) falls in each cumulative
        bucket, among those whose sample tells that percentile (`operations`);
        None where none does."""
        ops = [o for o in self.ops if o.phase == phase]
        out = {}
        for q in ("p50", "p99"):
            vals = np.array([v for v in (o.q(q) for o in ops) if v == v])
            row: dict = {label: float(np.mean(vals <= bound)) if len(vals) else None for bound, label in BUCKETS}
            row[">10ms"] = float(np.mean(vals > BUCKETS[-1][0])) if len(vals) else None
            row["operations"] = len(vals)
            out[q] = row
        return out

    def to_dict(self) -> dict:
        return {
            "phases": self.phases,
            "percentile_rule": TAIL_RULE,
            "operations": [o.to_dict() for o in self.ops],
            "timing_overhead": {p: o.to_dict() for p, o in self.floor.items()},
            "variability": {p: self.variability(p) for p in self.phases},
        } | ({"study": self.study} if self.study is not None else {})


def phase_of(context: dict | None) -> str:
    """'alone', or 'with P:V on CPUs …' for records after a competition context."""
    c = (context or {}).get("competition")
    if not c:
        return ALONE
    return f"with {c['probe']}:{c['variant']} on CPUs {','.join(map(str, c['cpus']))}"


def by_phase(records: list[dict]) -> dict[str, list[dict]]:
    """The records of each phase (alone, with each competitor), in order."""
    phases: dict[str, list[dict]] = {}
    for context, recs in by_context(records):
        phases.setdefault(phase_of(context), []).extend(recs)
    return phases


def summarize(records: list[dict]) -> LatencySummary:
    groups: dict = defaultdict(lambda: defaultdict(list))  # key -> rep -> [Histogram]
    meta: dict = {}
    context, header, phases = None, None, []
    for r in records:
        t = r.get("type")
        if t == "context":
            context = r
        elif t == "header":
            header = r
        elif t == "hist" and header is not None:
            phase = phase_of(context)
            if phase not in phases:
                phases.append(phase)
            key = (r["probe"], r["variant"], phase)
            groups[key][r["rep"]].append(Histogram.from_record(r["hist"]))
            tsc_hz = header["clock"].get("tsc_hz") or 0
            meta[key] = (header["workers"], tsc_hz / 1e9 if header["clock"]["source"] == "tsc" else None)
    ops, floor = [], {}
    for key, by_rep in groups.items():
        probe, variant, phase = key
        per_rep = [merge_all(hs) for _, hs in sorted(by_rep.items())]
        workers, cpn = meta[key]
        rep_p50 = [float(v) for h in per_rep for v in h.told_percentiles([50]) if v == v]
        op = OpLatency(probe, variant, phase, merge_all(per_rep), len(per_rep), workers, cpn, rep_p50)
        empty = sum(1 for hs in by_rep.values() for h in hs if h.count == 0)
        if empty:
            op.warnings.append(
                f"{plural(empty, 'worker-repetition')} timed no operation (the worker did not "
                "run during the measured window: an overloaded machine?)"
            )
        if len(rep_p50) > 1 and relative_spread(op.rep_p50_ns) > SPREAD_LIMIT:
            op.warnings.append(
                f"p50 spread {relative_spread(op.rep_p50_ns):.1%} across repetitions exceeds {SPREAD_LIMIT:.0%}"
            )
        if probe == "null":
            floor[phase] = op
        else:
            ops.append(op)
    return LatencySummary(ops, floor, phases)


def analyze(run, records: list[dict]) -> LatencySummary:
    summary = summarize(records)
    if run.params.get("study"):
        from .. import kinds

        summary.study = kinds.study(run.params["study"]).load("verdicts")(summary, run, records)
    return summary


LATENCY_QUANTILES = (("p50", 50.0), ("p99", 99.0), ("p99.9", 99.9))


def metrics(run, records: list[dict]) -> Metrics:
    by_key: dict = defaultdict(lambda: defaultdict(list))  # (probe, variant, phase) -> rep -> [Histogram]
    context = None
    for r in records:
        t = r.get("type")
        if t == "context":
            context = r
        elif t == "hist":
            by_key[(r["probe"], r["variant"], phase_of(context))][r["rep"]].append(Histogram.from_record(r["hist"]))
    out = Metrics()
    # an operation in the mix (every CPU issuing the whole catalogue) is another experiment than
    # the same operation issued alone: its metrics are named apart, so that compare never pairs them
    mixed = " in the mix" if (run.params or {}).get("mix") else ""
    for (probe, variant, phase), by_rep in by_key.items():
        per_rep = [h for h in (merge_all(hs) for _, hs in sorted(by_rep.items())) if h.count]
        op = f"{probe}:{variant}{mixed}"
        group = f"timing overhead ({op}), {phase}" if probe == "null" else phase
        for label, q in LATENCY_QUANTILES:
            out.add(
                f"latency/{op}/{phase}/{label} ns",
                [h.told_percentiles([q])[0] for h in per_rep],
                "ns",
                LOWER,
                group,
                f"{op} {label}",
            )
    return out
