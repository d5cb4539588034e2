"""What a `cluster` run found: a row per rank (its host, CPUs, noise share,
detour rate, longest detour, top causes), the outlier ranks by a stated
robust rule and what makes their nodes different; and, for `cluster bsp`,
the measured bulk-synchronous slowdown against the tail-at-scale prediction
from the same run's per-rank noise, with who made each step late and why.

Outliers: a rank is one when its noise share exceeds the median of the
other ranks by more than K times their spread, the spread being their
median absolute deviation (× 1.4826, a standard deviation under normality)
but never less than MIN_SPREAD of that median: identical quiet nodes do not
make every wiggle an outlier. A verdict needs MIN_RANKS ranks: against a
single other rank there is no spread, and any gap beyond MIN_SPREAD made
the higher one an outlier. Each rank's threshold is kept, so that what is
quoted is what the rule compared; and each rank's distinct causes, those
that took it clearly more time than they took any other rank (a thread on
its CPU alone), not its largest ones, which every rank may share.

The prediction (tail at scale) assumes what the model assumes: each rank's
delay in a step is an independent draw from that rank's own distribution
of delays per step (its detours in each step of this run), so a step lasts
the undisturbed work, plus the collective's own cost, plus the largest
draw. It is drawn by Monte Carlo, with a bootstrap interval over the steps.
Where measured and predicted differ, the model's assumptions are what to
question first: delays correlated across ranks (one hypervisor, one timer
tick), or a collective whose cost grows with the delay."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from ..format import json_safe, plural
from ..records import Bsp, Node, bsp_of, by_rank, nodes, rank_host, rank_info
from . import noise as noise_analysis
from .metrics import HIGHER, LOWER, Metrics

K = 3.0
MIN_SPREAD = 0.10
MIN_RANKS = 3
DISTINCT = 2.0  # a distinct cause took a rank more than this many times what it took any other
MAD_SCALE = 1.4826
DRAWS = 20_000
BOOTSTRAP = 200
CONFIDENCE = 0.95
CDF_POINTS = 101  # quantiles kept of the measured and predicted slowdowns (0, 1 %, … 100 %)


@dataclass
class RankRow:
    rank: int
    host: str
    cpus: list[int]
    share: float  # of CPU time lost to detours
    rate_per_s: float
    max_ns: float
    p99_ns: float
    causes: list[tuple[str, float]]  # top causes, share of this rank's detour time
    attribution: str
    outlier: bool = False
    threshold: float | None = None  # the noise share above which it is an outlier (None: too few ranks)
    # causes it has that the others do not: [cause, its detours, most detours on another rank, CPU share lost here]
    distinct: list[list] = field(default_factory=list)
    by_cause: dict[str, tuple[int, float]] = field(default_factory=dict, repr=False)  # cause -> (detours, ns/s)


@dataclass
class ClusterSummary:
    measure: str
    ranks: list[RankRow]
    rule: str
    node_diff: dict[str, dict[str, str]]  # fact -> host -> value, only facts that differ
    hosts: int
    bsp: dict | None = None
    latency: list[dict] | None = None  # cluster latency: per operation, its percentiles on each rank
    scale: list[dict] | None = None  # cluster scale: per probe, a curve per rank and the job's
    timerlat: list[dict] | None = None  # cluster timerlat: per rank, its threads' wake-up latency and worst cause
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return json_safe(
            {
                "measure": self.measure,
                "ranks": [{k: v for k, v in vars(r).items() if k != "by_cause"} for r in self.ranks],
                "outlier_rule": self.rule,
                "node_diff": self.node_diff,
                "hosts": self.hosts,
                "bsp": self.bsp,
                "latency": self.latency,
                "scale": self.scale,
                "timerlat": self.timerlat,
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


def too_few(n: int) -> str | None:
    """The note for a job too small for an outlier verdict."""
    if n >= MIN_RANKS:
        return None
    others = MIN_RANKS - 1
    return f"{plural(n, 'rank')}: too few for an outlier verdict, which compares a rank with at least {others} others"


def distinct_causes(rows: list[RankRow]) -> None:
    """Each rank's causes that took it more than DISTINCT times the time
    they took any other rank, by the time they took it beyond that rank."""
    for r in rows:
        out = []
        for cause, (count, rate) in r.by_cause.items():
            elsewhere = [o.by_cause.get(cause, (0, 0.0)) for o in rows if o is not r]
            most = max((x[1] for x in elsewhere), default=0.0)
            if elsewhere and rate > DISTINCT * most:
                out.append((rate - most, [cause, count, max(x[0] for x in elsewhere), rate / 1e9]))
        r.distinct = [x for _, x in sorted(out, key=lambda x: -x[0])[:3]]


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


def _rank_row(rank: int, recs: list[dict], bsp_: Bsp | None = None) -> RankRow:
    """A rank's row from its records: the detour probe's (noise), or its
    bsp loop's detours taken as the probe's."""
    info = rank_info(recs)
    s = noise_analysis.summarize([bsp_.as_detours(), *recs] if bsp_ else recs)
    runtime = sum(c.runtime_ns for c in s.cpus)
    total = sum(c.total_ns for c in s.cpus)
    count = sum(c.count for c in s.cpus)
    durations = np.array([d.duration_ns for d in s.detours], dtype=float)
    causes: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for d in s.detours:
        for c, ns in d.causes.items():
            causes[c] += ns
            counts[c] += 1
    kept = sum(causes.values())
    top = sorted(((c, ns / kept) for c, ns in causes.items()), key=lambda x: -x[1])[:3] if kept else []
    by_cause = {c: (counts[c], ns / (runtime / 1e9)) for c, ns in causes.items()} if runtime else {}
    return RankRow(
        rank,
        rank_host(recs),
        info.cpus if info else [],
        total / runtime if runtime else float("nan"),
        count / (runtime / 1e9) if runtime else float("nan"),
        max((c.max_ns for c in s.cpus), default=float("nan")),
        float(np.percentile(durations, 99, method="inverted_cdf")) if durations.size else float("nan"),
        top,
        s.attribution,
        by_cause=by_cause,
    )


def analyze(run, records: list[dict]) -> ClusterSummary:
    measure = (run.params or {}).get("measure", "noise")
    ranks = by_rank(records)
    rows, bsp_recs = [], {}
    if measure in ("latency", "scale", "timerlat"):
        return _per_rank_measure(measure, ranks, records)
    for rank, recs in ranks.items():
        if measure == "bsp":
            b = bsp_of(recs)
            if b is None:
                continue
            bsp_recs[rank] = b
            rows.append(_rank_row(rank, recs, b))
        else:
            rows.append(_rank_row(rank, recs))
    shares = {r.rank: r.share for r in rows}
    flagged, limits = outliers(shares), thresholds(shares)
    for r in rows:
        r.outlier, r.threshold = r.rank in flagged, limits.get(r.rank)
    distinct_causes(rows)
    summary = ClusterSummary(measure, rows, _rule("noise share"), node_diff(records), len({r.host for r in rows}))
    summary.notes += [n for n in [too_few(len(rows))] if n]
    if len(rows) < len(ranks):
        summary.notes.append(f"{len(ranks) - len(rows)} rank(s) sent no results")
    if measure == "bsp" and bsp_recs:
        summary.bsp = bsp(bsp_recs, ranks)
    return summary


def _rule(what: str, above: bool = True) -> str:
    side = "above" if above else "below"
    sign = "+" if above else "−"
    return (
        f"{what} {side} the other ranks' median {sign} {K:g} × max(MAD × {MAD_SCALE}, {MIN_SPREAD:.0%} of that median),"
        f" given {MIN_RANKS} ranks at least"
    )


def _per_rank_measure(measure: str, ranks: dict[int, list[dict]], records: list[dict]) -> ClusterSummary:
    """cluster latency, scale and timerlat: the single-node analysis of
    each rank's own records, then the ranks side by side."""
    hosts = {rank: rank_host(recs) for rank, recs in ranks.items()}
    s = ClusterSummary(measure, [], "", node_diff(records), len(set(hosts.values())))
    s.notes += [n for n in [too_few(len(ranks))] if n]
    if measure == "latency":
        s.latency, s.rule = _latency(ranks, hosts), _rule("p99")
    elif measure == "timerlat":
        s.timerlat, s.rule = _timerlat(ranks, hosts), _rule("p99 of the thread latency")
    else:
        s.scale, s.rule = _scale(ranks, hosts), _rule("per-worker rate at the most workers", above=False)
    return s


