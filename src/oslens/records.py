"""The engine's records, as engine/README.md documents them, read by name.

`RECORD_FIELDS` mirrors the README's tables (a test holds both, and real
engine output, together, so they cannot drift). Readers here are the one
way the rest of oslens groups records: `scale_points` is the grouping of a
scale run that analysis, the HTML report, the frames, the exports and
compare all use, so they count the same repetitions; `by_rank` splits a
job's records (`cluster`) by the rank that wrote them, and a rank's own
records read as RankInfo, Node and Bsp."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Iterator

# Per engine command, type -> the fields every record of that type carries
# (the README's fields that are always present; optional ones are not
# listed). The same type may mean different records in two commands
# (`header`).
RECORD_FIELDS: dict[str, dict[str, tuple[str, ...]]] = {
    "run": {
        "header": (
            "engine",
            "argv",
            "probe",
            "variant",
            "options",
            "mode",
            "workers",
            "placement",
            "clock",
            "fixed",
            "warmup_s",
            "reps",
        ),
        "resources": ("rep", "tmpdir", "sysv_sem"),
        "started": ("rep", "workers"),
        "hist": ("probe", "variant", "hist"),
        "detours": (
            "loop_ns",
            "threshold_ns",
            "iterations",
            "start_ns",
            "runtime_ns",
            "count",
            "total_ns",
            "max_ns",
            "overflow",
            "detours",
        ),
        "timerlat": (
            "period_ns",
            "policy",
            "prio",
            "dma_latency_us",
            "wakeups",
            "missed",
            "max_ns",
            "overflow",
            "thread",
            "wakes",
        ),
        "uring": ("rep", "worker", "setup", "wait", "ios", "enters", "waits", "syncs", "sync_ns"),
        "io": ("rep", "worker", "reads", "writes", "pace_sleeps", "pace_dropped", "syncs", "sync_ns"),
        "aio": (
            "rep",
            "worker",
            "submits",
            "getevents",
            "reads",
            "writes",
            "pace_sleeps",
            "pace_dropped",
            "syncs",
            "sync_ns",
        ),
        "events": ("events",),
        "trace": ("available",),
        "explain": ("rep", "available"),
        "completions": ("rep", "available"),
        "cpustat": ("rep",),
        "worker": ("rep", "worker", "cpu", "cpu_seen", "ops", "seconds", "ops_per_sec", "rusage"),
        "rep": ("rep", "status"),
        "error": ("message",),
        "end": ("status",),
    },
    "profile": {
        "header": ("mode", "argv", "pid", "cpus_possible", "cpus_online", "clk_tck", "page_size"),
        "bpf": ("loaded",),
        "procfs": ("when", "t_ns", "files"),
        "thread": ("when", "source", "tid", "tgid", "comm"),
        "target": ("pid", "t_ns"),
        "end_target": ("how", "code", "signal", "wall_ns"),
        "counters": ("events",),
        "cpu_time": ("cpus",),
        "switches": ("voluntary", "involuntary", "migrations"),
        "faults": ("minor", "major"),
        "irqs": ("hardirq", "softirq"),
        "syscalls": ("rows",),
        "locks": ("rows",),
        "run_lengths": ("run_lengths",),
        "threads_dropped": ("count",),
        "samples": ("period_ns", "samples", "lost"),
        "bpf_stats": ("lost",),
        "error": (),
        "end": ("status",),
    },
    "app": {
        "app_info": ("name", "summary", "kind", "default_size", "size_unit", "uses_dir"),
        "app": ("name", "workers", "mode", "size", "setup_ns", "work_ns", "merge_ns", "checksum"),
    },
    # A rank's own records (oslens-engine-mpi); its `run` writes run's
    # records besides, and every record a rank writes carries RANK_STAMP.
    "cluster": {
        "rank": ("size", "local_rank", "local_size", "cpus_from", "cpus", "pid", "mpi", "mpi_thread"),
        # kernel, kernel_version and machine (uname) are left out if uname fails
        "node": (
            "cmdline",
            "thp",
            "thp_defrag",
            "clocksource",
            "cpus_online",
            "isolated",
            "nohz_full",
            "governor",
            "irq_affinity",
        ),
        "topology": ("online", "available", "packages", "cpus"),
        "bsp": (
            "cpu",
            "collective",
            "compute_us",
            "work_iterations",
            "loop_ns",
            "threshold_ns",
            "warmup_iterations",
            "iterations",
            "start_ns",
            "step_start_ns",
            "work_ns",
            "wait_ns",
            "synced",
            "overflow",
            "detours",
        ),
        "rep": ("rep", "status"),
        "end": ("status",),
    },
}

# What every record a rank of an MPI job writes begins with: its rank in
# the job and its host (engine/cluster/cluster_mpi.c's sink).
RANK_STAMP = ("rank", "host")

# Records oslens itself stores beside the engine's.
OSLENS_RECORDS: dict[str, tuple[str, ...]] = {
    "context": ("competition",),  # before each engine invocation: what ran on other CPUs meanwhile
    "device": ("device", "stat"),  # after each `io` invocation: the device's own counters
    "point": ("n", "cpus", "rep", "argv", "status", "how", "code", "signal", "wall_ns"),  # appscale, per repetition
    "kernel_config": ("irq_time",),  # profile: why /proc/stat's irq time is not real (None when it is)
}


def missing_fields(command: str, record: dict) -> list[str]:
    """The documented fields a record of that command lacks ([] when complete)."""
    fields = RECORD_FIELDS[command].get(record.get("type")) or OSLENS_RECORDS.get(record.get("type"), ())
    return [f for f in fields if f not in record]


# Fields of each event tuple in an `events` record, in order.
EVENT_FIELDS = ("cpu", "start_ns", "end_ns", "kind", "id", "flags", "name")


def of_type(records: Iterable[dict], type_: str) -> Iterator[dict]:
    return (r for r in records if r.get("type") == type_)


def first(records: Iterable[dict], type_: str) -> dict | None:
    return next(of_type(records, type_), None)


# The noise analysis's records: the detour probe's, --trace's, /proc/stat's.


def detour_records(records: Iterable[dict]) -> list[dict]:
    """The detour probe's `detours` records, in order."""
    return list(of_type(records, "detours"))


