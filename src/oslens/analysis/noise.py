"""What a `noise` run found: per-CPU detours, the cause of each (matched to
the kernel events recorded meanwhile), and what that noise does to a
synchronised computation across many nodes.

Attribution: within each detour, every instant is charged to the innermost
event active then (the latest to start: a hard IRQ inside a softirq is the
IRQ's), so nested events are never counted twice; instants no event covers
are "unexplained (hardware, hypervisor or SMI)" — except, in a KVM guest,
as much of them as its steal clock says the host did not run the vCPU then."""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from ..records import by_context, cpustats, detour_records, kernel_events, master_shared, traces
from .metrics import LOWER, Metrics
from .stats import proportion_interval

UNEXPLAINED = "unexplained (hardware, hypervisor or SMI)"
IDLE = "idle (the CPU slept)"
STEAL = "the hypervisor (the vCPU not run: steal time)"
KIND_IRQ, KIND_SOFTIRQ, KIND_NMI, KIND_VECTOR, KIND_TASK, KIND_FAULT = 1, 2, 3, 4, 5, 6
KIND_TIMER_CALLBACK = 7  # not noise: a probed thread's sleep timer ran its callback (timerlat's IRQ latency)
KIND_STEAL = 8  # not an interval: id ns stolen from the vCPU somewhere between start and end
F_KTHREAD = 1
SOFTIRQ_NAMES = ("HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU")
VECTOR_NAMES = {
    "local_timer": "timer interrupt",
    "reschedule": "IPI reschedule",
    "call_function": "IPI call-function",
    "call_function_single": "IPI call-function-single",
    "irq_work": "irq_work interrupt",
}
DEFAULT_NODES = (1, 100, 10000)
# Tail at scale: each chance comes with an exact (Clopper-Pearson) interval
# of this confidence on the per-window chance, carried to N nodes. A figure
# whose interval spans more than CANNOT_TELL of [0, 1] cannot be told; to
# tell it, measure until, were no such delay seen, its upper bound would be
# under TOLD_BELOW.
CONFIDENCE = 0.95
CANNOT_TELL = 0.5
TOLD_BELOW = 0.05


def cause_of(kind: int, ident: int, flags: int, name: str) -> str:
    if kind == KIND_IRQ:
        return f"irq {ident} {name}".strip()
    if kind == KIND_SOFTIRQ:
        vec = name or (SOFTIRQ_NAMES[ident] if 0 <= ident < len(SOFTIRQ_NAMES) else str(ident))
        return f"{vec} softirq"
    if kind == KIND_NMI:
        return "NMI"
    if kind == KIND_VECTOR:
        return VECTOR_NAMES.get(name, f"{name} interrupt")
    if kind == KIND_TASK:
        if ident == 0:  # each CPU's idle task (swapper/N): nothing ran, the CPU slept
            return IDLE
        return f"{name} ({'kernel thread' if flags & F_KTHREAD else 'task'})"
    if kind == KIND_FAULT:
        return "page fault"
    return f"event {kind}"


@dataclass(frozen=True, order=True)
class Rise:
    """The steal clock of a vCPU rose by `ns` between two reads of it: the
    host did not run the vCPU for that long, somewhere in [start, end]."""

    start: int
    end: int
    ns: int


@dataclass
class Detour:
    cpu: int
    start_ns: int
    duration_ns: int
    causes: dict[str, float]  # cause -> ns of this detour

    @property
    def cause(self) -> str:
        return max(self.causes, key=self.causes.get) if self.causes else UNEXPLAINED


