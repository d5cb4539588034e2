"""What a `timerlat` run found: per CPU, how late a real-time thread woke
from a periodic timer (thread latency: the expiry to the thread reading the
clock), how late its timer fired (IRQ latency: the expiry to the timer's
callback, as rtla timerlat measures it), and what held the worst wake-ups
back, as rtla timerlat's auto-analysis says.

The IRQ latency and the causes come from the kernel events `run --trace`
recorded on the CPU (the same as `noise`'s). The trace sees each probed
thread's sleep timer run its callback (hrtimer_wakeup), stamped with the
timer's expiry: matched to a wake-up by that expiry, exactly. A run whose
kernel did not let the engine recognise those callbacks (kallsyms hidden;
runs stored before) falls back to the timer interrupt: the first on the
CPU to end after the expiry, before the thread ran (0 where it was running
at the expiry), the latency ending at its entry, a little before the
callback; the summary says which (`irq_ends`). Within a late wake-up every
instant is charged to the innermost event then (noise's rule); the
instants after the thread was switched in are its own way back from the
sleep (the kernel's return, the clock read)."""

from __future__ import annotations

import heapq
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ..format import json_safe
from ..records import by_context, cpustats, master_shared, timerlat_records, traces
from .histogram import Histogram, merge_all, samples_to_tell, told_percentiles_of
from .metrics import LOWER, Metrics
from .noise import IDLE, KIND_IRQ, KIND_TASK, KIND_VECTOR, UNEXPLAINED, EventIndex, attribution_of, cause_table

QS = (50, 99, 99.9)
WORST = 10  # the worst wake-ups per phase whose causes are told
THREAD_ITSELF = "the thread's own return from its sleep"
AFTER_IDLE = "idle: switching to the thread"  # the interrupt came; the idle task still ran until the switch
# Interrupts that deliver an hrtimer's expiry: x86's local APIC timer vector;
# elsewhere the per-CPU timer's IRQ, by its handler's name (arm's arch_timer,
# riscv's riscv-timer, Xen's timerN).
TIMER_IRQ = re.compile(r"arch_timer|riscv-timer|timer\d*")
IRQ_AT_CALLBACK = "the timer's callback, as rtla's"
# A wake-up whose timer the trace did not see fire, where it saw the others':
# the trace has no events of it (on this VM, stretches of a few ms with none
# of any kind, none counted lost), so what held it back cannot be told.
NOT_TRACED = "not in the kernel trace (its events are missing)"
IRQ_AT_ENTRY = "the entry of the timer interrupt (the callbacks were not seen), a little before rtla's"


def _is_timer_interrupt(kind: int, name: str) -> bool:
    return (kind == KIND_VECTOR and name == "local_timer") or (kind == KIND_IRQ and bool(TIMER_IRQ.fullmatch(name)))


def _told(values: np.ndarray) -> dict[str, float]:
    return {f"p{q:g}": float(v) for q, v in zip(QS, told_percentiles_of(values, QS))}


class Wake(NamedTuple):
    """One kept wake-up."""

    cpu: int
    rep: int
    expiry_ns: int
    thread_ns: int
    irq_ns: int | None  # None: its timer interrupt not seen


@dataclass
class Wakeup:
    cpu: int
    expiry_ns: int
    thread_ns: int
    irq_ns: int | None  # None: no timer interrupt seen in the window
    causes: dict[str, float] = field(default_factory=dict)
    timeline: list[tuple[int, int, str]] = field(default_factory=list)  # (from, to) ns after the expiry, what

    @property
    def cause(self) -> str:
        return max(self.causes, key=self.causes.get) if self.causes else UNEXPLAINED


@dataclass
class CpuTimerlat:
    cpu: int
    wakeups: int  # every wake-up (the histogram's count)
    missed: int  # periods skipped by wake-ups later than a whole period
    policy: str  # "fifo" or "other"
    prio: int
    thread: dict[str, float]  # percentiles of the thread latency, ns (NaN: not told)
    thread_max_ns: float
    irq: dict[str, float]  # percentiles of the IRQ entry latency, ns, over the wake-ups it was seen for
    irq_max_ns: float | None
    irq_seen: int  # kept wake-ups whose IRQ latency the trace told (their timer seen firing)
    kept: int  # wake-ups kept individually
    why_other: str | None = None
    dma_latency_us: int | None = None  # the idle-state limit held on /dev/cpu_dma_latency, None: none
    dma_latency_why: str | None = None  # why one asked for was not held


