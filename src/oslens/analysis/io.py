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

from ..collectors import kernel, unavailable
from ..format import pct
from ..records import Invocation, complete_reps, explained_point, invocations
from .explain import ExplainedStats, explain_point
from .histogram import Histogram, merge_all
from .metrics import HIGHER, LOWER, Metrics
from .scale import SUPERLINEAR_NOTE, is_superlinear
from .stats import SPREAD_LIMIT, Interval, median_ci, ratio_interval, relative_spread

QUANTILES = {"p50": 50, "p99": 99, "p99.9": 99.9}
CPU_KINDS = ("user", "system", "irq", "softirq")  # user includes nice


@dataclass
class Completions:
    submitted: dict[int, int]  # cpu -> I/Os submitted there
    completed: dict[int, int]  # cpu -> I/Os completed there
    local: int  # completed on the CPU that submitted them
    missed: int = 0  # block events of any device the kernel did not hand to the BPF programs
    unseen: int = 0  # I/Os whose completion no event reported (their bio was queued again while waiting)

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
    cpu_us_per_io: dict[str, float | None] | None = None  # CPU_KINDS -> µs, every CPU (irq None: not accounted)
    cpu_resolution_us: float | None = None  # one accounting tick spread over the I/Os
    worker_us_per_io: dict[str, float] | None = None  # the workers' own rusage: user, system
    completions: Completions | None = None
    completions_unavailable: str | None = None
    device: dict | None = None  # the device's counters over the whole invocation
    interrupts: dict[int, int] | None = None  # cpu -> the device's interrupts there
    explained: ExplainedStats | None = None
    uring: dict | None = None  # how io_uring was driven: setup flags, enters and waits per I/O
    aio: dict | None = None  # how Linux AIO was driven: io_submit and io_getevents calls per I/O
    rate: int = 0  # I/Os per second asked of each worker (0: unpaced)
    books: dict | None = None  # the workers' own count: reads, writes, syncs and their mean time, pacing
    efficiency: float | None = None  # IOPS per CPU over the series' first point's (1: the ideal line)
    efficiency_ci: Interval | None = None  # its interval, as scale's (None at the first point)
    superlinear: bool = False  # that interval lies wholly above 1, as scale judges it
    warnings: list[str] = field(default_factory=list)

    @property
    def timed(self) -> bool:
        """Some I/O was timed: without any, the point has no figure to give."""
        return sum(self.ops) > 0

    @property
    def median_iops(self) -> float | None:
        return float(np.median(self.iops)) if self.timed else None

    @property
    def per_cpu(self) -> float | None:
        m = self.median_iops
        return m / self.workers if m is not None else None

    @property
    def per_cpu_interval(self) -> Interval | None:
        """IOPS per CPU over the repetitions (None where none timed I/O)."""
        return median_ci([x / self.workers for x in self.iops]) if self.timed else None

    @property
    def bandwidth(self) -> float | None:
        m = self.median_iops
        return m * self.bs if m is not None else None

    def to_dict(self) -> dict:
        d = asdict(self)
        if self.explained:
            d["explained"] = self.explained.to_dict()
        d.update(median_iops=self.median_iops, iops_per_cpu=self.per_cpu, bytes_per_s=self.bandwidth)
        if self.completions:
            d["completions"]["local_share"] = self.completions.local_share
        return d


@dataclass
class IoSeries:
    label: str
    points: list[IoPoint]
    family: str = ""  # the label of the same series unpaced: the line its rate is a point of

    @property
    def rate(self) -> int:
        """I/Os per second asked of each worker (0: unpaced): its points'."""
        return self.points[0].rate

    def judge(self) -> None:
        """Each point's IOPS per CPU over the fewest CPUs', with scale's
        interval and its rule for a superlinear point. An interval only
        where every repetition on both sides timed I/O (a zero would make
        its ends infinite)."""
        base = self.points[0]
        if not base.per_cpu:
            return
        b = base.per_cpu_interval
        for p in self.points:
            if p.per_cpu is None:
                continue
            p.efficiency = p.per_cpu / base.per_cpu
            if p is base or min(p.iops) <= 0 or b.low <= 0:
                continue
            p.efficiency_ci = ratio_interval(p.per_cpu_interval, b)
            if is_superlinear(p.efficiency_ci):
                p.superlinear = True
                p.warnings.append(SUPERLINEAR_NOTE)