@dataclass
class CpuNoise:
    cpu: int
    runtime_ns: float
    count: int  # all detours (also those beyond the kept list)
    total_ns: float
    max_ns: float
    loop_ns: float
    threshold_ns: float
    kept: int  # detours kept individually
    percentiles_ns: dict[str, float]
    steal_ns: float | None = None  # over the detours' window (None: not read over it)
    ftq: dict | None = None  # FTQ: quantum, quanta, work per quantum, work lost
    steal_window_ns: float | None = None  # the window steal was read over (summed over reps)
    steal_resolution_ns: float | None = None  # ± this: one tick (1/USER_HZ) per repetition

    @property
    def steal_exceeds_noise(self) -> bool:
        """Steal beyond every detour seen, by more than its resolution:
        time the vCPU did not run is a gap the probe loop sees."""
        return bool(
            self.steal_ns and self.steal_resolution_ns and self.steal_ns - self.steal_resolution_ns > self.total_ns
        )

    @property
    def lost_share(self) -> float:
        return self.total_ns / self.runtime_ns if self.runtime_ns else float("nan")

    @property
    def rate_per_s(self) -> float:
        return self.count / (self.runtime_ns / 1e9) if self.runtime_ns else float("nan")


@dataclass
class NoiseSummary:
    cpus: list[CpuNoise]
    detours: list[Detour]
    attribution: str  # "bpf", or why not
    windows: list[tuple[int, float, int]]  # (cpu, start_ns, runtime_ns) of each probe run
    lost_events: int = 0
    master_shared: bool = False  # the engine's master had to run on probed CPUs
    causes: dict[str, dict] = field(default_factory=dict)
    steal_note: str | None = None  # why steal is not shown

    def to_dict(self, tail: dict | None = None) -> dict:
        return {
            "attribution": self.attribution,
            "lost_events": self.lost_events,
            "cpus": [{**vars(c), "lost_share": c.lost_share, "rate_per_s": c.rate_per_s} for c in self.cpus],
            "causes": self.causes,
            "tail": tail,
        }


def segments(start: int, end: int, events: list[tuple]) -> list[tuple[int, int, str]]:
    """[start, end) cut where its innermost cause changes: (from, to, cause)
    in time order; events are (s, e, cause)."""
    inside = [(max(s, start), min(e, end), s, c) for s, e, c in events if s < end and e > start]
    if not inside:
        return [(start, end, UNEXPLAINED)] if end > start else []
    edges = sorted({start, end, *(x[0] for x in inside), *(x[1] for x in inside)})
    out: list[tuple[int, int, str]] = []
    for a, b in zip(edges, edges[1:]):
        active = [x for x in inside if x[0] <= a and x[1] >= b]
        cause = max(active, key=lambda x: x[2])[3] if active else UNEXPLAINED
        if out and out[-1][2] == cause and out[-1][1] == a:
            out[-1] = (out[-1][0], b, cause)
        else:
            out.append((a, b, cause))
    return out


def attribution_of(records: list[dict]) -> str:
    """ "bpf" where `run --trace` recorded the kernel's events, else why not."""
    traced = traces(records)
    trace = traced[0] if traced else None
    if trace and trace.get("available"):
        return "bpf"
    return trace.get("reason", "attribution unavailable") if trace else "attribution not requested (--no-bpf)"