def _timerlat(ranks: dict[int, list[dict]], hosts: dict[int, str]) -> list[dict]:
    """Per rank: its threads' wake-ups pooled (every CPU's histogram), the
    worst one and what held it back (its trace), outliers by p99; an
    outlier's worst cause is what to read first (a thread on its CPU alone
    shows there, not in the other ranks' rows)."""
    from ..records import timerlat_records
    from . import timerlat as timerlat_analysis
    from .histogram import Histogram, merge_all

    rows = []
    for rank, recs in sorted(ranks.items()):
        mine = timerlat_records(recs)
        if not mine:
            continue
        s = timerlat_analysis.summarize(recs)
        pooled = merge_all(Histogram.from_record(r["thread"]) for r in mine)
        told = pooled.told_percentiles(timerlat_analysis.QS)
        worst = s.worst[0] if s.worst else None
        rows.append(
            {
                "rank": rank,
                "host": hosts[rank],
                "cpus": [c.cpu for c in s.cpus],
                "wakeups": pooled.count,
                "missed": sum(c.missed for c in s.cpus),
                "policy": sorted({c.policy for c in s.cpus}),
                **{f"p{q:g}_ns": float(v) for q, v in zip(timerlat_analysis.QS, told)},
                "max_ns": float(pooled.max_ns),
                "worst_cpu": worst.cpu if worst else None,
                "worst_cause": worst.cause if worst and worst.causes else None,
                # what held its worst wake-ups back most, together (one stall of the vCPU may be the
                # latest of them; a cause that holds many back leads here)
                "top_cause": next(iter(s.causes), None),
                "attribution": s.attribution,
            }
        )
    p99 = {r["rank"]: r["p99_ns"] for r in rows if r["wakeups"] and np.isfinite(r["p99_ns"])}
    flagged, limits = outliers(p99), thresholds(p99)
    for r in rows:
        r["outlier"], r["threshold_ns"] = r["rank"] in flagged, limits.get(r["rank"])
    return rows