def timerlat_records(records: Iterable[dict]) -> list[dict]:
    """The timerlat probe's `timerlat` records (a CPU's repetition each), in order."""
    return list(of_type(records, "timerlat"))


def traces(records: Iterable[dict]) -> list[dict]:
    """The `trace` records of --trace (whether it was available, what it lost)."""
    return list(of_type(records, "trace"))


def kernel_events(records: Iterable[dict]) -> Iterator[list]:
    """Every kernel event of the `events` records: EVENT_FIELDS, in order, each."""
    for r in of_type(records, "events"):
        yield from r["events"]


def cpustats(records: Iterable[dict]) -> list[dict]:
    """The `cpustat` records: /proc/stat over each repetition's window."""
    return list(of_type(records, "cpustat"))


def master_shared(records: Iterable[dict]) -> bool:
    """Whether the master of any `run` had to run on the CPUs it measured
    (its header's master_apart is false; an engine that did not say kept it apart)."""
    return any(not h.get("master_apart", True) for h in of_type(records, "header"))


def by_context(records: Iterable[dict]) -> list[tuple[dict | None, list[dict]]]:
    """The records after each `context` record oslens stored (what ran on
    other CPUs meanwhile), with it; those before the first, if any, with None."""
    out: list[tuple[dict | None, list[dict]]] = []
    context, mine = None, []
    for r in records:
        if r.get("type") == "context":
            if context is not None or mine:
                out.append((context, mine))
            context, mine = r, []
        else:
            mine.append(r)
    if context is not None or mine:
        out.append((context, mine))
    return out


@dataclass
class Invocation:
    """The records of one engine invocation: its header, the context oslens
    stored before it (competition), and everything after, until the next."""

    header: dict
    context: dict | None
    records: list[dict] = field(default_factory=list)

    def of(self, type_: str) -> list[dict]:
        return [r for r in self.records if r.get("type") == type_]

    @property
    def competition(self) -> dict | None:
        return (self.context or {}).get("competition")


def _complete(by_rep: dict[int, list[dict]], ok: set[int], workers: int) -> dict[int, list[dict]]:
    return {k: by_rep[k] for k in sorted(ok) if len(by_rep.get(k, ())) == workers}