class EventIndex:
    """The kernel events of a run by CPU, to ask what ran in a window."""

    def __init__(self, records: list[dict]):
        by_cpu: dict[int, list[tuple]] = defaultdict(list)
        self._callbacks: dict[int, dict[int, int]] = defaultdict(dict)
        rises: dict[int, list[Rise]] = defaultdict(list)
        for cpu, s, e, kind, ident, flags, name in kernel_events(records):
            if kind == KIND_TIMER_CALLBACK:  # a moment, not something that ran instead of a thread
                self._callbacks[ident][s] = e  # by thread: it may fire on another CPU (off a nohz_full one)
                continue
            if kind == KIND_STEAL:  # bounds of time the vCPU was not run, not an interval that ran
                rises[cpu].append(Rise(s, e, ident))
                continue
            by_cpu[cpu].append((s, e, cause_of(kind, ident, flags, name), kind, ident, name))
        self._events = {cpu: sorted(evs) for cpu, evs in by_cpu.items()}
        self._rises = {cpu: sorted(rs) for cpu, rs in rises.items()}
        self._starts = {cpu: np.array([e[0] for e in evs], dtype=np.int64) for cpu, evs in self._events.items()}
        self._longest = {cpu: max((e[1] - e[0] for e in evs), default=0) for cpu, evs in self._events.items()}

    @property
    def has_callbacks(self) -> bool:
        """Whether the trace saw the probed threads' sleep timers fire (a kernel
        and a kallsyms that let the engine recognise them)."""
        return bool(self._callbacks)

    def callbacks(self, tid: int | None) -> dict[int, int]:
        """Thread `tid`'s sleep timers seen firing: their expiry -> when their
        callback ran."""
        return self._callbacks.get(tid, {}) if tid is not None else {}

    def events(self, cpu: int) -> list[tuple]:
        """(start, end, cause, kind, id, name) of every event on `cpu`, by start."""
        return self._events.get(cpu, [])

    def overlapping(self, cpu: int, start: int, end: int) -> list[tuple]:
        """(start, end, cause, kind, id, name) of the events on `cpu` that
        overlap [start, end): only those starting in [start - the longest
        event, end) can."""
        evs = self._events.get(cpu)
        if not evs:
            return []
        starts = self._starts[cpu]
        lo = int(np.searchsorted(starts, start - self._longest[cpu], side="left"))
        hi = int(np.searchsorted(starts, end, side="left"))
        return [e for e in evs[lo:hi] if e[1] > start]

    def rises(self, cpu: int) -> list[Rise]:
        """The rises of `cpu`'s steal clock the trace read, by their start."""
        return self._rises.get(cpu, [])

    def segments(self, cpu: int, start: int, end: int) -> list[tuple[int, int, str]]:
        """[start, end) on `cpu` cut where its innermost event changes."""
        return segments(start, end, [e[:3] for e in self.overlapping(cpu, start, end)])

    def charged(self, cpu: int, spans: list[tuple[int, int]]) -> list[list[tuple[int, int, str]]]:
        """segments() of each span (disjoint [start, end) on `cpu`), with
        the time no event covers charged to the steal clock's rises read
        around it. Each rise is shared out once over all the spans: to the
        longest uncovered stretches within its bounds first (a vCPU not run
        is one stretch with nothing in it), each up to what of it lies
        within them. Where in
        a stretch, two reads cannot say: its first part is the steal, the
        rest stays unexplained."""
        pieces = [self.segments(cpu, a, b) for a, b in spans]
        uncovered = sorted(
            (a, b, i, k) for i, ps in enumerate(pieces) for k, (a, b, cause) in enumerate(ps) if cause == UNEXPLAINED
        )
        starts = [u[0] for u in uncovered]
        longest = max((u[1] - u[0] for u in uncovered), default=0)  # how far before a rise one can begin
        claimed: dict[tuple[int, int], int] = defaultdict(int)
        for rise in self.rises(cpu):
            near = uncovered[bisect.bisect_left(starts, rise.start - longest) : bisect.bisect_left(starts, rise.end)]
            left = rise.ns
            inside = [(min(b, rise.end) - max(a, rise.start), a, b, i, k) for a, b, i, k in near if b > rise.start]
            for overlap, a, b, i, k in sorted(inside, key=lambda u: (-u[0], u[1])):
                take = min(left, overlap, b - a - claimed[i, k])  # the steal lies within the rise's bounds
                claimed[i, k] += take
                left -= take
                if not left:
                    break
        out = []
        for i, ps in enumerate(pieces):
            charged: list[tuple[int, int, str]] = []
            for k, (a, b, cause) in enumerate(ps):
                if took := claimed.get((i, k), 0):
                    charged.append((a, a + took, STEAL))
                if a + took < b:
                    charged.append((a + took, b, cause))
            out.append(charged)
        return out

    def causes(self, cpu: int, spans: list[tuple[int, int]]) -> list[dict[str, float]]:
        """ns of each span on `cpu` per cause (charged's)."""
        out = []
        for pieces in self.charged(cpu, spans):
            by_cause: dict[str, float] = defaultdict(float)
            for a, b, cause in pieces:
                by_cause[cause] += b - a
            out.append(dict(by_cause))
        return out