def _latency(ranks: dict[int, list[dict]], hosts: dict[int, str]) -> list[dict]:
    from . import latency as latency_analysis

    per_op: dict[str, list[dict]] = defaultdict(list)
    for rank, recs in ranks.items():
        for op in latency_analysis.summarize(recs).ops:
            per_op[op.name].append(
                {
                    "rank": rank,
                    "host": hosts[rank],
                    "count": op.hist.count,
                    "workers": op.workers,
                    **{f"{q}_ns": op.q(q) for q in ("p50", "p99", "p99.9")},
                    "max_ns": op.hist.max_ns,
                    "warnings": op.warnings,
                }
            )
    out = []
    for name, rows in per_op.items():
        p99 = {r["rank"]: r["p99_ns"] for r in rows if r["count"]}
        flagged, limits = outliers(p99), thresholds(p99)
        for r in rows:
            r["outlier"], r["threshold_ns"] = r["rank"] in flagged, limits.get(r["rank"])
        timed = [r for r in rows if r["count"]]
        across = {
            f"{q}_ns": [float(np.min(v)), float(np.median(v)), float(np.max(v))]
            for q in ("p50", "p99", "p99.9")
            # a rank whose sample cannot tell the percentile (histogram.TAIL_RULE: NaN) has none to compare
            if (v := [r[f"{q}_ns"] for r in timed if r[f"{q}_ns"] == r[f"{q}_ns"]])
        }
        out.append({"operation": name, "ranks": rows, "across": across})
    return out


