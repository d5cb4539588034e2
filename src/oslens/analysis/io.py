"""What an `io` run found, from its stored records alone: per series (an
I/O engine at a queue depth) and submitting-CPU count, IOPS in total and
per CPU against the ideal line, bandwidth, each I/O's latency percentiles,
the CPU time per I/O by kind (user, system, irq, softirq: every CPU's, from
the kernel's accounting, whoever ran it), where the I/Os completed, and the
device's own count beside the engine's."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field

import numpy as np

from ..records import Invocation, complete_reps, explained_point, invocations
from .explain import ExplainedStats, explain_point
from .histogram import Histogram, merge_all
from .metrics import HIGHER, LOWER, Metrics
from .stats import SPREAD_LIMIT, relative_spread

QUANTILES = {"p50": 50, "p99": 99, "p99.9": 99.9}
CPU_KINDS = ("user", "system", "irq", "softirq")  # user includes nice


@dataclass
class Completions:
    submitted: dict[int, int]  # cpu -> I/Os submitted there
    completed: dict[int, int]  # cpu -> I/Os completed there
    local: int  # completed on the CPU that submitted them
    missed: int = 0  # block events of any device the kernel did not hand to the BPF programs

    @property
    def total(self) -> int:
        return sum(self.completed.values())

    @property
    def local_share(self) -> float | None:
        return self.local / self.total if self.total else None


@dataclass
class IoPoint:
    series: str
    workers: int
    cpus: list[int]
    reps: int  # complete repetitions
    iops: list[float]  # per repetition, all workers
    ops: list[int]  # I/Os counted per repetition
    bs: int
    latency: dict[str, float] = field(default_factory=dict)  # QUANTILES -> ns
    cpu_us_per_io: dict[str, float] | None = None  # CPU_KINDS -> µs, every CPU
    cpu_resolution_us: float | None = None  # one accounting tick spread over the I/Os
    worker_us_per_io: dict[str, float] | None = None  # the workers' own rusage: user, system
    completions: Completions | None = None
    completions_unavailable: str | None = None
    device: dict | None = None  # the device's counters over the whole invocation
    interrupts: dict[int, int] | None = None  # cpu -> the device's interrupts there
    explained: ExplainedStats | None = None
    uring: dict | None = None  # how io_uring was driven: setup flags, enters and waits per I/O
    warnings: list[str] = field(default_factory=list)

    @property
    def median_iops(self) -> float:
        return float(np.median(self.iops)) if self.iops else float("nan")

    @property
    def per_cpu(self) -> float:
        return self.median_iops / self.workers

    @property
    def bandwidth(self) -> float:
        return self.median_iops * self.bs

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(median_iops=self.median_iops, iops_per_cpu=self.per_cpu, bytes_per_s=self.bandwidth)
        if self.completions:
            d["completions"]["local_share"] = self.completions.local_share
        return d


@dataclass
class IoSeries:
    label: str
    points: list[IoPoint]

    def efficiency(self, p: IoPoint) -> float | None:
        """IOPS per CPU over the smallest count's: 1 on the ideal line."""
        base = self.points[0]
        return p.per_cpu / base.per_cpu if base.per_cpu > 0 else None


@dataclass
class IoSummary:
    target: dict
    series: list[IoSeries]

    def to_dict(self) -> dict:
        return {
            "target": self.target,
            "series": [
                {"label": s.label, "points": [p.to_dict() | {"efficiency": s.efficiency(p)} for p in s.points]}
                for s in self.series
            ],
        }


def _cpu_cost(inv: Invocation, reps: dict[int, list[dict]]) -> tuple[dict | None, float | None, dict | None]:
    """µs per I/O by kind over every CPU, the accounting's resolution per
    I/O, and the workers' own rusage per I/O."""
    total, worker = defaultdict(float), defaultdict(float)
    ticks_ns, ios = 0.0, 0
    for cs in inv.of("cpustat"):
        if cs["rep"] not in reps:
            continue
        for c in cs["cpus"]:
            total["user"] += c["user"] + c["nice"]
            for k in ("system", "irq", "softirq"):
                total[k] += c[k]
        ticks_ns = cs["resolution_ns"]
        for w in reps[cs["rep"]]:
            ios += w["ops"]
            worker["user"] += w["rusage"]["user_s"] * 1e6
            worker["system"] += w["rusage"]["sys_s"] * 1e6
    if not ios:
        return None, None, None
    return (
        {k: total[k] / 1e3 / ios for k in CPU_KINDS},
        ticks_ns / 1e3 / ios,
        {k: v / ios for k, v in worker.items()},
    )


def _completions(inv: Invocation, reps) -> tuple[Completions | None, str | None]:
    recs = [r for r in inv.of("completions") if r["rep"] in reps]
    why = next((r.get("reason") for r in inv.of("completions") if not r.get("available")), None)
    got = [r for r in recs if r.get("available")]
    if not got:
        return None, why or "not followed"
    sub, comp, local = defaultdict(int), defaultdict(int), 0
    missed = sum(r.get("missed", 0) for r in got)
    for r in got:
        for c in r["cpus"]:
            sub[c["cpu"]] += c["submitted"]
            comp[c["cpu"]] += c["completed"]
            local += c["local"]
    return Completions(dict(sub), dict(comp), local, missed), None


