"""Why a probe stops scaling: each explained point's time per operation split
by cause, and the knee of a series named with the causes that grew there.

An explained point (records.ExplainedPoint) charges every instant of every
worker thread in the measured window to one cause, the innermost it was in
(engine/bpf/explain.h). Here those charges become, per operation: user
space, each system call's own kernel time, page faults, each contended lock
(named where the kernel side could, by its callers otherwise), interrupts
taken on the workers' CPUs, waiting for a CPU, sleeping; and what they do not
cover, stated as unexplained. Counts ride along: IPIs sent and received and
TLB flushes per operation, lock waits per operation."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Collection
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path

from ..format import ns as fmt_ns
from ..format import plural
from ..locknames import lock_label, stacks_lost_note
from ..records import ExplainedPoint, ExplainedRep
from . import kstacks
from .histogram import Histogram, merge_all
from .kstacks import ON_CPU_KINDS, on_cpu_cause
from .runlengths import RunLengths
from .stats import Interval, median_ci, ratio_interval

# A knee: where the per-worker rate falls below this share of the smallest
# worker count's (or, failing that, the steepest single step that loses
# more than 1 - this).
KNEE_EFFICIENCY = 0.90
# Below this share of a knee's rise explained, the kernel side is not the
# (whole) story: say so, and what to try.
EXPLAINED_ENOUGH = 0.5
# What a runnable worker waiting for its CPU is called: time some other task
# had that CPU (the study's verdicts look for it by this name).
RUNQ_LABEL = "waiting for a CPU"
# Vectors that are another CPU asking this one to do work.
IPI_VECTORS = ("call_function", "call_function_single", "reschedule")


@dataclass
class Cause:
    key: str  # the same cause at every point of a series: "lock:mmap_lock:rwsem:W", "syscall:munmap", …
    label: str  # for people
    group: str  # user, syscall, fault, lock, interrupt, runq, blocked
    ns_per_op: float
    count_per_op: float
    callers: list[str] = field(default_factory=list)  # a lock: who waited (the costliest chain)
    # runq: who had the CPU meanwhile, [{name, who, ns_per_op, share}] largest first (share of what was split)
    takers: list[dict] = field(default_factory=list)
    # light mode: a share of the time on a CPU the samples gave, and its standard error (None: timed exactly)
    error_ns: float | None = None

    def text(self) -> str:
        """The label, and for a wait for a CPU who took it: "waiting for a CPU (taken by hog 96 %, …)"."""
        return f"{self.label} (taken by {takers_text(self.takers)})" if self.takers else self.label


# Kernel threads named by the group they belong to, not the CPU they serve.
KTHREAD_GROUPS = ("ksoftirqd/", "kworker/", "migration/", "rcu", "cpuhp/", "idle_inject/", "watchdog/")


PARTNER = "the probe's partner"


def taker_name(t: dict, workers: Collection[int] = (), partner: bool = False) -> str:
    """Who had the CPU a worker waited for, for people: a kernel thread by
    its group (kworker/*, rcu*), the run's workers, the probe's partner
    (the other end of its round trips: a thread of the run that is no
    worker, or a process a worker forked, when the probe keeps one), a
    worker's child, the master, an interrupt, or another program by its
    command name. `workers`: the run's worker threads."""
    who, comm = t["who"], t.get("comm") or "?"
    if who == "kernel thread":
        group = next((g for g in KTHREAD_GROUPS if comm.startswith(g)), None)
        return f"{group}*" if group else comm
    if who == "worker":
        if workers and t.get("taker_tid") and t["taker_tid"] not in workers:
            return PARTNER if partner else "another thread of the run"
        return "another worker of the run"
    if who == "child":
        return PARTNER if partner else "a process a worker forked"
    if who == "master":
        return "the oslens master"
    if who == "interrupt":
        return f"{comm} interrupts"
    return comm


def takers_text(takers: list[dict], top: int = 3) -> str:
    """'hog 96 %, kworker/* 3 %': the largest takers and their shares (those that round to 0 % left out)."""
    shown = [t for t in takers[:top] if t["share"] >= 0.005] or takers[:1]
    return ", ".join(f"{t['name']} {t['share']:.0%}".replace("%", " %") for t in shown)


def _hardware_pmu(pmus: Path = Path("/sys/bus/event_source/devices")) -> bool:
    try:
        return any(p.name == "cpu" or p.name.startswith("cpu_") for p in pmus.iterdir())
    except OSError:
        return False


# The sampler's clock is a software one (engine/bpf/loader.c: PERF_COUNT_SW_CPU_CLOCK): its event is an
# interrupt, so while interrupts are off it waits, and the sample lands where they are turned back on.
# These are the functions where that time piles up: the end of a context switch (finish_task_switch,
# and the compiler's copies of it: .isra.0, .constprop.0), an unlock that turns interrupts back on
# (…_irqrestore, …_unlock_irq), the idle loop (its halt turns them on to wake). Time such a function
# gained was spent with interrupts off somewhere before it, which no sample says, so nothing about
# the function's own work (a cache line it shares) can be offered for it. The one home of that rule:
# the software-clock note and the knee's hypothesis both read it.
IRQS_ON_SITES = (
    "finish_task_switch",
    "*_irqrestore",
    "*_unlock_irq",
    # the idle loop, by the names x86 and its cpuidle drivers give it
    "do_idle",
    "cpu_startup_entry",
    "default_idle*",
    "arch_cpu_idle*",
    "cpu_idle_poll",
    "cpuidle_*",
    "*safe_halt",
    "acpi_idle_*",
    "intel_idle*",
    "mwait_idle*",
    "poll_idle",
    "amd_e400_idle",
)
IRQS_ON_SITES_TEXT = "finish_task_switch, …_irqrestore, …_unlock_irq, the idle loop"


def irqs_on_site(function: str) -> bool:
    """Whether a software-clock sampler piles up time spent with interrupts
    off at this kernel function (IRQS_ON_SITES), its compiler suffixes
    (.isra.0, .constprop.0, .part.0, .cold) aside."""
    base = function.split(".", 1)[0]
    return any(fnmatchcase(base, p) for p in IRQS_ON_SITES)


SOFTWARE_CLOCK_NOTE = (
    "kernel functions are sampled on a software clock: time spent with interrupts off shows at the function "
    f"that turns them back on ({IRQS_ON_SITES_TEXT}), not where it was spent"
)


def cache_line_note(pmus: Path = Path("/sys/bus/event_source/devices")) -> str:
    """What the explanation cannot say about cache-line bouncing, and why. The
    kernel-side causes capture waits and IPIs; lines moving between caches cost
    time inside whatever cause ran and need the hardware's coherence events."""
    try:
        hardware = any(p.name == "cpu" or p.name.startswith("cpu_") for p in pmus.iterdir())
    except OSError:
        hardware = False
    why = (
        "oslens does not read coherence (HITM) events yet — perf c2c does"
        if hardware
        else "this machine exposes no hardware PMU (a VM without counters?)"
    )
    return f"cache-line bouncing not measured: {why}; its cost sits inside the causes above"


@dataclass
class ExplainedStats:
    workers: int
    reps: int
    ns_per_op: float  # measured: the workers' time in the window / their operations
    causes: list[Cause]  # costliest first
    unexplained_ns: float  # ns_per_op - the causes (the share nothing was charged with)
    ipis_sent_per_op: float | None  # None: not counted (light mode)
    ipis_received_per_op: float
    tlb_flushes_per_op: dict[str, float] | None  # None: not counted (light mode)
    latency_ns: dict | None  # p50, p99, p99.9 of one operation where the probe times them, and how many (_latency)
    cost: float | None  # 1 - the explained repetitions' median throughput / the plain ones'
    missing: list[str]  # what this kernel could not attribute
    notes: list[str] = field(default_factory=list)
    # OS entry run lengths: per kind of entry (syscall, fault, interrupt) and "all"
    run_lengths: dict[str, RunLengths] = field(default_factory=dict)
    # the workers' sampled stacks: time per operation by kernel function (None: not sampled)
    stacks: kstacks.StackProfile | None = None
    # "full": every system call and fault timed; "light": the time on a CPU split by samples
    mode: str = "full"
    # what the tasks the workers wait on did meanwhile (their children, their partner), per operation
    helpers: list[Cause] = field(default_factory=list)
    helped_by: str = ""  # who those tasks are, for people
    # every function's self time per op and its callers, for the knee's differential (not in to_dict)
    kernel_self_ns: dict[str, float] = field(default_factory=dict, repr=False)
    kernel_callers: dict[str, list[str]] = field(default_factory=dict, repr=False)
    folded: dict[str, float] = field(default_factory=dict, repr=False)
    # light mode: its BPF programs' run time (on any CPU) over the workers' time in the window; None: not measured
    program_share: float | None = None
    program_ns_per_op: float | None = None
    # the cost's bounds from both sides' repetitions, and the confidence they have together (0: none)
    cost_low: float | None = None
    cost_high: float | None = None
    cost_confidence: float | None = None

    PRIVATE = ("kernel_self_ns", "kernel_callers", "folded")

    def to_dict(self) -> dict:
        from dataclasses import asdict

        return {k: v for k, v in asdict(self).items() if k not in self.PRIVATE}

    def by_key(self) -> dict[str, float]:
        return {c.key: c.ns_per_op for c in self.causes}


@dataclass
class Knee:
    from_workers: int
    to_workers: int
    efficiency_from: float
    efficiency_to: float
    rise_ns: float  # time per op gained over the interval
    ranked: list[tuple[str, float, float]]  # (label, ns gained, share of the rise), largest first
    unexplained_ns: float
    sentence: str
    # the kernel functions whose sampled time per op grew most between the two points
    functions: kstacks.Differential | None = None


def _cause(c: dict) -> tuple[str, str, str]:
    """(key, label, group) of one charge of an `explain` record."""
    kind, name = c["kind"], c.get("name")
    if kind == "user":
        # between the kernel's tracepoints: also its entry and exit paths (and part of the tracing)
        return "user", "user space + kernel entry/exit", "user"
    if kind == "syscall":
        return f"syscall:{name}", f"{name}() in the kernel", "syscall"
    if kind == "fault":
        if name == "end not seen":  # retried or spurious: charged up to the thread's next system call
            return "fault:unended", "page faults, end unseen", "fault"
        return f"fault:{name}", f"{name} page faults", "fault"
    if kind == "lock":
        lock = (name or "").split(" (cpu")[0] or c.get("lock_symbol")
        callers = c.get("callers") or []
        where = lock_label(lock, None, callers, c["id"])
        return (
            f"lock:{lock or (callers[0] if callers else c['id'])}:{c['lock_kind']}",
            f"{where} ({c['lock_kind']})",
            "lock",
        )
    if kind == "vector" and name in IPI_VECTORS:
        return f"interrupt:{name}", f"IPIs received ({name})", "interrupt"
    if kind in ("irq", "softirq", "vector"):
        what = f"{name} softirq" if kind == "softirq" else f"{name} interrupts"
        return f"interrupt:{kind}:{name}", what, "interrupt"
    if kind == "runq":
        return "runq", RUNQ_LABEL, "runq"
    if kind == "blocked":
        return (f"blocked:{name}", f"asleep in {name}()", "blocked") if name else ("blocked", "asleep", "blocked")
    raise ValueError(kind)


@dataclass
class _Charges:
    """The charges of an explained point's repetitions, summed per cause."""

    ns: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    counts: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    labels: dict[str, tuple[str, str]] = field(default_factory=dict)
    chains: dict[str, dict[tuple, float]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(float)))
    sent: int = 0
    received: int = 0
    tlb: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    takers: dict[tuple[str, str], float] = field(default_factory=lambda: defaultdict(float))
    errors: dict[str, float] = field(default_factory=dict)  # light mode: a sampled share's standard error

    def add_taker(self, t: dict, workers: Collection[int], partner: bool) -> None:
        name = taker_name(t, workers, partner)
        self.takers[(name, "partner" if name == PARTNER else t["who"])] += t["ns"]

    def add(self, c: dict) -> None:
        if c["kind"] == "ipi_sent":
            self.sent += c["count"]
            return
        if c["kind"] == "tlb_flush":
            self.tlb[c.get("name") or str(c["id"])] += c["count"]
            return
        key, label, group = _cause(c)
        self.labels[key] = (label, group)
        self.ns[key] += c["ns"]
        self.counts[key] += c["count"]
        if c["kind"] == "vector" and c.get("name") in IPI_VECTORS:  # the same IPIs as their cause
            self.received += c["count"]
        if c["kind"] == "lock":
            self.chains[key][tuple(c.get("callers") or [])] += c["ns"]

    def split_untimed(self, samples: dict[tuple[str, str, str], int], untimed: float | None = None) -> int:
        """Light mode: the time no exact cause took, `untimed`, shared out
        as its samples fell (each share with its binomial standard error);
        the samples used. Without `untimed`, the on-CPU charge `user` is
        that time (light runs made before the workers' CPUs sampled them
        off those CPUs too, when switches were still timed)."""
        n = sum(samples.values())
        if untimed is None:
            untimed = self.ns.pop("user", 0.0)
            self.counts.pop("user", None)
        if not n:
            self.ns["user"] += untimed
            self.labels["user"] = ("untimed, not split (no sample fell in it)", "user")
            return 0
        for (key, label, group), k in samples.items():
            share = k / n
            self.labels[key] = (label, group)
            self.ns[key] += untimed * share
            self.errors[key] = untimed * math.sqrt(share * (1 - share) / n)
        return n

    def add_sampled(self, samples: dict[tuple[str, str, str], int], period_ns: int) -> None:
        """Light mode, a helper's time on a CPU: no window bounds it, so
        each sample stands for one period (a Poisson count's error: √n
        periods)."""
        for (key, label, group), k in samples.items():
            self.labels[key] = (label, group)
            self.ns[key] += k * period_ns
            self.errors[key] = math.sqrt(self.errors.get(key, 0.0) ** 2 + k * period_ns**2)

    def causes(self, ops: float) -> list[Cause]:
        """Per operation, costliest first; a lock with its costliest chain of callers."""
        out = [
            Cause(
                k,
                self.labels[k][0],
                self.labels[k][1],
                v / ops,
                self.counts[k] / ops if k not in self.errors else None,
                list(max(self.chains[k].items(), key=lambda kv: kv[1])[0]) if self.chains.get(k) else [],
                self._takers(ops) if k == "runq" else [],
                self.errors[k] / ops if k in self.errors else None,
            )
            for k, v in self.ns.items()
        ]
        return sorted(out, key=lambda c: -c.ns_per_op)

    def _takers(self, ops: float) -> list[dict]:
        split = sum(self.takers.values())
        # light mode samples the takers: their shares of the wait the samples split
        sampled = "runq" in self.errors
        return [
            {
                "name": name,
                "who": who,
                "ns_per_op": (ns / split * self.ns["runq"] if sampled else ns) / ops,
                "share": ns / split,
            }
            for (name, who), ns in sorted(self.takers.items(), key=lambda kv: -kv[1])
            if split > 0
        ]


def _sample_cause(s: dict) -> str:
    """The key of the cause a sample fell in, as its charges' (a lock by its name or address)."""
    if s["kind"] == "lock":
        return f"lock:{s.get('name') or s['id']}"
    if s["kind"] == "fault":  # sampled while under way: not yet known as minor or major
        return "fault"
    if s["kind"] in ON_CPU_KINDS:
        return on_cpu_cause(s)[0]
    return _cause(s)[0]


LATE_NOTE = (
    "{n} of {of} ran with the sampler late (an overloaded machine): kept, as their charges are of the window "
    "planned on the clock and their operations taken at the rate measured between the samples; a plain point's late "
    "repetition is left out, its rate being of the samples"
)
LIGHT_NOTE = (
    "light mode: nothing ran per system call or page fault; the time outside lock waits and interrupts "
    "was split by {n} samples{rate}{where}, so each of its shares is an estimate (± one standard error in --json), "
    "and calls per op are not counted"
)
# Light mode leaves the lock programs out of a window when the warm-up's
# contention events were too many and too few of them slept (the engine's
# rule, engine/bpf/explain.h; the record's lock_waits).
LOCK_WAITS_UNTIMED_NOTE = (
    "light mode, {n} of {of}: lock waits that sleep were not timed — in the warm-up, contended locks were met "
    "at least {rate:,.0f} times a second per worker CPU (over {bound:,}), {sleeping} of them waits that sleep, and "
    "the two programs on every contended acquisition would have cost more than they explain; a wait that sleeps "
    "counts as asleep in its system call, and a spinning one is sampled as always"
)


def lock_waits_note(reps: list) -> str | None:
    """What the repetitions whose window ran without the lock programs say, or None."""
    untimed = [r.explain["lock_waits"] for r in reps if not r.explain.get("lock_waits", {}).get("sleeping_timed", True)]
    if not untimed:
        return None
    rate = min(w["per_cpu_s"] for w in untimed)
    sleeping = sum(w["sleeping"] for w in untimed)
    return LOCK_WAITS_UNTIMED_NOTE.format(
        n=plural(len(untimed), "repetition"),
        of=len(reps),
        rate=rate,
        bound=untimed[0]["bound_per_cpu_s"],
        sleeping="none" if not sleeping else f"{sleeping:,}",
    )


# Light mode takes the stack of a lock wait that sleeps with a chance that
# keeps the stacks to a bound per second (engine/bpf/explain.h; the
# record's lock_waits.stack_share); the others' callers are shared out.
UNSTACKED_NOTE = (
    "light mode: {n:,} of {of:,} lock waits that sleep were timed without their stack (each took one with a chance "
    "of {share}, the stacks held to {bound:,} a second per worker CPU); their time is shared out among the callers "
    "of the same lock as its stacked waits fell"
)


def shared_callers(charges: list[dict]) -> tuple[list[dict], int, int]:
    """A repetition's charges with each lock wait timed without its stack
    (`stack_taken` false) shared out among the stacked waits of the same
    lock (address and kind) as they fell: each stacked chain gets that
    share of the unstacked time (by its time) and of their count (by its
    count). A lock none of whose waits took a stack keeps them, callers
    unknown. Also the waits stacked and unstacked, counted."""
    stacked: dict[tuple, list[dict]] = defaultdict(list)
    for c in charges:
        if c["kind"] == "lock" and c.get("stack_taken", True):
            stacked[(c["id"], c["lock_kind"])].append(c)
    out, n_stacked, n_unstacked = [], 0, 0
    for c in charges:
        if c["kind"] != "lock":
            out.append(c)
            continue
        if c.get("stack_taken", True):
            n_stacked += c["count"]
            out.append(c)
            continue
        n_unstacked += c["count"]
        like = stacked.get((c["id"], c["lock_kind"]), [])
        ns, count = sum(s["ns"] for s in like), sum(s["count"] for s in like)
        if not ns or not count:
            out.append(c)
            continue
        rest = {k: v for k, v in c.items() if k != "stack_taken"}
        for s in like:
            caller = {k: s[k] for k in ("stack", "callers") if k in s}
            out.append({**rest, **caller, "ns": c["ns"] * s["ns"] / ns, "count": c["count"] * s["count"] / count})
    return out, n_stacked, n_unstacked


def unstacked_note(reps: list, stacked: float, unstacked: float) -> str | None:
    """What light mode's waits timed without their stack say, or None."""
    weighed = sorted(w["stack_share"] for r in reps if (w := r.explain.get("lock_waits", {})).get("stack_share", 1) < 1)
    if not unstacked or not weighed:
        return None
    bound = next(r.explain["lock_waits"]["stacks_bound_per_cpu_s"] for r in reps if "lock_waits" in r.explain)
    share = f"{weighed[0]:.2g}" + (f" to {weighed[-1]:.2g}" if f"{weighed[-1]:.2g}" != f"{weighed[0]:.2g}" else "")
    return UNSTACKED_NOTE.format(n=round(unstacked), of=round(stacked + unstacked), share=share, bound=bound)


PROGRAM_TIME_NOTE = "light mode's programs' run time not measured in {n}: {why}"


def program_time(reps: list) -> tuple[float | None, str | None]:
    """Light mode: its programs' run time over the workers' time, from the
    kernel's BPF statistics over each repetition's window (the record's
    program_time), or None and a note saying why not. On any CPU, set
    against the workers' time: the programs that run elsewhere (the master's
    and helpers' CPUs) count too. It leaves out what runs around them: the
    clock's interrupt and the tracepoints' dispatch."""
    light = [r for r in reps if r.explain.get("mode") == "light"]
    if not light:
        return None, None
    times = [r.explain.get("program_time", {}) for r in light]
    unknown = [t for t in times if not t.get("available")]
    if unknown:
        why = unknown[0].get("reason") or "the engine that ran them did not record it"
        return None, PROGRAM_TIME_NOTE.format(n=plural(len(unknown), "repetition"), why=why)
    worker_ns = sum(t["window_ns"] * len(r.workers) for r, t in zip(light, times))
    if worker_ns <= 0:
        return None, None
    return sum(p["ns"] for t in times for p in t["by_program"]) / worker_ns, None


# Where light mode's samples were taken: the workers' CPUs, on and off them
# (the record's off_cpu_sampled), or only while they ran.
LIGHT_WHERE = " of the workers' CPUs, running or not (IPIs sent and TLB flushes not counted)"
LIGHT_WHERE_BEFORE = " of the time on a CPU"


@dataclass
class _Sampled:
    """The sampled stacks of an explained point's repetitions."""

    samples: list[kstacks.Sample] = field(default_factory=list)
    period_ns: int = 0
    lost: int = 0
    # light mode: the samples on a CPU outside the exact causes, by the cause they tell
    on_cpu: Counter = field(default_factory=Counter)
    helper_on_cpu: Counter = field(default_factory=Counter)  # the same, of the helpers
    # light mode: the workers sampled off their CPUs — waiting for one, or asleep in a call
    off_cpu: Counter = field(default_factory=Counter)

    def add(self, r, ep: ExplainedPoint) -> None:
        if not r.explain.get("sample_period_ns"):
            return
        self.period_ns = r.explain["sample_period_ns"]
        self.lost += r.explain.get("samples_lost", 0)
        light = r.explain.get("mode") == "light"
        for s in r.explain.get("samples", []):
            helper = is_helper(s, r, ep)
            if s.get("off_cpu"):  # no stack; a lock wait is timed exactly, and left to its charge
                if s["tid"] in r.tids and s["kind"] in ("runq", "blocked"):
                    self.off_cpu[_cause(s)] += s["count"]
                continue
            if s["tid"] in r.tids or helper:  # not the thread-mode host
                frames = tuple(s.get("frames") or s.get("stack") or ())
                cause = _sample_cause(s)
                self.samples.append(kstacks.Sample(f"{HELPER}:{cause}" if helper else cause, frames, s["count"]))
                if light and s["kind"] in ON_CPU_KINDS:
                    (self.helper_on_cpu if helper else self.on_cpu)[on_cpu_cause(s)] += s["count"]

    def rate(self) -> str:
        """' at N Hz', the rate they were taken at; '' if none were."""
        return f" at {1e9 / self.period_ns:,.0f} Hz" if self.period_ns else ""

    def profiles(self, ops: float) -> dict:
        stacks = kstacks.profile(self.samples, self.period_ns, ops, self.lost)
        if stacks is None:
            return {}
        return {
            "stacks": stacks,
            "kernel_self_ns": kstacks.self_ns(self.samples, self.period_ns, ops),
            "kernel_callers": kstacks.callers_of(self.samples),
            "folded": kstacks.folded(self.samples, self.period_ns, ops),
        }


def _run_lengths(ep: ExplainedPoint) -> dict[str, RunLengths]:
    """The OS entries' run lengths per kind of entry, and over all of them."""
    out = {}
    for kind in ("syscall", "fault", "interrupt"):
        parts = [r.explain["run_lengths"][kind] for r in ep.reps if kind in r.explain.get("run_lengths", {})]
        if rl := RunLengths.of(parts):
            out[kind] = rl
    every = [r.explain["run_lengths"][k] for r in ep.reps for k in r.explain.get("run_lengths", {})]
    if rl := RunLengths.of(every):
        out["all"] = rl
    return out


def _latency(ep: ExplainedPoint) -> dict | None:
    """p50, p99 and p99.9 of one operation, None where its timed operations
    are too few to tell it (TAIL_RULE); how many were timed, and one in how
    many (`every`: a number, or the least and the most, where workers
    chose apart; 1: all)."""
    hists = [Histogram.from_record(h["hist"]) for r in ep.reps for h in r.hists]
    if not hists:
        return None
    h = merge_all(hists)
    p50, p99, p999 = (None if v != v else float(v) for v in h.told_percentiles([50, 99, 99.9]))
    everies = sorted({int(x.get("every", 1)) for r in ep.reps for x in r.hists})
    every = everies[0] if len(everies) == 1 else (everies[0], everies[-1])
    return {"p50": p50, "p99": p99, "p99.9": p999, "timed": h.count, "every": every}


def _charged_ops(ep: ExplainedPoint) -> float:
    """The workers' operations over the charged windows.

    They are counted between the master's first and last samples, the
    charges over the window planned for them; on a loaded machine the
    samples come late (by a scheduler slice, 3% of a 0.3 s run). Each
    worker's operations are therefore taken at its measured rate over the
    charged window: time per operation is charged time per second over
    operations per second."""
    return sum(_rep_ops(r) for r in ep.reps)


def _rep_ops(r: ExplainedRep) -> float:
    """One repetition's operations over its charged window (_charged_ops)."""
    return sum(w["ops"] * r.window_ns / (w["seconds"] * 1e9) for w in r.workers)


def attribution_cost(ep: ExplainedPoint, plain: Interval) -> Interval | None:
    """What the explained repetitions' throughput per worker is of the plain
    ones' (1 - it: the attribution's cost), each side's median with its
    order-statistic interval; None where the plain point ran nothing."""
    if not plain.median or not ep.reps:
        return None
    rates = [_rep_ops(r) / (r.window_ns * len(r.workers) / 1e9) for r in ep.reps]
    return ratio_interval(median_ci(rates), plain)


# The tasks a worker waits on, which the engine follows as its helpers: the
# children it forks (fork's, which it waits for in wait4) and its partner
# (sem's and pingpong's other end). Their time is not the workers' — it
# overlaps the workers' sleep — and is said beside it, per operation.
HELPER = "helper"


def is_helper(c: dict, r, ep: ExplainedPoint) -> bool:
    """A charge or sample of a helper: marked so by the engine (a child or
    a partner process, keyed by its worker's thread), or in thread mode a
    thread of the run that is neither a worker nor the master (the
    partner thread of a probe that keeps one)."""
    if c.get("helper"):
        return True
    return (
        ep.mode == "thread"
        and bool(ep.header.get("probe", {}).get("partner"))
        and c["tid"] not in r.tids
        and c["tid"] != ep.header.get("pid")
    )


def helped_by(ep: ExplainedPoint) -> str:
    return PARTNER if ep.header.get("probe", {}).get("partner") else "the workers' children"


def point_samples(ep: ExplainedPoint) -> kstacks.PointSamples | None:
    """An explained point's sampled kernel functions, for `compare`; None
    when it was not sampled."""
    sampled = _Sampled()
    for r in ep.reps:
        sampled.add(r, ep)
    return kstacks.PointSamples.of(sampled.samples, sampled.period_ns, _charged_ops(ep))


def _gathered(ep: ExplainedPoint) -> tuple[_Charges, _Charges, _Sampled, set[str], list[str]]:
    """An explained point's repetitions summed: the workers' charges, their
    helpers', the samples, what the kernel could not attribute, the notes."""
    charges, helpers = _Charges(), _Charges()
    sampled = _Sampled()
    missing: set[str] = set()
    notes: list[str] = [cache_line_note()]
    partner = bool(ep.header.get("probe", {}).get("partner"))
    waits = [0, 0]  # lock waits that sleep, stacked and not (light mode)
    for r in ep.reps:
        sampled.add(r, ep)
        missing.update(r.explain.get("missing", []))
        if r.explain.get("lost"):
            notes.append(
                f"repetition {r.rep}: {plural(r.explain['lost'], 'charge')} found no room in the kernel's maps"
            )
        if r.explain.get("lock_stacks_lost"):
            notes.append(f"repetition {r.rep}: {stacks_lost_note(r.explain['lock_stacks_lost'], 'lock wait')}")
        if r.explain.get("off_cpu_unseen"):
            notes.append(
                f"repetition {r.rep}: {plural(r.explain['off_cpu_unseen'], 'tick')} found a worker off its CPU "
                "before it had run there, when where it waited is not yet known: not sampled"
            )
        rep_charges, stacked, unstacked = shared_callers(r.explain["charges"])
        waits[0] += stacked
        waits[1] += unstacked
        for c in rep_charges:
            if is_helper(c, r, ep):
                helpers.add(c)
            elif c["tid"] in r.tids:  # not the thread-mode host, waiting for its workers
                charges.add(c)
        for t in r.explain.get("runq_takers", []):
            if t["tid"] in r.tids:
                charges.add_taker(t, r.tids, partner)
        for why in (r.explain.get("unresolved_because"), r.explain.get("lock_symbols_unavailable")):
            if why and why not in notes:
                notes.append(why)
    if untimed := unstacked_note(ep.reps, *waits):
        notes.append(untimed)
    return charges, helpers, sampled, missing, notes


def explain_point(ep: ExplainedPoint, plain: Interval | None = None) -> ExplainedStats | None:
    """The per-operation causes of one explained point, over its
    repetitions; None when it has none with the attribution loaded.
    `plain`: the plain point's operations per second of a worker, against
    which the attribution's cost is stated."""
    if not ep.reps:
        return None
    ops = _charged_ops(ep)
    window = sum(r.window_ns * len(r.workers) for r in ep.reps)
    charges, helpers, sampled, missing, notes = _gathered(ep)
    if not ops:
        return None
    if sampled.samples:
        notes.append(SOFTWARE_CLOCK_NOTE)
    if ep.late:
        notes.append(LATE_NOTE.format(n=plural(ep.late, "repetition"), of=len(ep.reps)))
    if untimed := lock_waits_note(ep.reps):
        notes.append(untimed)
    mode = "light" if any(r.explain.get("mode") == "light" for r in ep.reps) else "full"
    counted = mode == "full"  # IPIs sent and TLB flushes
    if mode == "light" and all(r.explain.get("off_cpu_sampled") for r in ep.reps):
        untimed = window - sum(charges.ns.values())
        n = charges.split_untimed(sampled.on_cpu + sampled.off_cpu, untimed)
        notes.append(LIGHT_NOTE.format(n=n, rate=sampled.rate(), where=LIGHT_WHERE))
        helpers.add_sampled(sampled.helper_on_cpu, sampled.period_ns)
    elif mode == "light":
        counted = True
        n = charges.split_untimed(sampled.on_cpu)
        notes.append(LIGHT_NOTE.format(n=n, rate=sampled.rate(), where=LIGHT_WHERE_BEFORE))
        if helpers.ns:
            helpers.split_untimed(sampled.helper_on_cpu)
    causes = charges.causes(ops)
    per_op = window / ops
    share, why = program_time(ep.reps)
    if why:
        notes.append(why)
    ratio = attribution_cost(ep, plain) if plain else None
    bounded = ratio is not None and math.isfinite(ratio.high)  # not where a plain repetition ran nothing
    return ExplainedStats(
        workers=ep.workers,
        reps=len(ep.reps),
        mode=mode,
        helpers=helpers.causes(ops),
        helped_by=helped_by(ep) if helpers.ns else "",
        ns_per_op=per_op,
        causes=causes,
        unexplained_ns=per_op - sum(c.ns_per_op for c in causes),
        ipis_sent_per_op=charges.sent / ops if counted else None,
        ipis_received_per_op=charges.received / ops,
        tlb_flushes_per_op={k: v / ops for k, v in sorted(charges.tlb.items())} if counted else None,
        latency_ns=_latency(ep),
        cost=None if ratio is None else 1 - ratio.median,
        cost_low=1 - ratio.high if bounded else None,
        cost_high=1 - ratio.low if bounded else None,
        cost_confidence=ratio.coverage if bounded else None,
        program_share=share,
        program_ns_per_op=None if share is None else share * per_op,
        missing=sorted(missing),
        notes=notes,
        run_lengths=_run_lengths(ep),
        **sampled.profiles(ops),
    )


def find_knee(points: list[ExplainedStats], efficiency: list[float] | None = None) -> Knee | None:
    """Where the per-worker rate drops, and the causes ranked by how much of
    the rise in time per operation each explains; None if it scales.
    `efficiency` (per point, against the smallest worker count) is the plain
    curve's, where there is one: the explained repetitions pay for their
    attribution, so their own curve is only the fallback."""
    order = sorted(range(len(points)), key=lambda i: points[i].workers)
    points = [points[i] for i in order]
    if len(points) < 2 or points[0].ns_per_op <= 0:
        return None
    base = points[0].ns_per_op
    eff = [efficiency[i] for i in order] if efficiency else [base / p.ns_per_op for p in points]
    at = next((i for i in range(len(points) - 1) if eff[i] >= KNEE_EFFICIENCY > eff[i + 1]), None)
    if at is None:
        steps = [(eff[i] / eff[i + 1] if eff[i + 1] > 0 else float("inf"), i) for i in range(len(points) - 1)]
        worst, i = max(steps)
        if worst - 1 <= 1 - KNEE_EFFICIENCY:
            return None
        at = i
    a, b = points[at], points[at + 1]
    rise = b.ns_per_op - a.ns_per_op
    if rise <= 0:
        # The plain curve's knee is not in the explained repetitions (their attribution slows them
        # and changes what contends): there is no rise to share out, and none is.
        sentence = (
            f"from {a.workers} to {b.workers} workers efficiency fell {eff[at]:.0%} → {eff[at + 1]:.0%}, but in "
            f"the explained repetitions time per op did not rise (it fell {fmt_ns(-rise)}): the knee is not in "
            "them, and nothing is charged with it"
        )
        return Knee(a.workers, b.workers, eff[at], eff[at + 1], rise, [], 0.0, sentence)
    before, after = a.by_key(), b.by_key()
    label = {c.key: c.label for c in a.causes} | {c.key: c.text() for c in b.causes}
    callers = {c.key: c.callers for c in a.causes + b.causes if c.callers}
    deltas = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in set(before) | set(after)}
    ranked = sorted(((k, d) for k, d in deltas.items() if d > 0), key=lambda kd: -kd[1])
    unexplained = rise - sum(deltas.values())
    if abs(unexplained) <= 1e-9 * rise:  # light mode shares the rise out whole: what is left is rounding
        unexplained = 0.0
    parts = []
    for k, d in ranked[:3]:
        chain = f" ← {' ← '.join(callers[k][:2])}" if k in callers and not label[k].startswith("a lock taken") else ""
        parts.append(f"{label[k]}{chain} {fmt_ns(d)} ({d / rise:.0%})")
    sentence = (
        f"from {a.workers} to {b.workers} workers, time per op rose {fmt_ns(rise)} "
        f"(efficiency {eff[at]:.0%} → {eff[at + 1]:.0%})"
        + (": " + ", ".join(parts) if parts else "")
        + f"; unexplained {fmt_ns(unexplained)}"
    )
    functions = None
    if a.stacks and b.stacks:
        functions = kstacks.differential(a.kernel_self_ns, b.kernel_self_ns, b.kernel_callers)
    if functions:
        sentence += f". Sampled kernel time per op rose {fmt_ns(functions.kernel_rise_ns)}: {functions.text()}"
        if not any(k.startswith("lock:") for k, _ in ranked[:3]) and functions.listed:
            sentence += _growth_hypothesis(functions.listed[0].name)
    sentence += _helpers_rise(a, b)
    explained = sum(d for _, d in ranked)
    if rise > 0 and explained / rise < EXPLAINED_ENOUGH:
        sentence += (
            ". Nothing the kernel side measures explains most of it: workers sharing a core (SMT) or a "
            "cache would look like this — compare --placement spread with --placement compact"
        )
    return Knee(
        a.workers,
        b.workers,
        eff[at],
        eff[at + 1],
        rise,
        [(label[k], d, d / rise if rise else 0.0) for k, d in ranked],
        unexplained,
        sentence,
        functions,
    )


def _growth_hypothesis(function: str) -> str:
    """What a kernel function's growth with more workers may be, no lock
    having been contended more: a cache line the workers share — except
    where the software clock piles up time with interrupts off
    (irqs_on_site), whose growth is that time, spent elsewhere."""
    if irqs_on_site(function):
        return (
            f" (no lock was contended more: {function} is where the software clock counts time spent with "
            "interrupts off, so its growth is time with interrupts off whose place the clock cannot see)"
        )
    return (
        f" (no lock was contended more: {function} taking longer with more workers is "
        "what a cache line they share would do — a hypothesis; no PMU here counts the line's moves)"
    )


def _helpers_rise(a: ExplainedStats, b: ExplainedStats) -> str:
    """'. Meanwhile the workers' children took 9 µs more per op: exit_group()
    in the kernel +6 µs, …' — what the tasks the workers wait on did more of,
    which the workers' own sleep does not say."""
    if not (a.helpers or b.helpers):
        return ""
    before = {c.key: c.ns_per_op for c in a.helpers}
    after = {c.key: c.ns_per_op for c in b.helpers}
    label = {c.key: c.label for c in a.helpers + b.helpers}
    deltas = sorted(((k, after.get(k, 0.0) - before.get(k, 0.0)) for k in set(before) | set(after)),
                    key=lambda kd: -kd[1])  # fmt: skip
    total = sum(after.values()) - sum(before.values())
    grew = [f"{label[k]} +{fmt_ns(d)}" for k, d in deltas[:3] if d > 0]
    if total <= 0 or not grew:
        return ""
    return f". Meanwhile {b.helped_by or a.helped_by} took {fmt_ns(total)} more per op: {', '.join(grew)}"


def scales_sentence(points: list[ExplainedStats], efficiency: list[float] | None = None) -> str:
    base = min(points, key=lambda p: p.workers).ns_per_op
    worst = min(efficiency) if efficiency else min(base / p.ns_per_op for p in points)
    return f"no knee: efficiency stays at {worst:.0%} or more up to {max(p.workers for p in points)} workers"