def _scale(ranks: dict[int, list[dict]], hosts: dict[int, str]) -> list[dict]:
    from . import scale as scale_analysis

    curves: dict[tuple, list[dict]] = defaultdict(list)
    for rank, recs in ranks.items():
        for series in scale_analysis.summarize(recs):
            curves[(series.probe, series.variant, series.mode)].append(
                {
                    "rank": rank,
                    "host": hosts[rank],
                    "workers": [p.workers for p in series.points],
                    "ops_per_s": [p.total.median for p in series.points],
                    "per_worker": [p.per_worker.median for p in series.points],
                    "efficiency": [p.efficiency for p in series.points],
                    "warnings": sorted({w for p in series.points for w in p.warnings}),
                }
            )
    out = []
    for (probe, variant, mode), rows in curves.items():
        counts = sorted(set.intersection(*(set(r["workers"]) for r in rows))) if rows else []
        job = [float(sum(r["ops_per_s"][r["workers"].index(n)] for r in rows)) for n in counts]  # the ranks ran at once
        last = {r["rank"]: r["per_worker"][-1] for r in rows if r["per_worker"]}
        # lower is worse: the rule on the negated rate
        negated = {k: -v for k, v in last.items()}
        flagged, limits = outliers(negated), thresholds(negated)
        for r in rows:
            r["outlier"] = r["rank"] in flagged
            r["threshold"] = -limits[r["rank"]] if r["rank"] in limits else None  # per-worker rate below which
        name = probe if variant == "default" else f"{probe}:{variant}"
        out.append({"probe": name, "mode": mode, "workers": counts, "job_ops_per_s": job, "ranks": rows})
    return out


def _step_delays(b: Bsp, detours: list) -> np.ndarray:
    """Detour time in each step of a rank, by where each detour ended."""
    starts = b.start_ns + np.array(b.step_start_ns, dtype=np.int64)
    out = np.zeros(len(starts))
    for d in detours:
        end = d.start_ns + d.duration_ns
        i = int(np.searchsorted(starts, end, side="right")) - 1
        if 0 <= i < len(out):
            out[i] += d.duration_ns
    return out


