"""Sampled kernel stacks as time per operation by kernel function.

An explained repetition samples each worker thread on its own CPU time
(engine/bpf/explain.bpf.c: a software clock event every `sample_period_ns`
of the thread's time); each sample carries the cause the thread was in (a
system call, a fault, a lock wait, an interrupt, user space) and, in the
kernel, its stack. A sample stands for one period of the thread's time, so
per operation a function's time is its samples × the period / the
operations: exclusive (`self`: the function was running) and inclusive
(`total`: it was on the stack). It is an estimate: a function seen in n
samples is known to about 1/√n of its time, which `error` states.

The knee's differential profile compares two such profiles: the functions
whose time per operation grew most, each with its callers, and what the
listed ones leave over. Everything here is arithmetic on stored records: no
kernel is read."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from ..format import ns as fmt_ns

# A function below this share of the kernel rise is summed in the rest, not listed.
LISTED_SHARE = 0.02
# At most this many functions are listed in a knee's sentence (all are in its record).
LISTED = 5
# Functions kept per point in a summary (the whole profile is in the records and the export).
KEPT = 25
# Frames that are the sampling's own way into the kernel, not the workload's code.
USER_SPACE = "[user space]"


def digits(samples: int) -> int:
    """Significant digits a time estimated from this many samples carries:
    its relative error is about 1/√n (30 % under 10 samples, 3 % at 1000)."""
    return 1 if samples < 10 else 2 if samples < 1000 else 3


# A sample taken where nothing timed the thread exactly (explain's light
# mode, a profile) says where its time on a CPU went: in user space, or in
# the kernel — entered by a system call (its number read from the thread's
# registers) or a page fault, which the entry at the bottom of the stack
# tells apart.
ON_CPU_KINDS = ("user", "kernel")
FAULT_ENTRY = "asm_exc_page_fault"
SYSCALL_ENTRY = "entry_SYSCALL_64"
SAMPLED_FAULTS = ("fault:sampled", "page faults (minor and major together)", "fault")


# The slow paths a waiter spins in for a spinlock or rwlock (light mode
# samples them: explain.bpf.c times only waits that sleep), and the locking
# code between them and the code that wanted the lock.
SPIN_SLOWPATHS = ("native_queued_spin_lock_slowpath", "__pv_queued_spin_lock_slowpath",
                  "queued_spin_lock_slowpath", "queued_read_lock_slowpath", "queued_write_lock_slowpath")  # fmt: skip
LOCKING = ("_raw_spin_lock", "_raw_read_lock", "_raw_write_lock", "do_raw_spin_lock", "queued_", "native_queued",
           "__pv_queued", "pv_")  # fmt: skip
SPIN_KIND = "spin, sampled"


def spinning_in(frames: tuple[str, ...]) -> list[str] | None:
    """The callers of the lock a sample spins for (innermost first), when
    its stack is in a spin slow path; None otherwise."""
    # near the leaf: above the slow path only what runs inside the wait (an interrupt's entry, a tracer)
    at = next((i for i, f in enumerate(frames[:8]) if f.split(".")[0] in SPIN_SLOWPATHS), None)
    if at is None:
        return None
    return [f for f in frames[at + 1 :] if not f.startswith(LOCKING)][:3]


def on_cpu_cause(s: dict) -> tuple[str, str, str]:
    """(key, label, group) of a sample on a CPU with nothing timed exactly,
    keyed as explain's full mode charges are where they are the same thing
    ("syscall:dup"); one spinning for a lock is that lock's wait, named by
    the code that wanted it."""
    frames = s.get("frames") or ()
    if s["kind"] == "user" or not (frames or s.get("stack")):
        return "user", "user space", "user"
    callers = spinning_in(tuple(frames))
    if callers is not None:
        where = f"a lock taken in {callers[0]}" if callers else "a lock"
        return f"lock:{callers[0] if callers else '?'}:{SPIN_KIND}", f"{where} ({SPIN_KIND})", "lock"
    if FAULT_ENTRY in frames:  # a fault nested in a system call is the fault's, as full mode charges it
        return SAMPLED_FAULTS
    if any(f.startswith(SYSCALL_ENTRY) for f in frames) and s.get("name"):
        return f"syscall:{s['name']}", f"{s['name']}() in the kernel", "syscall"
    if not frames:
        return "kernel:unresolved", "in the kernel (stack not resolved to names)", "kernel"
    return "kernel:other", "in the kernel, entered otherwise", "kernel"


@dataclass
class Sample:
    """One aggregated sample: the cause it fell in and its kernel frames,
    innermost first ([] in user space), seen `count` times."""

    cause: str  # the cause's key, as explain.Cause.key
    frames: tuple[str, ...]
    count: int


@dataclass
class Function:
    name: str
    self_ns: float  # per operation, the function itself running
    total_ns: float  # per operation, the function or what it called
    samples: int  # samples in which it was running
    callers: list[str] = field(default_factory=list)  # its costliest chain of callers, nearest first

    @property
    def error(self) -> float:
        """The relative sampling error of self_ns, about 1/√n."""
        return 1 / math.sqrt(self.samples) if self.samples else float("inf")


@dataclass
class StackProfile:
    period_ns: int
    samples: int  # every sample of the point's repetitions
    kernel_ns: float  # per operation: samples with a kernel stack
    user_ns: float  # per operation: samples in user space
    functions: list[Function]  # the costliest by self time first (KEPT of them)
    by_cause: dict[str, float]  # per operation, kernel time of each cause
    lost: int = 0  # samples the kernel's maps had no room for


def _walk(samples: list[Sample]):
    """Per function: self samples, inclusive samples, and self samples by caller chain."""
    own: Counter = Counter()
    total: Counter = Counter()
    chains: dict[str, Counter] = defaultdict(Counter)
    for s in samples:
        if not s.frames:
            continue
        leaf = s.frames[0]
        own[leaf] += s.count
        chains[leaf][s.frames[1:4]] += s.count
        for f in set(s.frames):  # a recursive function counts once per sample
            total[f] += s.count
    return own, total, chains


def profile(samples: list[Sample], period_ns: int, ops: float, lost: int = 0) -> StackProfile | None:
    """The per-operation profile of a point's samples; None without samples
    or operations."""
    n = sum(s.count for s in samples)
    if not n or not ops or not period_ns:
        return None
    per = period_ns / ops
    own, total, chains = _walk(samples)
    by_cause: dict[str, float] = defaultdict(float)
    for s in samples:
        if s.frames:
            by_cause[s.cause] += s.count * per
    functions = [
        Function(f, c * per, total[f] * per, c, list(chains[f].most_common(1)[0][0])) for f, c in own.most_common(KEPT)
    ]
    kernel = sum(own.values())
    return StackProfile(period_ns, n, kernel * per, (n - kernel) * per, functions, dict(by_cause), lost)


def self_ns(samples: list[Sample], period_ns: int, ops: float) -> dict[str, float]:
    """Every function's self time per operation (not only the kept ones)."""
    own, _, _ = _walk(samples)
    return {f: c * period_ns / ops for f, c in own.items()}