def complete_reps(inv: Invocation) -> dict[int, list[dict]]:
    """rep -> its worker records, in repetition order, for the repetitions
    of an invocation that ended ok with every worker's record: the ones a
    figure may count."""
    by_rep: dict[int, list[dict]] = defaultdict(list)
    for w in inv.of("worker"):
        by_rep[w["rep"]].append(w)
    ok = {r["rep"] for r in inv.of("rep") if r.get("status") == "ok"}
    return _complete(by_rep, ok, inv.header["workers"])


def invocations(records: Iterable[dict]) -> list[Invocation]:
    """Splits a run's records at each header, each with the context record
    that preceded it. Records before the first header are dropped."""
    out: list[Invocation] = []
    context = None
    for r in records:
        t = r.get("type")
        if t == "context":
            context = r
        elif t == "header":
            out.append(Invocation(r, context))
            context = None
        elif out:
            out[-1].records.append(r)
    return out


@dataclass
class ScalePoint:
    """One point of a scale sweep: a probe, variant and mode at a worker
    count, and its repetitions. `complete` holds, per repetition that ended
    ok with every worker's record, those records (in repetition order)."""

    probe: str
    variant: str
    mode: str
    placement: str
    fixed: str  # "time" or "ops"
    workers: int
    header: dict
    by_rep: dict[int, list[dict]]  # every worker record, by repetition
    ok: set[int]  # repetitions that ended ok
    late: set[int]  # repetitions the sampler ran late in (left out)

    @property
    def series(self) -> tuple[str, str, str, str, str]:
        return (self.probe, self.variant, self.mode, self.placement, self.fixed)

    @property
    def complete_reps(self) -> list[int]:
        return list(_complete(self.by_rep, self.ok, self.workers))

    @property
    def complete(self) -> list[list[dict]]:
        return list(_complete(self.by_rep, self.ok, self.workers).values())


def scale_points(records: Iterable[dict]) -> list[ScalePoint]:
    """Every point of a scale run, in the order measured (a later invocation
    of the same series and worker count replaces an earlier one). The
    explained repetitions of `scale --explain` are not among them: they are
    paired with the points (explained_points), never averaged into them."""
    points: dict = {}
    for inv in invocations(records):
        h = inv.header
        if h.get("explain"):
            continue
        by_rep: dict[int, list[dict]] = defaultdict(list)
        ok, late = set(), set()
        for r in inv.records:
            t = r.get("type")
            if t == "worker":
                by_rep[r["rep"]].append(r)
            elif t == "rep" and r.get("status") == "ok":
                ok.add(r["rep"])
            elif t == "rep" and r.get("status") == "late":
                late.add(r["rep"])
        p = ScalePoint(
            h["probe"]["name"],
            h["variant"],
            h["mode"],
            h["placement"]["policy"],
            h["fixed"],
            h["workers"],
            h,
            by_rep,
            ok,
            late,
        )
        points[(p.series, p.workers)] = p
    return list(points.values())


@dataclass
class ExplainedRep:
    """One repetition of an explained point: each worker's record, which
    thread was which worker, what was charged, and the latency histograms."""

    rep: int
    workers: list[dict]
    tids: dict[int, int]  # thread id -> worker index
    explain: dict
    hists: list[dict]

    @property
    def window_ns(self) -> int:
        return self.explain["window_end_ns"] - self.explain["window_start_ns"]


@dataclass
class ExplainedPoint:
    """The explained invocation that `scale --explain` runs right after each
    point: the same probe, mode and worker count, fixed time, with every
    worker's time charged to its causes (run --explain)."""

    probe: str
    variant: str
    mode: str
    placement: str
    workers: int
    header: dict
    reps: list[ExplainedRep]  # the repetitions that ended ok (or late) with the attribution loaded
    unavailable: str | None  # why the attribution could not be loaded, if it never was
    # of those, the ones whose master sampled late (an overloaded machine): their charges are
    # of the window planned on the clock, their operations at the rate measured between the
    # samples taken (analysis.explain._charged_ops), so they stand; the point says so
    late: int = 0

    @property
    def key(self) -> tuple[str, str, str, str, int]:
        return (self.probe, self.variant, self.mode, self.placement, self.workers)