@dataclass
class IoSummary:
    target: dict
    series: list[IoSeries]
    # why /proc/stat's irq time is not real on the kernel measured (profile's and appscale's rule), None if it is
    irq_unavailable: str | None = None

    def cost_against_rate(self) -> list[dict]:
        """CPU µs per I/O at each rate a family of series was paced to, per
        worker count: the co-design study's CPU cost against I/O rate, two
        ways: every CPU's time (every kind the kernel accounts: completion
        work in interrupts or kernel threads included, and whatever else
        ran) and the workers' own (their rusage: what fio's usr_cpu and
        sys_cpu report). Empty unless some family ran at two rates or more."""
        rates: dict[str, set[int]] = defaultdict(set)
        for se in self.series:
            rates[se.family].add(se.rate)
        out = []
        for se in self.series:
            if len(rates[se.family]) < 2:
                continue
            for p in se.points:
                if p.per_cpu is None:
                    continue
                every = [v for v in (p.cpu_us_per_io or {}).values() if v is not None]
                own = sum((p.worker_us_per_io or {}).values()) if p.worker_us_per_io else None
                for measure, v in (("every CPU's", sum(every) if every else None), ("the workers' own", own)):
                    if v is not None:
                        out.append({"family": se.family, "workers": p.workers, "rate": se.rate, "measure": measure,
                                    "iops_per_cpu": p.per_cpu, "cpu_us_per_io": v})  # fmt: skip
        return out

    def nothing_measured(self) -> list[str]:
        """The points with no figure at all: the run failed there."""
        return [f"{s.label} ×{p.workers}" for s in self.series for p in s.points if not p.timed]

    def to_dict(self) -> dict:
        return {
            "target": self.target,
            "irq_unavailable": self.irq_unavailable,
            "series": [{"label": s.label, "points": [p.to_dict() for p in s.points]} for s in self.series],
        }


def _cpu_cost(
    inv: Invocation, reps: dict[int, list[dict]], irq_unavailable: str | None
) -> tuple[dict | None, float | None, dict | None]:
    """µs per I/O by kind over every CPU (irq None where the kernel does not
    account it: its 0 is no measurement), the accounting's resolution per
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
        {k: None if k == "irq" and irq_unavailable else total[k] / 1e3 / ios for k in CPU_KINDS},
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
    unseen = sum(r.get("unseen", 0) for r in got)  # records of before the field: none said
    for r in got:
        for c in r["cpus"]:
            sub[c["cpu"]] += c["submitted"]
            comp[c["cpu"]] += c["completed"]
            local += c["local"]
    return Completions(dict(sub), dict(comp), local, missed, unseen), None


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


def _aio(inv: Invocation, reps) -> dict | None:
    """How the workers drove their AIO contexts: system calls per I/O."""
    got = [r for r in inv.of("aio") if r["rep"] in reps]
    ios = sum(r["reads"] + r["writes"] for r in got)
    if not ios:
        return None
    return {"submits_per_io": sum(r["submits"] for r in got) / ios,
            "getevents_per_io": sum(r["getevents"] for r in got) / ios}  # fmt: skip


BOOKS = ("reads", "writes", "syncs", "sync_ns", "pace_sleeps", "pace_dropped")


def _books(inv: Invocation, reps) -> dict | None:
    """What the workers counted themselves, warm-up included: which way the
    I/Os went, the syncs and their mean time, and the pacing (a run stored
    before the engines kept these has none)."""
    got = [r for t in ("io", "uring", "aio") for r in inv.of(t) if r["rep"] in reps and "reads" in r]
    if not got:
        return None
    out = {k: sum(r.get(k, 0) for r in got) for k in BOOKS}
    out["sync_mean_ns"] = out["sync_ns"] / out["syncs"] if out["syncs"] else None
    ios = out["reads"] + out["writes"]
    out["read_share"] = out["reads"] / ios if ios else None
    return out


def _judge_rate(p: IoPoint) -> None:
    """A paced point holds its rate, or says why not: the token bucket never
    runs above it, and below it by more than 5 % the device or the CPUs
    could not keep up (the workers' dropped tokens say they fell behind)."""
    if not p.rate or p.per_cpu is None:
        return
    held = p.per_cpu / p.rate
    if held < 0.95:
        dropped = (p.books or {}).get("pace_dropped")
        p.warnings.append(
            f"held {pct(held)} of the {p.rate:,}/s asked per CPU"
            + (f" ({dropped:,} tokens lost while the workers were behind)" if dropped else "")
            + ": the device or the CPUs did not go faster"
        )
    elif held > 1.05:
        p.warnings.append(f"ran at {pct(held)} of the {p.rate:,}/s asked per CPU: the pacing did not hold")


def _attach_completions(p: IoPoint, inv: Invocation) -> None:
    """Where the I/Os of inv (the point's own repetitions, or the one that
    followed them) completed."""
    p.completions, p.completions_unavailable = _completions(inv, complete_reps(inv))
    c = p.completions
    if c and c.total < sum(c.submitted.values()):
        short = sum(c.submitted.values()) - c.total
        why = []
        if c.missed:
            why.append(f"the kernel skipped {c.missed:,} block events: a BPF program already ran on that CPU")
        if c.unseen:
            why.append(f"{c.unseen:,} completed with no event the programs saw: their bio was queued again")
        p.warnings.append(
            f"{short:,} of {sum(c.submitted.values()):,} I/Os' completions not seen"
            + (f" ({'; '.join(why)})" if why else "")
        )


def _role(inv: Invocation) -> str:
    """measure, completions or explain (a run stored before roles said `explained`)."""
    ctx = (inv.context or {}).get("io", {})
    return ctx.get("role") or ("explain" if ctx.get("explained") else "measure")


def _point(inv: Invocation, irq_unavailable: str | None) -> IoPoint:
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
        rate=int(h.get("options", {}).get("rate", 0)),
    )
    hists = [Histogram.from_record(r["hist"]) for r in inv.of("hist") if r["rep"] in reps]
    merged = merge_all(hists) if hists else None
    if merged is not None and merged.count:
        p.latency = {k: merged.percentile(q) for k, q in QUANTILES.items()}
    p.cpu_us_per_io, p.cpu_resolution_us, p.worker_us_per_io = _cpu_cost(inv, reps, irq_unavailable)
    p.uring = _uring(inv, reps)
    p.aio = _aio(inv, reps)
    p.books = _books(inv, reps)
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
    idle = sum(1 for n in p.ops if n == 0)
    if not p.timed:
        p.warnings.append(f"no I/O was timed in its {p.reps} complete repetitions: the point has no figure")
    elif idle:
        p.warnings.append(f"{idle} of {p.reps} repetitions timed no I/O")
    elif len(p.iops) >= 2 and relative_spread(p.iops) > SPREAD_LIMIT:
        p.warnings.append(f"IOPS vary by {relative_spread(p.iops):.0%} across repetitions")
    _judge_rate(p)
    return p


