"""An `envs` run: per operation and environment, the percentiles of the
merged histogram (every round, every worker) and the throughput, each
against native's: the ratio, and whether the rounds tell the two apart
(Mann-Whitney on the per-round figures, false discovery rate held at 5 %
over every test of the run). A ratio the rounds cannot tell from 1 is
printed as such, never as a difference. A percentile is given only where
the operations tell it (histogram.TAIL_RULE)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from ..format import ns
from ..records import complete_reps, invocations
from .histogram import TAIL_RULE, Histogram, merge_all, pooled_percentiles, samples_to_tell, untold
from .metrics import HIGHER, LOWER, Metrics
from .stats import adjust_fdr, bootstrap_ratio_ci, mann_whitney, median_ci

QUANTILES = (("p50", 50.0), ("p99", 99.0), ("p99.9", 99.9))
FIGURES = tuple(q for q, _ in QUANTILES) + ("ops/s",)
ALPHA = 0.05
NATIVE = "native"
# A latency within this many ticks of its environment's clock is known to
# no better than 1/TICKS (a guest's clock may be far coarser than the
# host's): a ratio to or of it would be the clocks' ratio, not the kernels'.
TICKS = 10


@dataclass
class Comparison:
    """One figure of an environment against native's; without a ratio,
    `why` says what it lacks."""

    ratio: float | None
    interval: tuple[float, float] | None  # of the ratio of medians over rounds
    p: float | None  # Mann-Whitney on the rounds' figures
    q: float | None = None  # p adjusted for the run's false discovery rate
    why: str | None = None  # why there is no ratio

    @property
    def told(self) -> bool:
        return self.q is not None and self.q < ALPHA

    def to_dict(self) -> dict:
        return {
            "ratio": self.ratio, "interval": self.interval, "p": self.p, "q": self.q, "told": self.told,
            "why": self.why,
        }  # fmt: skip


def unavailable(why: str) -> Comparison:
    return Comparison(None, None, None, why=why)


@dataclass
class EnvFigures:
    operation: str
    env: str
    count: int  # operations timed
    rounds: int
    # p50/p99/p99.9 (ns, every round's operations pooled; None where too few tell it), ops/s (median round)
    figures: dict[str, float | None]
    per_round: dict[str, list[float]]  # the same per round
    throughput_interval: tuple[float, float] | None
    tick_ns: float  # its clock's unit
    vs_native: dict[str, Comparison] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "operation": self.operation,
            "env": self.env,
            "count": self.count,
            "rounds": self.rounds,
            "figures": self.figures,
            "per_round": self.per_round,
            "throughput_interval": self.throughput_interval,
            "tick_ns": self.tick_ns,
            "vs_native": {k: c.to_dict() for k, c in self.vs_native.items()},
        }


@dataclass
class EnvsSummary:
    envs: list[str]
    environments: dict  # label -> how it was made (its describe())
    operations: dict[str, list[EnvFigures]]  # operation -> per environment, in --envs order
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "envs": self.envs,
            "environments": self.environments,
            "operations": {op: [f.to_dict() for f in rows] for op, rows in self.operations.items()},
            "percentile_rule": TAIL_RULE,
            "warnings": self.warnings,
        }


def rounds(records: list[dict]) -> dict[tuple[str, str], dict[int, tuple[Histogram, float]]]:
    """(operation, environment) -> round -> (its workers' merged histogram,
    their summed ops/s)."""
    out: dict = defaultdict(dict)
    for inv in invocations(records):
        ctx = inv.context or {}
        reps = complete_reps(inv)
        if "environment" not in ctx or not reps:
            continue  # a round cut short or failed is not a round
        hists = [Histogram.from_record(r["hist"]) for r in inv.of("hist") if r["rep"] in reps]
        if not hists:
            continue
        op = f"{inv.header['probe']['name']}:{inv.header['variant']}"
        rate = sum(w["ops_per_sec"] for ws in reps.values() for w in ws)
        out[(op, ctx["environment"])][ctx["round"]] = (merge_all(hists), rate)
    return out


def summarize(params: dict, records: list[dict]) -> EnvsSummary:
    envs = list(params.get("envs", []))
    by_key = rounds(records)
    operations: dict[str, list[EnvFigures]] = {}
    for op in dict.fromkeys(k[0] for k in by_key):
        rows = []
        for env in envs:
            per = by_key.get((op, env))
            if not per:
                continue
            hists = [h for h, _ in per.values() if h.count]
            if not hists:
                continue
            count = sum(h.count for h in hists)
            pooled = pooled_percentiles(hists, [x for _, x in QUANTILES])
            per_round = {q: told_per_round(hists, x) for q, x in QUANTILES}
            per_round["ops/s"] = [rate for _, rate in per.values()]
            # a percentile the operations cannot tell (TAIL_RULE) is not given
            figures = {q: float(v) if count >= samples_to_tell(x) else None for (q, x), v in zip(QUANTILES, pooled)}
            figures["ops/s"] = float(np.median(per_round["ops/s"]))
            ci = median_ci(per_round["ops/s"]) if len(per_round["ops/s"]) > 1 else None
            rows.append(
                EnvFigures(
                    op,
                    env,
                    count,
                    len(per),
                    figures,
                    per_round,
                    (ci.low, ci.high) if ci and ci.low == ci.low else None,
                    max(h.unit_ns for h in hists),
                )  # fmt: skip
            )
        operations[op] = rows
    _compare(operations)
    warnings = [f"{label} not measured: {why}" for label, why in params.get("skipped", {}).items()]
    missing = [e for e in envs if not any(r.env == e for rows in operations.values() for r in rows)]
    if missing:
        warnings.append(f"nothing measured in {', '.join(missing)}")
    if NATIVE not in envs:
        warnings.append("native was not measured: no ratios")
    return EnvsSummary(envs, params.get("environments", {}), operations, warnings)


def _compare(operations: dict[str, list[EnvFigures]]) -> None:
    tests = []
    for op, rows in operations.items():
        native = next((r for r in rows if r.env == NATIVE), None)
        for r in rows:
            if r is native:
                continue
            for fig in FIGURES:
                if native is None:
                    r.vs_native[fig] = unavailable(f"native has no complete round of {op}")
                    continue
                a, b = native.per_round[fig], r.per_round[fig]
                why = _unfit(native, fig) or _unfit(r, fig)
                if why:
                    r.vs_native[fig] = unavailable(why)
                    continue
                # rounds may each be too short to tell a percentile their pool tells: a ratio, untested
                p = mann_whitney(a, b).p if len(a) > 1 and len(b) > 1 else None
                interval = bootstrap_ratio_ci(a, b) if a and b else None
                r.vs_native[fig] = Comparison(r.figures[fig] / native.figures[fig], interval, p)
                if p is not None:
                    tests.append(r.vs_native[fig])
    for c, q in zip(tests, adjust_fdr([c.p for c in tests])):
        c.q = q


def told_per_round(hists: list[Histogram], x: float) -> list[float]:
    """Percentile x of each round that has the operations to tell it (TAIL_RULE)."""
    return [h.percentile(x) for h in hists if h.count >= samples_to_tell(x)]


def _unfit(row: EnvFigures, fig: str) -> str | None:
    """Why a figure cannot be one side of a ratio: a percentile too few
    operations tell, a latency too near its clock's tick (0 ns among them),
    a throughput of nothing."""
    value = row.figures[fig]
    if fig == "ops/s":
        return None if value > 0 else f"{row.env} completed no operations"
    if value is None:
        return f"{row.env}'s {untold(fig, dict(QUANTILES)[fig], row.count)}"
    if value < TICKS * row.tick_ns:
        return (
            f"{row.env}'s {fig} of {row.operation}, {ns(value)}, is within {TICKS} ticks of its clock "
            f"({ns(row.tick_ns)} each)"
        )
    return None


def analyze(run, records: list[dict]) -> EnvsSummary:
    return summarize(run.params, records)


def metrics(run, records: list[dict]) -> Metrics:
    out = Metrics()
    for (op, env), per in rounds(records).items():
        hists = [h for h, _ in per.values()]
        for q, x in QUANTILES:
            out.add(f"envs/{op}/{env}/{q} ns", told_per_round(hists, x), "ns", LOWER, f"{op} in {env}", q)
        out.add(
            f"envs/{op}/{env}/ops per s", [rate for _, rate in per.values()], "ops/s", HIGHER, f"{op} in {env}", "ops/s"
        )
    return out