@dataclass
class TimerlatSummary:
    cpus: list[CpuTimerlat]
    worst: list[Wakeup]
    attribution: str  # "bpf", or why not
    period_ns: int
    lost_events: int = 0
    master_shared: bool = False
    causes: dict[str, dict] = field(default_factory=dict)  # over the worst wake-ups
    steal_ns: float | None = None  # /proc/stat's steal on the measured CPUs over the measured windows
    steal_resolution_ns: float | None = None  # ± this: a tick per CPU and repetition
    wakes: list[Wake] = field(default_factory=list)  # the kept ones
    irq_ends: str | None = None  # where the IRQ latency ends (IRQ_AT_*); None untraced

    def to_dict(self) -> dict:
        return json_safe(self._doc())

    def _doc(self) -> dict:
        return {
            "attribution": self.attribution,
            "period_ns": self.period_ns,
            "lost_events": self.lost_events,
            "master_shared": self.master_shared,
            "cpus": [vars(c) for c in self.cpus],
            "worst": [{**vars(w), "cause": w.cause} for w in self.worst],
            "causes": self.causes,
            "steal_ns": self.steal_ns,
            "steal_resolution_ns": self.steal_resolution_ns,
            "irq_ends": self.irq_ends,
        }


def irq_latencies(
    index: EventIndex, cpu: int, tid: int | None, expiries: np.ndarray, wokes: np.ndarray
) -> list[int | None]:
    """Per wake-up of thread `tid` on `cpu`, from its expiry to its timer's
    callback (None where the trace did not see it fire: its event lost);
    where the trace saw no callback at all, to the timer interrupt's entry
    (interrupt_latencies)."""
    if not index.has_callbacks:
        return interrupt_latencies(index, cpu, expiries, wokes)
    fired = index.callbacks(tid)
    return [
        max(0, fired[e] - e) if e in fired and fired[e] <= w else None
        for e, w in zip(expiries.tolist(), wokes.tolist())
    ]


def interrupt_latencies(index: EventIndex, cpu: int, expiries: np.ndarray, wokes: np.ndarray) -> list[int | None]:
    """Per wake-up on `cpu`, the first timer interrupt on it to end after
    the expiry, from the expiry to its entry; 0 where it was running already
    (the interrupt runs every timer expired by the time it looks, one
    expiring meanwhile too: a timer that expires with another one's is run
    by the same); None where none began before the thread woke. rtla's IRQ
    latency ends later, at the timer's own callback, after the work the
    handler did before it. Timer interrupts do not nest on a CPU, so their
    ends are in order: one search for every wake-up."""
    timers = [(e[0], e[1]) for e in index.events(cpu) if _is_timer_interrupt(e[3], e[5])]
    if not timers:
        return [None] * len(expiries)
    starts = np.array([t[0] for t in timers], dtype=np.int64)
    ends = np.maximum.accumulate(np.array([t[1] for t in timers], dtype=np.int64))
    i = np.searchsorted(ends, expiries, side="right")
    found = i < len(timers)
    start = np.where(found, starts[np.minimum(i, len(timers) - 1)], 0)
    seen = found & (start < wokes)
    lat = np.maximum(start - expiries, 0)
    return [int(x) if ok else None for x, ok in zip(lat, seen)]


def _before_the_interrupt(cause: str) -> str:
    """What the time before a late timer interrupt was: a task cannot delay
    an interrupt, only run with interrupts off (or be the task of a vCPU the
    hypervisor did not run); an idle CPU was waking from its idle state."""
    if cause == IDLE:
        return "idle: the CPU waking for the interrupt"
    if cause.endswith(("(task)", "(kernel thread)")):
        return f"{cause} with interrupts off, or its vCPU not run"
    return cause


def _split(pieces: list[tuple[int, int, str]], at: int) -> tuple[list, list]:
    """pieces (from, to, what) in time order, cut at `at`: those before it, those after."""
    before = [(a, min(b, at), c) for a, b, c in pieces if a < at]
    after = [(max(a, at), b, c) for a, b, c in pieces if b > at]
    return before, after