def summarize(records: list[dict]) -> NoiseSummary:
    detour_recs = detour_records(records)
    traced = traces(records)
    attribution = attribution_of(records)
    lost = sum(t.get("lost", 0) for t in traced)
    index = EventIndex(records)
    # Steal over the window the engine read /proc/stat over: the measured
    # one (after warm-up). Engines before it read it over the whole rep,
    # warm-up included: a figure not comparable with the detours, not shown.
    windows_read = cpustats(records)
    steal_note = None
    if any("start_ns" not in r for r in windows_read):
        steal_note = "steal not shown: this run's engine read it over the whole repetition, warm-up included"
        windows_read = []
    steal: dict[int, float] = defaultdict(float)
    steal_window: dict[int, float] = defaultdict(float)
    steal_res: dict[int, float] = defaultdict(float)
    for r in windows_read:
        for c in r["cpus"]:
            steal[c["cpu"]] += c["steal"]
            steal_window[c["cpu"]] += r["end_ns"] - r["start_ns"]
            steal_res[c["cpu"]] += r["resolution_ns"]

    by_cpu: dict[int, list[dict]] = defaultdict(list)
    for r in detour_recs:
        by_cpu[r["cpu"]].append(r)
    cpus, detours = [], []
    for cpu, recs in sorted(by_cpu.items()):
        durations = np.array([d[1] for r in recs for d in r["detours"]], dtype=float)
        pct = {
            f"p{q:g}": float(np.percentile(durations, q, method="inverted_cdf")) if durations.size else float("nan")
            for q in (50, 99, 99.9)
        }
        cpus.append(
            CpuNoise(
                cpu,
                sum(r["runtime_ns"] for r in recs),
                sum(r["count"] for r in recs),
                sum(r["total_ns"] for r in recs),
                max(r["max_ns"] for r in recs),
                float(np.median([r["loop_ns"] for r in recs])),
                recs[0]["threshold_ns"],
                int(durations.size),
                pct,
                steal.get(cpu),
                steal_window_ns=steal_window.get(cpu),
                steal_resolution_ns=steal_res.get(cpu),
            )
        )
        spans = [(end - dur, end) for r in recs for end, dur in r["detours"]]
        causes = index.causes(cpu, spans) if attribution == "bpf" else [{} for _ in spans]
        detours += [Detour(cpu, a, b - a, c) for (a, b), c in zip(spans, causes)]
    for c in cpus:
        c.ftq = _ftq([r["ftq"] for r in by_cpu[c.cpu] if r.get("ftq")])
    windows = [(r["cpu"], r["start_ns"], r["runtime_ns"]) for r in detour_recs]
    summary = NoiseSummary(
        cpus, detours, attribution, windows, lost, master_shared=master_shared(records), steal_note=steal_note
    )
    if attribution == "bpf":
        summary.causes = cause_table([(d.duration_ns, d.causes) for d in detours])
    return summary


def _ftq(series: list[dict]) -> dict | None:
    """Work per quantum against an undisturbed quantum (the 99th percentile:
    the maximum would be one lucky quantum)."""
    counts = np.concatenate([np.asarray(f["counts"], dtype=float) for f in series]) if series else np.array([])
    if counts.size == 0:
        return None
    full = float(np.percentile(counts, 99))
    return {
        "quantum_ns": series[0]["quantum_ns"],
        "quanta": int(counts.size),
        "median": float(np.median(counts)),
        "min": float(counts.min()),
        "full": full,
        "work_lost": float(np.clip(1 - counts / full, 0, None).mean()) if full else float("nan"),
    }