@dataclass
class FunctionDelta:
    name: str
    delta_ns: float  # per operation, self time at the larger count minus at the smaller
    share: float  # of the rise of sampled kernel time per operation
    callers: list[str]


@dataclass
class Differential:
    """What grew in the kernel between two points, by function."""

    kernel_rise_ns: float  # sampled kernel time per operation, larger count minus smaller
    listed: list[FunctionDelta]  # largest growth first, each at least LISTED_SHARE of the rise
    rest_ns: float  # the rise the listed functions do not cover (the smaller ones, and what shrank)

    def text(self) -> str:
        """'copy_page_range +1.2 µs (← dup_mmap ← copy_process), …; 0.4 µs in functions each below 2 %'."""
        parts = []
        for d in self.listed[:LISTED]:
            chain = f" (← {' ← '.join(d.callers[:2])})" if d.callers else ""
            parts.append(f"{d.name} +{fmt_ns(d.delta_ns)}{chain}")
        more = self.listed[LISTED:]
        rest = self.rest_ns + sum(d.delta_ns for d in more)
        tail = f"{fmt_ns(rest)} in the other functions" if more else f"{fmt_ns(rest)} in functions each below 2 %"
        return ", ".join(parts) + ("; " if parts else "") + tail


def differential(
    before: dict[str, float], after: dict[str, float], callers: dict[str, list[str]]
) -> Differential | None:
    """The functions whose self time per operation grew from `before` to
    `after` (each a self_ns map), with their callers at `after`; None when
    sampled kernel time did not rise."""
    rise = sum(after.values()) - sum(before.values())
    if rise <= 0:
        return None
    deltas = {f: after.get(f, 0.0) - before.get(f, 0.0) for f in set(before) | set(after)}
    listed = [
        FunctionDelta(f, d, d / rise, callers.get(f, []))
        for f, d in sorted(deltas.items(), key=lambda kv: -kv[1])
        if d >= LISTED_SHARE * rise
    ]
    return Differential(rise, listed, rise - sum(d.delta_ns for d in listed))