def _timeline(
    index: EventIndex, cpu: int, expiry: int, woke: int, irq: int | None, pieces: list | None = None
) -> list[tuple[int, int, str]]:
    """What held a wake-up back, as (from, to, what) in time order. Up to
    the end of its IRQ latency (when it was told: the timer's callback, or
    its interrupt's entry) the timer was late: the CPU waking, a task with
    interrupts off, then the timer interrupt itself up to the callback;
    after it, noise's innermost-event rule, the instants after the thread
    was switched in (the end of the task that ran before it) charged to the
    thread itself. pieces: [expiry, woke) as index.charged gave it with the
    other wake-ups it shares the steal clock's rises with (else alone)."""
    if pieces is None:
        pieces = index.charged(cpu, [(expiry, woke)])[0]
    start = expiry + irq if irq is not None and irq > 0 else expiry
    before, after = _split(pieces, start)
    out = [(a, b, _before_the_interrupt(c)) for a, b, c in before]
    nearby = index.overlapping(cpu, start, woke)
    switched_in = max((e[1] for e in nearby if e[3] == KIND_TASK and start < e[1] <= woke), default=woke)
    for a, b, cause in after:
        if cause == UNEXPLAINED and b > switched_in:
            if a < switched_in:
                out.append((a, switched_in, cause))
            out.append((max(a, switched_in), b, THREAD_ITSELF))
        else:
            # idle after the interrupt is the switch to the thread; with no interrupt seen, it is all idle
            out.append((a, b, AFTER_IDLE if cause == IDLE and irq is not None else cause))
    return out


def summarize(records: list[dict]) -> TimerlatSummary:
    recs = timerlat_records(records)
    attribution = attribution_of(records)
    index = EventIndex(records) if attribution == "bpf" else None
    by_cpu: dict[int, list[dict]] = defaultdict(list)
    for r in recs:
        by_cpu[r["cpu"]].append(r)
    cpus, wakes = [], []
    gaps: set[tuple[int, int, int]] = set()  # wake-ups in a gap of the trace: (cpu, rep, expiry)
    for cpu, rs in sorted(by_cpu.items()):
        hist = merge_all(Histogram.from_record(r["thread"]) for r in rs)
        irqs = []
        for r in rs:
            pairs = np.array(r["wakes"], dtype=np.int64).reshape(-1, 2)
            lat = irq_latencies(index, cpu, r.get("tid"), pairs[:, 0], pairs[:, 1]) if index else [None] * len(pairs)
            fired = index.callbacks(r.get("tid")) if index else {}
            for (expiry, woke), irq in zip(pairs.tolist(), lat):
                if irq is not None:
                    irqs.append(irq)
                wakes.append(Wake(cpu, r["rep"], expiry, max(0, woke - expiry), irq))
                if fired and expiry not in fired:  # the trace saw this thread's timers fire, not this one
                    gaps.add((cpu, r["rep"], expiry))
        irq_arr = np.array(irqs, dtype=float)
        told = hist.told_percentiles(QS)
        cpus.append(
            CpuTimerlat(
                cpu,
                hist.count,
                sum(r["missed"] for r in rs),
                rs[0]["policy"],
                rs[0]["prio"],
                {f"p{q:g}": float(v) for q, v in zip(QS, told)},
                float(hist.max_ns),
                _told(irq_arr) if irq_arr.size else {f"p{q:g}": float("nan") for q in QS},
                float(irq_arr.max()) if irq_arr.size else None,
                int(irq_arr.size),
                sum(len(r["wakes"]) for r in rs),
                rs[0].get("why_other"),
                rs[0].get("dma_latency_us"),
                rs[0].get("dma_latency_why"),
            )
        )
    top = heapq.nlargest(WORST, wakes, key=lambda w: w.thread_ns)
    told = [w for w in top if (w.cpu, w.rep, w.expiry_ns) not in gaps]
    pieces = _charged(index, told) if index else {}
    worst = [_worst(index, w, (w.cpu, w.rep, w.expiry_ns) in gaps, pieces.get(id(w))) for w in top]
    summary = TimerlatSummary(
        cpus,
        worst,
        attribution,
        int(recs[0]["period_ns"]) if recs else 0,
        sum(t.get("lost", 0) for t in traces(records)),
        master_shared(records),
        wakes=wakes,
        irq_ends=(IRQ_AT_CALLBACK if index.has_callbacks else IRQ_AT_ENTRY) if index else None,
    )
    if index:
        summary.causes = cause_table([(w.thread_ns, w.causes) for w in worst], counted="wakeups")
    windows = cpustats(records)
    if windows and all("start_ns" in w for w in windows):
        mine = [(w, c) for w in windows for c in w["cpus"] if c["cpu"] in by_cpu]
        summary.steal_ns = sum(c["steal"] for _, c in mine)
        summary.steal_resolution_ns = sum(w["resolution_ns"] for w, _ in mine)
    return summary