def explained_point(inv: Invocation) -> ExplainedPoint | None:
    """An invocation run with --explain, as its explained point; None otherwise."""
    h = inv.header
    if not h.get("explain"):
        return None
    workers: dict[int, list[dict]] = defaultdict(list)
    tids: dict[int, dict[int, int]] = defaultdict(dict)
    explain: dict[int, dict] = {}
    hists: dict[int, list[dict]] = defaultdict(list)
    ok: set[int] = set()
    late: set[int] = set()
    for r in inv.records:
        t = r.get("type")
        if t == "worker":
            workers[r["rep"]].append(r)
        elif t == "started":
            tids[r["rep"]] = {w["tid"]: w["worker"] for w in r["workers"]}
        elif t == "explain":
            explain[r["rep"]] = r
        elif t == "hist":
            hists[r["rep"]].append(r)
        elif t == "rep" and r.get("status") in ("ok", "late"):
            ok.add(r["rep"])
            if r["status"] == "late":
                late.add(r["rep"])
    reps = [
        ExplainedRep(k, workers[k], tids[k], explain[k], hists[k])
        for k in sorted(ok)
        if explain.get(k, {}).get("available") and len(workers[k]) == h["workers"]
    ]
    why = next((e.get("reason") for e in explain.values() if not e.get("available")), None)
    used_late = sum(1 for r in reps if r.rep in late)
    return ExplainedPoint(
        h["probe"]["name"], h["variant"], h["mode"], h["placement"]["policy"], h["workers"], h, reps, why, used_late
    )


def explained_points(records: Iterable[dict]) -> dict[tuple, ExplainedPoint]:
    """(probe, variant, mode, placement, workers) -> its explained point."""
    points = (explained_point(inv) for inv in invocations(records))
    return {p.key: p for p in points if p is not None}


def scale_series(records: Iterable[dict]) -> dict[tuple, list[ScalePoint]]:
    """scale_points grouped by series (probe, variant, mode, placement,
    fixed), each sorted by worker count."""
    out: dict[tuple, list[ScalePoint]] = defaultdict(list)
    for p in scale_points(records):
        out[p.series].append(p)
    return {k: sorted(v, key=lambda p: p.workers) for k, v in out.items()}


# A job's records (`cluster`): every rank's, stamped with RANK_STAMP.


def from_first_rank(record: dict) -> bool:
    """Written by a single engine, or by a job's rank 0 (whose repetitions
    end together with every other rank's)."""
    return record.get("rank", 0) == 0


def by_rank(records: Iterable[dict]) -> dict[int, list[dict]]:
    """rank -> the records it wrote, in order, by rank; records of no rank
    (oslens's own) are left out."""
    out: dict[int, list[dict]] = defaultdict(list)
    for r in records:
        if "rank" in r:
            out[r["rank"]].append(r)
    return dict(sorted(out.items()))


@dataclass(frozen=True)
class RankInfo:
    """A rank's `rank` record: where it ran and with what MPI."""

    rank: int
    host: str
    size: int  # ranks in the job
    local_rank: int  # among its node's ranks
    local_size: int
    cpus_from: str  # launcher (bound apart), slice (unbound: its slice of the shared CPUs) or all
    cpus: list[int]  # its share of the node's CPUs
    pid: int
    mpi: str  # the library's version
    mpi_thread: str | None  # the thread level MPI provided (None: an engine from before it was recorded)

    @classmethod
    def of(cls, r: dict) -> RankInfo:
        return cls(
            r["rank"],
            r["host"],
            r["size"],
            r["local_rank"],
            r["local_size"],
            r["cpus_from"],
            r["cpus"],
            r["pid"],
            r["mpi"],
            r.get("mpi_thread"),
        )


def rank_info(recs: Iterable[dict]) -> RankInfo | None:
    """The `rank` record among one rank's records (None if it sent none)."""
    r = first(recs, "rank")
    return RankInfo.of(r) if r else None


def rank_host(recs: list[dict]) -> str:
    """One rank's host: its `rank` record's, else its first record's, else '?'."""
    r = first(recs, "rank") or (recs[0] if recs else {})
    return r.get("host") or "?"