def irq_unavailable(machine: dict | None) -> str | None:
    """profile's and appscale's rule (collectors.kernel), on the build
    configuration stored with the run; a run that stored none is unknown."""
    config = (machine or {}).get("kernel", {}).get("config")
    return kernel.irq_time_unavailable(config or unavailable("not stored with the run"))


def summarize(params: dict, records, machine: dict | None = None) -> IoSummary:
    irq_why = irq_unavailable(machine)
    plain: dict[tuple[str, int], IoPoint] = {}
    explained: list[tuple[str, int, Invocation]] = []
    followed: list[tuple[str, int, Invocation]] = []
    for inv in invocations(records):
        ctx = (inv.context or {}).get("io", {})
        role = _role(inv)
        if role != "measure":
            (explained if role == "explain" else followed).append((ctx.get("series"), inv.header["workers"], inv))
            continue
        p = _point(inv, irq_why)
        plain[(p.series, p.workers)] = p
    for label, n, inv in followed:
        if twin := plain.get((label, n)):
            _attach_completions(twin, inv)
    for label, n, inv in explained:
        twin = plain.get((label, n))
        ep = explained_point(inv)
        if twin and ep:
            twin.explained = explain_point(ep, twin.per_cpu_interval)
            if twin.explained is None and ep.unavailable:
                twin.warnings.append(f"not explained: {ep.unavailable}")
    by: dict[str, list[IoPoint]] = defaultdict(list)
    for p in plain.values():
        by[p.series].append(p)
    order = params.get("engines") or list(by)
    about = {d["label"]: d for d in params.get("series") or []}  # a run stored before rates has none
    series = [
        IoSeries(label, sorted(by[label], key=lambda p: p.workers), about.get(label, {}).get("family", label))
        for label in order
        if by.get(label)
    ]
    for se in series:
        se.judge()
    return IoSummary(params.get("target", {}), series, irq_why)


def analyze(run, records) -> IoSummary:
    return summarize(run.params, records, run.machine)


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
            if hs and (merged := merge_all(hs)).count:
                p99.append(merged.percentile(99))
        m.add(f"io/{label}/{n} CPUs/p99", p99, "ns", LOWER, group, f"{n} CPUs · p99 per I/O")
    return m