def cause_table(spans, counted: str = "count") -> dict[str, dict]:
    """Per cause over stretches of lost time (each with `causes` in ns and
    its length): how many it took part in (under the key `counted`), its
    time, its most in one, and its share of them all; largest first."""
    total = sum(length for length, _ in spans) or 1
    table: dict[str, dict] = {}
    for _, causes in spans:
        for cause, ns in causes.items():
            row = table.setdefault(cause, {counted: 0, "total_ns": 0.0, "max_ns": 0.0})
            row[counted] += 1
            row["total_ns"] += ns
            row["max_ns"] = max(row["max_ns"], ns)
    for row in table.values():
        row["share"] = row["total_ns"] / total
    return dict(sorted(table.items(), key=lambda kv: -kv[1]["total_ns"]))


def at_least_one(p: float, nodes: int) -> float:
    """The chance at least one of `nodes` independent nodes is hit, each with chance p."""
    return 1.0 if p >= 1 else float(-np.expm1(nodes * np.log1p(-p)))


def windows_to_tell(nodes: int, confidence: float = CONFIDENCE) -> int:
    """Windows after which, were no delay seen, the N-node figure's upper
    bound would be under TOLD_BELOW: with none in n windows the bound on p
    is 1 - a^(1/n) (a = half the confidence's complement), so the N-node
    bound is 1 - a^(N/n) < TOLD_BELOW when n > N ln a / ln(1 - TOLD_BELOW)
    (about 72 N at 95 %). With that many windows every figure is told,
    whatever the chance."""
    a = (1 - confidence) / 2
    return math.ceil(nodes * math.log(a) / math.log1p(-TOLD_BELOW))