def _uring(inv: Invocation, reps) -> dict | None:
    """How the workers drove their rings: the set-up the kernel took (the
    same for all), and io_uring_enter calls and waits per I/O (warm-up
    included on both sides of the ratio)."""
    got = [r for r in inv.of("uring") if r["rep"] in reps]
    ios = sum(r["ios"] for r in got)
    if not ios:
        return None
    return {
        "setup": sorted({f for r in got for f in r["setup"]}),
        "wait": got[0]["wait"],
        "enters_per_io": sum(r["enters"] for r in got) / ios,
        "waits_per_io": sum(r["waits"] for r in got) / ios,
    }


def _attach_completions(p: IoPoint, inv: Invocation) -> None:
    """Where the I/Os of inv (the point's own repetitions, or the one that
    followed them) completed."""
    p.completions, p.completions_unavailable = _completions(inv, complete_reps(inv))
    c = p.completions
    if c and c.total < sum(c.submitted.values()):
        unseen = sum(c.submitted.values()) - c.total
        p.warnings.append(
            f"{unseen} of {sum(c.submitted.values())} I/Os' completions not seen"
            + (
                f" (the kernel skipped {c.missed} block events: a BPF program already ran on that CPU)"
                if c.missed
                else ""
            )
        )


def _role(inv: Invocation) -> str:
    """measure, completions or explain (a run stored before roles said `explained`)."""
    ctx = (inv.context or {}).get("io", {})
    return ctx.get("role") or ("explain" if ctx.get("explained") else "measure")


def _point(inv: Invocation) -> IoPoint:
    h, ctx = inv.header, (inv.context or {}).get("io", {})
    reps = complete_reps(inv)
    p = IoPoint(
        series=ctx.get("series", h["probe"]["name"]),
        workers=h["workers"],
        cpus=[w["cpu"] for w in h.get("placement", {}).get("workers", [])],
        reps=len(reps),
        iops=[sum(w["ops_per_sec"] for w in ws) for ws in reps.values()],
        ops=[sum(w["ops"] for w in ws) for ws in reps.values()],
        bs=int(h.get("options", {}).get("bs", 4096)),
    )
    hists = [Histogram.from_record(r["hist"]) for r in inv.of("hist") if r["rep"] in reps]
    if hists:
        merged = merge_all(hists)
        p.latency = {k: merged.percentile(q) for k, q in QUANTILES.items()}
    p.cpu_us_per_io, p.cpu_resolution_us, p.worker_us_per_io = _cpu_cost(inv, reps)
    p.uring = _uring(inv, reps)
    if inv.of("completions"):  # a run stored before completions had a repetition of their own
        _attach_completions(p, inv)
    dev = inv.of("device")
    if dev:
        p.device = dev[-1].get("stat")
        ints: dict[int, int] = defaultdict(int)
        for per_cpu in (dev[-1].get("interrupts") or {}).values():
            for cpu, n in per_cpu.items():
                ints[int(cpu)] += n
        p.interrupts = dict(ints) if dev[-1].get("irq_names") else None
    if len(p.iops) >= 2 and relative_spread(p.iops) > SPREAD_LIMIT:
        p.warnings.append(f"IOPS vary by {relative_spread(p.iops):.0%} across repetitions")
    return p


def summarize(params: dict, records) -> IoSummary:
    plain: dict[tuple[str, int], IoPoint] = {}
    explained: list[tuple[str, int, Invocation]] = []
    followed: list[tuple[str, int, Invocation]] = []
    for inv in invocations(records):
        ctx = (inv.context or {}).get("io", {})
        role = _role(inv)
        if role != "measure":
            (explained if role == "explain" else followed).append((ctx.get("series"), inv.header["workers"], inv))
            continue
        p = _point(inv)
        plain[(p.series, p.workers)] = p
    for label, n, inv in followed:
        if twin := plain.get((label, n)):
            _attach_completions(twin, inv)
    for label, n, inv in explained:
        twin = plain.get((label, n))
        ep = explained_point(inv)
        if twin and ep:
            rate = twin.per_cpu if twin.iops else None
            twin.explained = explain_point(ep, rate)
            if twin.explained is None and ep.unavailable:
                twin.warnings.append(f"not explained: {ep.unavailable}")
    by: dict[str, list[IoPoint]] = defaultdict(list)
    for p in plain.values():
        by[p.series].append(p)
    order = params.get("engines") or list(by)
    series = [IoSeries(label, sorted(by[label], key=lambda p: p.workers)) for label in order if by.get(label)]
    return IoSummary(params.get("target", {}), series)


def analyze(run, records) -> IoSummary:
    return summarize(run.params, records)


def metrics(run, records) -> Metrics:
    """Per series and CPU count: IOPS and per-I/O p99 per repetition."""
    m = Metrics()
    for inv in invocations(records):
        ctx = (inv.context or {}).get("io", {})
        if not ctx or _role(inv) != "measure":
            continue
        reps = complete_reps(inv)
        label, n = ctx["series"], inv.header["workers"]
        group = f"io {label}"
        m.add(
            f"io/{label}/{n} CPUs/IOPS",
            [sum(w["ops_per_sec"] for w in ws) for ws in reps.values()],
            "/s",
            HIGHER,
            group,
            f"{n} CPUs · IOPS",
        )
        p99 = []
        for rep in reps:
            hs = [Histogram.from_record(r["hist"]) for r in inv.of("hist") if r["rep"] == rep]
            if hs:
                p99.append(merge_all(hs).percentile(99))
        m.add(f"io/{label}/{n} CPUs/p99", p99, "ns", LOWER, group, f"{n} CPUs · p99 per I/O")
    return m