def _charged(index: EventIndex, wakes: list[Wake]) -> dict[int, list]:
    """Each wake-up's [expiry, woke) as index.charged gives it, by id(): the
    wake-ups of one CPU together, sharing its steal clock's rises."""
    out: dict[int, list] = {}
    for cpu in {w.cpu for w in wakes}:
        mine = [w for w in wakes if w.cpu == cpu]
        spans = [(w.expiry_ns, w.expiry_ns + w.thread_ns) for w in mine]
        out.update((id(w), p) for w, p in zip(mine, index.charged(cpu, spans)))
    return out


def _worst(index: EventIndex | None, w: Wake, in_gap: bool = False, pieces: list | None = None) -> Wakeup:
    if index is None:
        return Wakeup(w.cpu, w.expiry_ns, w.thread_ns, w.irq_ns)
    if in_gap:  # a gap in the trace, not an idle or unexplained CPU
        return Wakeup(w.cpu, w.expiry_ns, w.thread_ns, None, {NOT_TRACED: float(w.thread_ns)},
                      [(0, w.thread_ns, NOT_TRACED)])  # fmt: skip
    timeline = _timeline(index, w.cpu, w.expiry_ns, w.expiry_ns + w.thread_ns, w.irq_ns, pieces)
    causes: dict[str, float] = defaultdict(float)
    for a, b, what in timeline:
        causes[what] += b - a
    return Wakeup(
        w.cpu,
        w.expiry_ns,
        w.thread_ns,
        w.irq_ns,
        dict(causes),
        [(a - w.expiry_ns, b - w.expiry_ns, c) for a, b, c in timeline],
    )


@dataclass
class TimerlatRunSummary:
    """Every phase (alone, with competition) of a timerlat run."""

    phases: dict[str, TimerlatSummary]

    def to_dict(self) -> dict:
        return {"phases": {p: s.to_dict() for p, s in self.phases.items()}}

    def json_extra(self) -> dict:
        """What --json prints beyond the stored summary: every kept wake-up,
        [cpu, rep, expiry_ns, thread_ns, irq_ns or null]."""
        return {"wakes": {p: [list(w) for w in s.wakes] for p, s in self.phases.items()}}

    def nothing_measured(self) -> str | None:
        if not any(c.wakeups for s in self.phases.values() for c in s.cpus):
            return "no wake-up was measured"
        return None


def analyze(run, records: list[dict]) -> TimerlatRunSummary:
    from .latency import by_phase

    phases = by_phase(records)
    return TimerlatRunSummary({p: summarize(rs) for p, rs in phases.items() if timerlat_records(rs)})


def metrics(run, records: list[dict]) -> Metrics:
    """Per phase and repetition: the thread latency's p99 and maximum over
    all CPUs, and each CPU's maximum (lower is better)."""
    from .latency import phase_of

    by_rep: dict = defaultdict(lambda: defaultdict(list))
    for context, recs in by_context(records):
        for r in timerlat_records(recs):
            by_rep[phase_of(context)][r["rep"]].append(r)
    out = Metrics()
    for phase, reps in by_rep.items():
        rows = [rs for _, rs in sorted(reps.items())]
        hists = [merge_all(Histogram.from_record(r["thread"]) for r in rs) for rs in rows]
        p99 = [h.percentile(99) for h in hists if h.count >= samples_to_tell(99)]
        out.add(f"timerlat/{phase}/all CPUs/thread p99 ns", p99, "ns", LOWER, phase, "all CPUs · thread latency p99")
        out.add(
            f"timerlat/{phase}/all CPUs/thread max ns",
            [h.max_ns for h in hists],
            "ns",
            LOWER,
            phase,
            "all CPUs · longest thread latency",
        )
        for cpu in sorted({r["cpu"] for rs in rows for r in rs}):
            out.add(
                f"timerlat/{phase}/cpu {cpu}/thread max ns",
                [r["max_ns"] for rs in rows for r in rs if r["cpu"] == cpu],
                "ns",
                LOWER,
                phase,
                f"CPU {cpu} · longest thread latency",
            )
    return out