def callers_of(samples: list[Sample]) -> dict[str, list[str]]:
    """Each function's costliest chain of callers (by its self samples)."""
    _, _, chains = _walk(samples)
    return {f: list(c.most_common(1)[0][0]) for f, c in chains.items()}


def folded(samples: list[Sample], period_ns: int, ops: float) -> dict[str, tuple[int, float]]:
    """Brendan Gregg's folded stacks, outermost first, the cause as the root
    frame: 'syscall:clone;__x64_sys_clone;…;copy_page_range' -> (samples,
    ns per operation). flamegraph.pl, inferno and speedscope read the
    samples; the time per operation is samples × period / operations."""
    counts: Counter = Counter()
    for s in samples:
        counts[";".join((s.cause, *reversed(s.frames or (USER_SPACE,))))] += s.count
    return {k: (n, n * period_ns / ops) for k, n in counts.items()}


# ------------------------------------------------- between two runs (`compare`)

# Functions listed per point in a comparison, by the size of their change.
COMPARED = 8


@dataclass
class PointSamples:
    """What `compare` needs of one point's samples: each function's self
    samples, the operations they were taken over, and its callers."""

    period_ns: int
    ops: float  # the operations the samples are shared over (1 for a whole run)
    own: dict[str, int]
    callers: dict[str, list[str]]
    per: str = "op"  # what a time is per: "op", or "run" (a profile)

    @classmethod
    def of(cls, samples: list[Sample], period_ns: int, ops: float, per: str = "op") -> PointSamples | None:
        if not period_ns or not ops or not any(s.frames for s in samples):
            return None
        own, _, _ = _walk(samples)
        return cls(period_ns, ops, dict(own), callers_of(samples), per)

    def ns(self, function: str) -> float:
        return self.own.get(function, 0) * self.period_ns / self.ops

    @property
    def exposure(self) -> float:
        """Operations per sampling period: a function's samples are Poisson
        with mean (its time per op / period) × this."""
        return self.ops / self.period_ns


@dataclass
class FunctionChange:
    name: str
    a_ns: float  # self time per operation in run A
    b_ns: float
    a_samples: int
    b_samples: int
    p: float  # two-sided exact test of equal time per op, on the samples alone
    q: float | None = None  # p adjusted over the point's functions (Benjamini-Hochberg)
    callers: list[str] = field(default_factory=list)

    @property
    def delta_ns(self) -> float:
        return self.b_ns - self.a_ns

    def beyond_sampling_error(self, alpha: float) -> bool:
        return self.q is not None and self.q < alpha


def changed(a: PointSamples, b: PointSamples, listed: int = COMPARED) -> list[FunctionChange]:
    """The functions whose self time per operation changed most from A to B,
    largest change first, each tested against the sampling error alone.

    Given a function's samples in both runs, n = n_A + n_B, equal time per
    operation makes n_B binomial with p = E_B / (E_A + E_B), E each run's
    operations per period (Poisson samples conditioned on their sum): an
    exact test that needs no repetitions. It knows nothing of run-to-run
    variation, which the repetitions' own metrics test."""
    from scipy.stats import binomtest

    from .stats import adjust_fdr

    p0 = b.exposure / (a.exposure + b.exposure)
    out = []
    for f in set(a.own) | set(b.own):
        na, nb = a.own.get(f, 0), b.own.get(f, 0)
        p = binomtest(nb, na + nb, p0).pvalue
        callers = b.callers.get(f) or a.callers.get(f, [])
        out.append(FunctionChange(f, a.ns(f), b.ns(f), na, nb, float(p), None, callers))
    for c, q in zip(out, adjust_fdr([c.p for c in out])):
        c.q = q
    out.sort(key=lambda c: (-abs(c.delta_ns), c.name))
    return out[:listed]
