"""What a `scale` run found, computed from its stored engine records alone,
so that `oslens show` and the live command print the same thing."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from .. import kinds
from ..format import plural
from ..records import ScalePoint, explained_points, scale_series
from . import kstacks
from .explain import RUNQ_LABEL, ExplainedStats, Knee, explain_point, find_knee, point_samples, scales_sentence
from .metrics import HIGHER, LOWER, Metrics
from .scaling import UslFit, fit_usl, usl_unfit_reason
from .stats import SKEW_LIMIT, SPREAD_LIMIT, Interval, median_ci, ratio_interval, relative_spread, repetitions_needed

CONFIDENCE = 0.95


@dataclass
class PointStats:
    workers: int
    reps: int
    total: Interval  # ops/s of all workers together
    per_worker: Interval  # ops/s of one worker (total / workers)
    imbalance: float  # fastest worker's rate / slowest's, median over reps
    sys_share: float | None  # kernel share of the workers' CPU time
    nivcsw_per_s: float | None  # involuntary switches per worker-second
    efficiency: float | None = None  # per-worker rate relative to the baseline count
    # The efficiency's interval: this point's per-worker interval over the
    # baseline's, [low / base high, high / base low], covering the true ratio
    # with at least coverage_here + coverage_base - 1 (Bonferroni). None at the
    # baseline itself (100 % by definition).
    efficiency_ci: Interval | None = None
    superlinear: bool = False  # the efficiency's interval lies wholly above 100 %
    sockets: int | None = None  # packages the workers' CPUs span (None: the header has no topology)
    smt_shared_cores: int | None = None  # physical cores that hold more than one worker
    smt_per_core: int = 1  # the most workers on one physical core
    fastest_s: Interval | None = None  # fixed work: time of the fastest worker (OSMark)
    slowest_s: Interval | None = None
    mean_s: Interval | None = None
    # fixed work: the latest worker's start after the earliest's, as a share of
    # the mean worker's time, worst repetition (past SKEW_LIMIT they did not run together)
    start_skew: float | None = None
    warnings: list[str] = field(default_factory=list)


@dataclass
class Series:
    probe: str
    variant: str
    mode: str
    placement: str
    fixed: str  # "time" or "ops"
    points: list[PointStats]
    baseline_workers: int | None = None
    usl: UslFit | None = None
    usl_note: str | None = None
    # scale --explain: per point, its causes (None where not explained)
    explained: list[ExplainedStats | None] | None = None
    knee: Knee | None = None
    explanation: str | None = None  # the knee in one sentence, or why there is none
    image: str | None = None  # the worker processes' address space: what fork copies

    @property
    def title(self) -> str:
        mode = "processes" if self.mode == "process" else "threads"
        return f"{self.probe}:{self.variant} ({mode}, {self.placement})"

    def to_dict(self) -> dict:
        d = {k: v for k, v in asdict(self).items() if k not in ("points", "usl", "explained", "knee")}
        d["points"] = [_point_dict(p) for p in self.points]
        d["usl"] = self.usl.to_dict() if self.usl else None
        if self.explained is not None:
            d["explained"] = [e.to_dict() if e else None for e in self.explained]
            d["knee"] = asdict(self.knee) if self.knee else None
        return d


def _point_dict(p: PointStats) -> dict:
    return {k: (asdict(v) if isinstance(v, Interval) else v) for k, v in vars(p).items()}


def _span(placement: list[dict]) -> tuple[int | None, int | None, int]:
    """(sockets, physical cores holding more than one worker, most workers
    on one core) of the CPUs the engine placed the workers on; (None, None, 1)
    when its header carries no topology."""
    if not placement or any("package" not in w or "core" not in w for w in placement):
        return None, None, 1
    per_core = Counter((w["package"], w.get("die", 0), w["core"]) for w in placement)
    shared = [k for k in per_core.values() if k > 1]
    return len({w["package"] for w in placement}), len(shared), max(per_core.values())


SUPERLINEAR_NOTE = (
    "superlinear: the efficiency's interval lies wholly above 100 %, more than noise. Likely causes: the "
    "clock (a lightly loaded machine may be run slower by the frequency governor, and a worker that sleeps "
    "pays idle-state exits a busy machine avoids), cache or SMT effects, a noisy baseline point, or the "
    "baseline worker sharing its CPU with the master or with interrupts"
)


def is_superlinear(ci: Interval) -> bool:
    # Only a real interval (two repetitions or more on both sides) can say
    # the excess is more than noise.
    return ci.n >= 2 and ci.low > 1.0


def _efficiency(p: PointStats, base: PointStats) -> None:
    b = base.per_worker
    if not b.median:
        return
    p.efficiency = p.per_worker.median / b.median
    if p is base:
        return
    p.efficiency_ci = ratio_interval(p.per_worker, b)
    if is_superlinear(p.efficiency_ci):
        p.superlinear = True
        p.warnings.append(SUPERLINEAR_NOTE)


def _point(pt: ScalePoint) -> PointStats | None:
    n = pt.workers
    complete = pt.complete
    if not complete:
        return None
    rates = [np.array([w["ops_per_sec"] for w in ws]) for ws in complete]
    totals = [float(r.sum()) for r in rates]
    per_worker = [t / n for t in totals]
    imbalance = [float(r.max() / r.min()) if r.min() > 0 else float("inf") for r in rates]
    cpu_user = sum(w["rusage"]["user_s"] for ws in complete for w in ws)
    cpu_sys = sum(w["rusage"]["sys_s"] for ws in complete for w in ws)
    # rusage covers the timed loop (its own interval), not the sampled window.
    worker_secs = sum(w["rusage"].get("interval_s", w["seconds"]) for ws in complete for w in ws)
    nivcsw = sum(w["rusage"]["nivcsw"] for ws in complete for w in ws)
    p = PointStats(
        workers=n,
        reps=len(complete),
        total=median_ci(totals),
        per_worker=median_ci(per_worker),
        imbalance=float(np.median(imbalance)),
        sys_share=cpu_sys / (cpu_user + cpu_sys) if cpu_user + cpu_sys > 0 else None,
        nivcsw_per_s=nivcsw / worker_secs if worker_secs > 0 else None,
    )
    p.sockets, p.smt_shared_cores, p.smt_per_core = _span(pt.header.get("placement", {}).get("workers", []))
    if pt.fixed == "ops":
        secs = [np.array([w["seconds"] for w in ws]) for ws in complete]
        p.fastest_s = median_ci([float(s.min()) for s in secs])
        p.slowest_s = median_ci([float(s.max()) for s in secs])
        p.mean_s = median_ci([float(s.mean()) for s in secs])
        worst_skew = max(max(w["start_offset_ns"] for w in ws) / 1e9 / float(s.mean()) for ws, s in zip(complete, secs))
        p.start_skew = worst_skew
        if worst_skew > SKEW_LIMIT:
            p.warnings.append(
                f"workers started up to {worst_skew:.0%} of the run apart; use more --ops so they overlap"
            )
    if any(r.min() == 0 for r in rates):
        p.warnings.append("a worker completed no operation in the measured window")
    spread = relative_spread(per_worker)
    if spread > SPREAD_LIMIT:
        p.warnings.append(f"spread {spread:.1%} across repetitions exceeds {SPREAD_LIMIT:.0%}")
    if pt.late:
        p.warnings.append(
            f"{plural(len(pt.late), 'repetition')} left out: the sampler ran late (an overloaded machine)"
        )
    if len(complete) + len(pt.late) < len(pt.by_rep):
        incomplete = len(pt.by_rep) - len(complete) - len(pt.late)
        p.warnings.append(f"{plural(incomplete, 'repetition')} incomplete and left out")
    smt = [w["cpu"] for w in pt.header["placement"]["workers"] if w["smt"] > 0]
    if smt:
        p.warnings.append(f"{plural(len(smt), 'worker')} on SMT siblings of busy cores (CPUs {_cpus(smt)})")
    strays = sorted({(w["cpu"], w["cpu_seen"]) for ws in complete for w in ws if w["cpu_seen"] != w["cpu"]})
    if strays:
        p.warnings.append("workers ran off their CPU: " + ", ".join(f"{a}->{b}" for a, b in strays))
    return p


def _cpus(cpus: list[int]) -> str:
    return ",".join(map(str, cpus[:8])) + ("…" if len(cpus) > 8 else "")


def confidence_note(s: Series) -> str | None:
    """The rows of a series whose interval falls short of CONFIDENCE, named
    with their repetitions and actual confidence; None when none does."""
    short = [p for p in s.points if p.per_worker.coverage < CONFIDENCE]
    if not short:
        return None
    groups: dict[tuple[int, float], list[int]] = {}
    for p in short:
        groups.setdefault((p.reps, p.per_worker.coverage), []).append(p.workers)
    parts = []
    for (reps, cov), workers in groups.items():
        who = ", ".join(map(str, workers)) + (" worker" if workers == [1] else " workers")
        what = "no interval" if reps < 2 else f"{cov:.0%} confidence"
        parts.append(f"{who} ({reps} repetition{'s' if reps != 1 else ''}: {what})")
    fix = f"use --reps {repetitions_needed(CONFIDENCE)} or more"
    if len(short) == len(s.points):
        return f"every point is short of {CONFIDENCE:.0%} confidence: {'; '.join(parts)}; {fix}"
    return f"short of {CONFIDENCE:.0%} confidence: {'; '.join(parts)} (the other points reach it); {fix}"


def _explain(s: Series, explained: dict) -> None:
    """Pairs each point with its explained twin, and names the knee."""
    eps = [explained.get((s.probe, s.variant, s.mode, s.placement, p.workers)) for p in s.points]
    if not any(eps):
        return
    s.explained = [explain_point(ep, p.per_worker) if ep else None for ep, p in zip(eps, s.points)]
    got = [e for e in s.explained if e]
    if not got:
        why = next((ep.unavailable for ep in eps if ep and ep.unavailable), "no explained repetition completed")
        if any(ep and ep.header["engine"].get("static") for ep in eps):
            why = f"{s.probe} runs in the static engine, which has no BPF ({why})"
        s.explanation = f"not explained: {why}"
        return
    eff = [p.efficiency for p, e in zip(s.points, s.explained) if e]
    eff = eff if all(x is not None for x in eff) else None
    s.knee = find_knee(got, eff)
    if s.knee:
        s.explanation = s.knee.sentence
    elif len(got) > 1:
        s.explanation = scales_sentence(got, eff)


def worker_image(pts: list[ScalePoint]) -> str | None:
    """What a worker process's address space held when it was ready (what
    fork copies and a child's exit tears down), over every worker of the
    series; None for threads (they share the engine's) or older records."""
    images = [w["image"] for pt in pts for ws in pt.complete for w in ws if w.get("image")]
    if not images or pts[0].mode != "process":
        return None

    def span(key: str, unit: str) -> str:
        xs = [i[key] for i in images if i.get(key) is not None]
        if not xs:
            return f"{key.replace('_kb', '')} unknown"
        lo, hi = min(xs), max(xs)
        return f"{lo}{unit}" if lo == hi else f"{lo}–{hi}{unit}"

    programs = sorted({i.get("program", "?") for i in images if i.get("fresh")})
    how = f"a fresh {', '.join(programs)}" if programs else "a copy of the engine"
    if programs and not all(i.get("fresh") for i in images):
        how += " or a copy of the engine"
    return f"worker image: {how}, {span('mappings', ' mappings')}, {span('anon_kb', ' KiB anonymous')}"


def summarize(records: list[dict]) -> list[Series]:
    out = []
    explained = explained_points(records)
    for (probe, variant, mode, placement, fixed), pts in scale_series(records).items():
        points = [p for pt in pts if (p := _point(pt)) is not None]
        s = Series(probe, variant, mode, placement, fixed, points, image=worker_image(pts))
        if points:
            base = points[0]
            s.baseline_workers = base.workers
            for p in points:
                _efficiency(p, base)
            ns = [p.workers for p in points]
            s.usl_note = usl_unfit_reason(ns)
            if s.usl_note is None:
                s.usl = fit_usl(ns, [p.total.median for p in points])
                if s.usl is None:
                    s.usl_note = "the USL fit did not converge"
            _explain(s, explained)
        out.append(s)
    return out


@dataclass
class ScaleSummary:
    series: list[Series]
    study: list[dict] | None = None  # `oslens study NAME`: the paper's findings beside what was measured

    def to_dict(self) -> dict:
        d = {"series": [s.to_dict() for s in self.series]}
        if self.study is not None:
            d["study"] = self.study
        return d


def analyze(run, records: list[dict]) -> ScaleSummary:
    summary = ScaleSummary(summarize(records))
    if run.params.get("study"):
        summary.study = kinds.study(run.params["study"]).load("verdicts")(summary, run, records)
    return summary


def metrics(run, records: list[dict]) -> Metrics:
    out = Metrics()
    for (probe, variant, mode, placement, fixed), points in scale_series(records).items():
        group = f"{probe}:{variant} ({'processes' if mode == 'process' else 'threads'})"
        for pt in points:
            n, complete = pt.workers, pt.complete
            base = f"scale/{probe}:{variant}/{mode}/{n} workers"
            if base + "/ops per s per worker" in out:  # a second series of the same probe: keep both
                base = f"scale/{probe}:{variant}/{mode}/{placement}/{fixed}/{n} workers"
            out.add(
                f"{base}/ops per s per worker",
                [sum(w["ops_per_sec"] for w in ws) / n for ws in complete],
                "ops/s",
                HIGHER,
                group,
                f"{_workers(n)} · ops/s per worker",
            )
            if fixed == "ops":
                out.add(
                    f"{base}/slowest worker s",
                    [max(w["seconds"] for w in ws) for ws in complete],
                    "s",
                    LOWER,
                    group,
                    f"{_workers(n)} · slowest worker's time",
                )
    _cause_metrics(out, records)
    return out


def stacks(run, records: list[dict]) -> dict[str, kstacks.PointSamples]:
    """scale --explain: each explained point's sampled kernel functions,
    which `compare` sets side by side."""
    out = {}
    for (probe, variant, mode, _placement, n), ep in explained_points(records).items():
        if sampled := point_samples(ep):
            out[f"{probe}:{variant} ({'processes' if mode == 'process' else 'threads'}) · {_workers(n)}"] = sampled
    return out


CAUSES_COMPARED = 6  # per explained point, its costliest causes (and the unexplained rest)


def _cause_metrics(out: Metrics, records: list[dict]) -> None:
    """scale --explain: each cause's time per operation, per repetition, so
    that `compare` says which cause changed between two runs."""
    for (probe, variant, mode, _placement, n), ep in explained_points(records).items():
        per_rep = [s for r in ep.reps if (s := explain_point(replace(ep, reps=[r])))]
        if not per_rep:
            continue
        group = f"{probe}:{variant} ({'processes' if mode == 'process' else 'threads'}) · why"
        label = {c.key: c.label for s in per_rep for c in s.causes}
        total: dict[str, float] = {}
        for s in per_rep:
            for k, v in s.by_key().items():
                total[k] = total.get(k, 0.0) + v
        for key in sorted(total, key=lambda k: -total[k])[:CAUSES_COMPARED]:
            out.add(
                f"scale/{probe}:{variant}/{mode}/{n} workers/why/{key}",
                [s.by_key().get(key, 0.0) for s in per_rep],
                "ns/op",
                LOWER,
                group,
                f"{_workers(n)} · {label[key]}",
            )
        _taker_metrics(out, per_rep, f"scale/{probe}:{variant}/{mode}/{n} workers/why/runq", group, _workers(n))
        out.add(
            f"scale/{probe}:{variant}/{mode}/{n} workers/why/unexplained",
            [s.unexplained_ns for s in per_rep],
            "ns/op",
            LOWER,
            group,
            f"{_workers(n)} · unexplained",
        )


TAKERS_COMPARED = 3  # per explained point, who took the workers' CPUs most


def _taker_metrics(out: Metrics, per_rep: list[ExplainedStats], base: str, group: str, workers: str) -> None:
    """The wait for a CPU by who took it, per repetition: `compare` says
    whether the program or kernel thread that took it changed."""

    def taken(s: ExplainedStats) -> dict[str, float]:
        runq = next((c for c in s.causes if c.key == "runq"), None)
        return {t["name"]: t["ns_per_op"] for t in runq.takers} if runq else {}

    reps = [taken(s) for s in per_rep]
    total: Counter = Counter()
    for r in reps:
        total.update(r)
    for name, _ in total.most_common(TAKERS_COMPARED):
        out.add(
            f"{base}/{name}",
            [r.get(name, 0.0) for r in reps],
            "ns/op",
            LOWER,
            group,
            f"{workers} · {RUNQ_LABEL}, taken by {name}",
        )


def _workers(n: int) -> str:
    return "1 worker" if n == 1 else f"{n} workers"