@dataclass
class JobRanks:
    """A job's ranks as their records stream in: each one's host (from its
    `rank` record), and those a signal stopped (an `end` with a signal)."""

    hosts: dict[int, str] = field(default_factory=dict)
    stopped: dict[int, int] = field(default_factory=dict)  # rank -> signal

    def add(self, r: dict) -> None:
        t = r.get("type")
        if t == "rank":
            self.hosts[r["rank"]] = r["host"]
        elif t == "end" and "signal" in r and "rank" in r:
            self.stopped[r["rank"]] = r["signal"]


@dataclass(frozen=True)
class Node:
    """A node's `node` record (from its first rank): what may make one node
    measure differently from another. Files that could not be read are None."""

    host: str
    kernel: str | None
    kernel_version: str | None
    machine: str | None
    cmdline: str | None
    thp: str | None
    thp_defrag: str | None
    clocksource: str | None
    cpus_online: str | None
    isolated: str | None
    nohz_full: str | None
    governor: dict[str, str]  # cpu -> scaling governor, CPUs with cpufreq only
    irq_affinity: dict[str, str]  # irq -> the CPUs it may run on (a CPU list)

    @classmethod
    def of(cls, r: dict) -> Node:
        return cls(
            r["host"],
            r.get("kernel"),
            r.get("kernel_version"),
            r.get("machine"),
            r.get("cmdline"),
            r.get("thp"),
            r.get("thp_defrag"),
            r.get("clocksource"),
            r.get("cpus_online"),
            r.get("isolated"),
            r.get("nohz_full"),
            r.get("governor") or {},
            r.get("irq_affinity") or {},
        )


def nodes(records: Iterable[dict]) -> dict[str, Node]:
    """host -> its node, one per host (a later record of a host replaces an earlier)."""
    return {r["host"]: Node.of(r) for r in of_type(records, "node")}


@dataclass(frozen=True)
class Bsp:
    """A rank's `bsp` record: its bulk-synchronous loop, step by step."""

    rank: int
    host: str
    cpu: int
    collective: str  # barrier or allreduce
    compute_us: int  # the work asked per step
    work_iterations: int  # loop iterations per step
    loop_ns: float
    threshold_ns: int
    warmup_iterations: int
    iterations: int  # steps measured
    start_ns: int  # CLOCK_MONOTONIC at the first measured step
    step_start_ns: list[int]  # per step, after start_ns
    work_ns: list[int]  # per step
    wait_ns: list[int]  # per step, in the collective
    synced: list[int]  # the steps that follow bookkeeping
    overflow: int  # detours beyond those kept
    detours: list[list[int]]  # [end_ns, duration_ns]

    @classmethod
    def of(cls, r: dict) -> Bsp:
        return cls(
            r["rank"],
            r["host"],
            r["cpu"],
            r["collective"],
            r["compute_us"],
            r["work_iterations"],
            r["loop_ns"],
            r["threshold_ns"],
            r["warmup_iterations"],
            r["iterations"],
            r["start_ns"],
            r["step_start_ns"],
            r["work_ns"],
            r["wait_ns"],
            r.get("synced", []),
            r.get("overflow", 0),
            r["detours"],
        )

    def as_detours(self) -> dict:
        """The loop's detours as the detour probe's `detours` record of one
        repetition over the measured steps' work, for the noise analysis."""
        d = self.detours
        return {
            "type": "detours",
            "rep": 0,
            "cpu": self.cpu,
            "detours": d,
            "runtime_ns": float(sum(self.work_ns)),
            "count": len(d) + self.overflow,
            "total_ns": float(sum(x[1] for x in d)),
            "max_ns": float(max((x[1] for x in d), default=0)),
            "loop_ns": self.loop_ns,
            "threshold_ns": self.threshold_ns,
            "start_ns": self.start_ns,
        }


def bsp_of(recs: Iterable[dict]) -> Bsp | None:
    """The `bsp` record among one rank's records (None if it sent none)."""
    r = first(recs, "bsp")
    return Bsp.of(r) if r else None


def bsps(records: Iterable[dict]) -> dict[int, Bsp]:
    """rank -> its `bsp` record, in the order written."""
    return {b.rank: b for b in map(Bsp.of, of_type(records, "bsp"))}