def bsp(recs: dict[int, Bsp], ranks: dict[int, list[dict]], seed: int = 1) -> dict:
    order = sorted(recs)
    k = min(len(recs[r].work_ns) for r in order)
    if k == 0:
        return {"steps": 0}
    work = np.array([recs[r].work_ns[:k] for r in order], dtype=float)
    wait = np.array([recs[r].wait_ns[:k] for r in order], dtype=float)
    keep = np.ones(k, dtype=bool)  # steps after bookkeeping are left out
    for r in order:
        for i in recs[r].synced:
            if i < k:
                keep[i] = False
    # Detours per rank and step, with causes where attributed (its trace's kernel events).
    detours, delay = {}, []
    for r in order:
        s = noise_analysis.summarize([recs[r].as_detours(), *ranks[r]])
        detours[r] = s
        delay.append(_step_delays(recs[r], s.detours)[:k])
    delay = np.array(delay)
    undisturbed = float(max(np.median(w[keep] - d[keep]) for w, d in zip(work, delay)))
    iteration = np.median(work + wait, axis=0)[keep]
    # The last to arrive waits only for the collective itself, so it is the
    # rank with the shortest wait: told without comparing clocks across
    # nodes, and without the skew with which the previous step released the
    # ranks (the longest work is not always the latest arrival).
    last = np.argmin(wait, axis=0)
    cost = float(np.median(wait.min(axis=0)[keep]))
    measured = iteration / undisturbed

    rng = np.random.default_rng(seed)
    d_keep = delay[:, keep]

    def predict(d: np.ndarray) -> np.ndarray:
        draws = np.stack([rng.choice(row, DRAWS) for row in d])
        return (undisturbed + cost + draws.max(axis=0)) / undisturbed

    predicted = predict(d_keep)
    boot = []
    for _ in range(BOOTSTRAP):
        idx = rng.integers(0, d_keep.shape[1], d_keep.shape[1])
        boot.append(float(np.mean(predict(d_keep[:, idx]))))
    lo, hi = np.quantile(boot, [(1 - CONFIDENCE) / 2, (1 + CONFIDENCE) / 2])

    def stats(x: np.ndarray) -> dict:
        return {
            "mean": float(np.mean(x)),
            "median": float(np.median(x)),
            "p99": float(np.quantile(x, 0.99, method="inverted_cdf")),
            "max": float(np.max(x)),
        }

    # Who made the steps late, and with what.
    lasts = last[keep]
    hit = d_keep.max(axis=0) > 0.1 * undisturbed  # steps some rank lost ≥ 10 % of a step in
    late = []
    for pos, r in enumerate(order):
        mine = lasts == pos
        causes: dict[str, float] = defaultdict(float)
        steps = set(np.flatnonzero(keep)[mine].tolist())
        starts = recs[r].start_ns + np.array(recs[r].step_start_ns[:k], dtype=np.int64)
        # untraced (--no-bpf, or tracing unavailable), a detour has no
        # causes: it is not one the trace could not explain
        traced = detours[r].attribution == "bpf"
        for d in detours[r].detours if traced else ():
            i = int(np.searchsorted(starts, d.start_ns + d.duration_ns, side="right")) - 1
            if i in steps:
                for c, ns in (d.causes or {noise_analysis.UNEXPLAINED: d.duration_ns}).items():
                    causes[c] += ns
        total = sum(causes.values())
        hit_here = hit & (d_keep.argmax(axis=0) == pos)
        late.append(
            {
                "rank": r,
                "host": recs[r].host,
                "last_share": float(np.mean(mine)),
                "steps_hit": int(hit_here.sum()),
                "last_when_hit": float(np.mean(mine[hit_here])) if hit_here.any() else None,
                "causes": sorted(((c, ns / total) for c, ns in causes.items()), key=lambda x: -x[1])[:3]
                if total
                else [],
                "attribution": detours[r].attribution,
            }
        )
    mean_pred = float(np.mean(predicted))
    q = np.linspace(0, 1, CDF_POINTS)
    return {
        "steps": int(keep.sum()),
        "steps_left_out": int((~keep).sum()),
        "compute_us": recs[order[0]].compute_us,
        "collective": recs[order[0]].collective,
        "undisturbed_ns": undisturbed,
        "collective_ns": cost,
        "measured": stats(measured),
        "predicted": {**stats(predicted), "mean_interval": [float(lo), float(hi)]},
        "error": mean_pred / float(np.mean(measured)) - 1,
        "late": late,
        # the two distributions at CDF_POINTS quantiles each: what a plot of them needs, not every step
        "quantiles": {
            "q": q.tolist(),
            "measured": np.quantile(measured, q, method="inverted_cdf").tolist(),
            "predicted": np.quantile(predicted, q, method="inverted_cdf").tolist(),
        },
        "model": "independent per-rank delays per step (this run's detours), Monte Carlo, bootstrap interval",
    }


def metrics(run, records: list[dict]) -> Metrics:
    s = analyze(run, records)
    out = Metrics()
    for r in s.ranks:
        out.add(f"cluster/rank {r.rank}/lost share", [r.share], "share", LOWER, "", f"rank {r.rank} ({r.host})")
    for r in s.timerlat or []:
        if np.isfinite(r["p99_ns"]):
            name = f"cluster/timerlat/rank {r['rank']}/p99"
            out.add(name, [r["p99_ns"]], "ns", LOWER, "", f"thread latency p99 on rank {r['rank']}")
    for op in s.latency or []:
        for r in op["ranks"]:
            if r["count"]:
                name = f"cluster/{op['operation']}/rank {r['rank']}/p99"
                out.add(name, [r["p99_ns"]], "ns", LOWER, "", f"{op['operation']} p99 on rank {r['rank']}")
    for c in s.scale or []:
        for n, x in zip(c["workers"], c["job_ops_per_s"]):
            name = f"cluster/{c['probe']} {c['mode']}/job ops/s at {n} per rank"
            out.add(name, [x], "ops/s", HIGHER, "", f"{c['probe']}: the job's throughput, {n} workers per rank")
    if s.bsp and s.bsp.get("steps"):
        out.add("cluster/bsp/slowdown mean", [s.bsp["measured"]["mean"]], "×", LOWER, "", "measured BSP slowdown")
    return out