def tail_at_scale(s: NoiseSummary, step_ns: float, nodes=DEFAULT_NODES, delays_ns=(1e4, 1e5, 1e6)) -> dict:
    """For a bulk-synchronous step of `step_ns` on every node: the chance it
    is delayed by more than X on one node (measured: the noise falling into
    each step-long window of the timeline), on N independent nodes
    (1 - (1 - p)^N), and the expected slowdown E[max of N delays] / step.

    Each chance has an exact binomial interval from the number of windows
    (windows taken as independent draws), carried to N nodes at both ends
    (the map is monotone); a chance whose interval spans more than
    CANNOT_TELL of [0, 1] is not told, and `measure_s` says how long to
    measure (on the same CPUs) to tell it (windows_to_tell). The expected
    slowdown assumes no window is worse than the worst seen; it is told
    under the same rule applied to "a delay beyond the longest seen"."""
    per_window: list[float] = []
    by_cpu: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for cpu in {w[0] for w in s.windows}:
        mine = [d for d in s.detours if d.cpu == cpu]
        by_cpu[cpu] = (
            np.array([d.start_ns for d in mine], dtype=np.int64),
            np.array([d.duration_ns for d in mine], dtype=float),
        )
    for cpu, t0, runtime in s.windows:
        n = int(runtime // step_ns)
        if n == 0:
            continue
        starts, durations = by_cpu[cpu]
        k = ((starts - t0) // step_ns).astype(np.int64)
        inside = (k >= 0) & (k < n)
        per_window += np.bincount(k[inside], weights=durations[inside], minlength=n).tolist()
    if not per_window:
        return {"step_ns": step_ns, "windows": 0, "note": "no window of this length was measured"}
    w = np.sort(np.array(per_window))
    # Windows come from every CPU at once: measuring 1 s on these CPUs
    # gives this many.
    windows_per_s = len({c for c, _, _ in s.windows}) * 1e9 / step_ns
    labels = {x: f">{x / 1e3:g}us" for x in delays_ns}
    events = {labels[x]: int(np.sum(w > x)) for x in delays_ns}
    bounds_p = {label: proportion_interval(k, int(w.size), CONFIDENCE) for label, k in events.items()}
    a = (1 - CONFIDENCE) / 2
    out = {
        "step_ns": step_ns,
        "windows": int(w.size),
        "confidence": CONFIDENCE,
        "cannot_tell_width": CANNOT_TELL,
        "events": events,
        "nodes": {},
    }
    for n in nodes:
        p_delay, p_bounds, told = {}, {}, {}
        for label, k in events.items():
            lo, hi = (at_least_one(b, n) for b in bounds_p[label])
            p_delay[label] = at_least_one(k / w.size, n)
            p_bounds[label] = [lo, hi]
            told[label] = hi - lo <= CANNOT_TELL
        # E[max of n iid draws] from the empirical distribution: sum over
        # order statistics of P(max = w_i).
        cdf = np.arange(1, w.size + 1) / w.size
        pmax = np.diff(np.concatenate([[0.0], cdf**n]))
        out["nodes"][str(n)] = {
            "p_delayed": p_delay,
            "p_bounds": p_bounds,
            "told": told,
            "expected_slowdown": float(1 + np.sum(pmax * w) / step_ns),
            # Upper bound on a node-set seeing a window worse than any seen.
            "slowdown_told": bool(-math.expm1(n / w.size * math.log(a)) <= CANNOT_TELL),
            "measure_s": windows_to_tell(n) / windows_per_s,
        }
    return out


def summarize_phases(records: list[dict]) -> dict[str, NoiseSummary]:
    """One summary per phase: alone, and with each competitor."""
    from .latency import by_phase

    phases = by_phase(records)
    return {p: summarize(rs) for p, rs in phases.items() if detour_records(rs)}


@dataclass
class NoiseRunSummary:
    """Every phase (alone, with competition) of a noise run, with its tail at scale."""

    phases: dict[str, NoiseSummary]
    tails: dict[str, dict]

    def to_dict(self) -> dict:
        return {"phases": {p: s.to_dict(self.tails[p]) for p, s in self.phases.items()}}

    def json_extra(self) -> dict:
        """What --json prints beyond the stored summary: every detour."""
        return {
            "detours": {
                p: [[d.cpu, d.start_ns, d.duration_ns, d.cause] for d in s.detours] for p, s in self.phases.items()
            }
        }


def analyze(run, records: list[dict]) -> NoiseRunSummary:
    phases = summarize_phases(records)
    step = run.params.get("step_ns", 1e6)
    return NoiseRunSummary(phases, {p: tail_at_scale(s, step) for p, s in phases.items()})


def metrics(run, records: list[dict]) -> Metrics:
    from .latency import phase_of

    by_rep: dict = defaultdict(lambda: defaultdict(list))  # phase -> rep -> [detours records]
    for context, recs in by_context(records):
        for r in detour_records(recs):
            by_rep[phase_of(context)][r["rep"]].append(r)
    out = Metrics()
    for phase, reps in by_rep.items():
        rows = [recs for _, recs in sorted(reps.items())]
        runtime = [sum(r["runtime_ns"] for r in recs) for recs in rows]
        out.add(
            f"noise/{phase}/all CPUs/lost share",
            [sum(r["total_ns"] for r in recs) / t for recs, t in zip(rows, runtime) if t],
            "share",
            LOWER,
            phase,
            "all CPUs · share of CPU time lost",
        )
        out.add(
            f"noise/{phase}/all CPUs/detours per CPU-s",
            [sum(r["count"] for r in recs) / (t / 1e9) for recs, t in zip(rows, runtime) if t],
            "/s",
            LOWER,
            phase,
            "all CPUs · interruptions per CPU-second",
        )
        out.add(
            f"noise/{phase}/all CPUs/longest detour ns",
            [max(r["max_ns"] for r in recs) for recs in rows],
            "ns",
            LOWER,
            phase,
            "all CPUs · longest interruption",
        )
        for cpu in sorted({r["cpu"] for recs in rows for r in recs}):
            out.add(
                f"noise/{phase}/cpu {cpu}/lost share",
                [r["total_ns"] / r["runtime_ns"] for recs in rows for r in recs if r["cpu"] == cpu and r["runtime_ns"]],
                "share",
                LOWER,
                phase,
                f"CPU {cpu} · share of CPU time lost",
            )
    return out
