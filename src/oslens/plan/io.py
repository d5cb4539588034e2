"""`oslens io`: per I/O engine (pread, pwrite, cached pread, io_uring at
each queue depth), the same random I/Os issued from 1, 2, … pinned CPUs at
once, all started together; around each point, the device's own counters
and interrupts, so that what the engine counted is set beside what the
kernel counted.

Everything is checked here, before the target is made or anything runs;
the engine checks the target itself (direct I/O, sizes) once it exists."""

from __future__ import annotations

import contextlib
import re
from dataclasses import asdict, dataclass, field, replace

from .. import engine
from ..blockdev import devices
from ..blockdev.scheduler import check_scheduler
from ..blockdev.target import Target, check_user_target, hole_bytes, interrupts, parse_size
from ..errors import UsageError
from ..format import size as size_text
from ..invocation import Context, Invocation
from ..parse import parse_worker_counts, whole_number
from ..procfs import diff_interrupts
from . import Plan, check_amounts, time_limit


@dataclass(frozen=True)
class Engine:
    """An --engine: the engine's probe, and whether it keeps a queue (--qd).
    Every engine syncs (--fsync): a queued one waits for its I/Os in flight
    first, so that the sync covers them (engine/probes/io.h)."""

    probe: str
    queued: bool = False


ENGINES = {
    "psync": Engine("io:direct"),
    "cached": Engine("io:cached"),
    "uring": Engine("io-uring", queued=True),
    "libaio": Engine("libaio", queued=True),
}
# the names before --rw: an engine, and the direction it implied
OLD_ENGINES = {"pread": ("psync", None), "pwrite": ("psync", "randwrite"), "uring-write": ("uring", "randwrite")}
DEFAULT_ENGINES = "psync,uring"
# --rw NAME (fio's) -> sequential, percent of reads (None: --mix's)
PATTERNS = {
    "randread": (False, 100),
    "randwrite": (False, 0),
    "randrw": (False, None),
    "read": (True, 100),
    "write": (True, 0),
    "rw": (True, None),
}
DEFAULT_RW = "randread"
DEFAULT_MIX = 50  # fio's rwmixread
# --taskrun NAME -> the io-uring probe's `taskrun` option (IORING_SETUP_*)
TASKRUN = {"interrupt": 0, "coop": 1, "defer": 2}
DEFAULT_TASKRUN = "coop"
DEFAULT_QD = "1,16"
DEFAULT_BS = "4k"
DEFAULT_SIZE = "256M"  # of a made device: enough 4 KiB blocks (65536) that random offsets rarely meet
CACHED_SPAN = 1 << 30  # what `cached` reads into the page cache first, at most


@dataclass(frozen=True)
class Series:
    """One line of the run's results: an engine at a queue depth, a pattern,
    a block size and a rate, measured at each worker count. Its label names
    what differs from the defaults, so that the first run of `oslens io`
    reads `psync` and `uring qd16`."""

    engine: str  # a key of ENGINES
    qd: int = 1  # 1 for the synchronous engines
    rw: str = DEFAULT_RW
    reads: int = 100  # percent
    bs: int = 4096
    rate: int = 0  # I/Os per second per worker (0: unpaced)

    @property
    def label(self) -> str:
        parts = [self.engine + (f" qd{self.qd}" if ENGINES[self.engine].queued else "")]
        if self.rw != DEFAULT_RW:
            parts.append(self.rw + (f" {self.reads}/{100 - self.reads}" if PATTERNS[self.rw][1] is None else ""))
        if self.bs != 4096:
            parts.append(size_text(self.bs))
        if self.rate:
            parts.append(f"at {self.rate:,}/s per CPU")
        return " ".join(parts)

    @property
    def family(self) -> str:
        """The label of the same series unpaced: the line a rate is a point of."""
        return replace(self, rate=0).label

    @property
    def writes(self) -> bool:
        return self.reads < 100

    @property
    def sequential(self) -> bool:
        return PATTERNS[self.rw][0]


@dataclass(frozen=True)
class IoPoint(Invocation):
    """One engine invocation: a series at a worker count. Its role: `measure`
    (every repetition: what is reported), `completions` (one more, each I/O
    followed by BPF from the CPU that submitted it to the one that completed
    it: the tracing costs each I/O a quarter of its time on zram, so it is
    kept out of the measured ones) or `explain`."""

    series: Series
    workers: int
    args: tuple[str, ...] = field(compare=False)
    target: object = field(compare=False)  # blockdev.target.Target
    role: str = "measure"
    reps: int | None = field(default=None, compare=False)  # when not the run's

    @property
    def label(self) -> str:
        suffix = {"measure": "", "completions": " completions", "explain": " explained"}[self.role]
        return f"{self.series.label} ×{self.workers}{suffix}"

    @contextlib.contextmanager
    def surroundings(self):
        """The device's counters and interrupts before; its `after` reads them again."""
        t = self.target
        irqs = t.irqs()
        before, ints = t.counters(), interrupts(irqs)

        def after() -> list[dict]:
            now, ints_now = t.counters(), interrupts(irqs)
            rec = {"type": "device", "device": t.sysfs.name if t.sysfs else None}
            rec["stat"] = {k: now[k] - before[k] for k in now if k != "in_flight"} if now and before else None
            rec["interrupts"] = {
                irq: {str(c): n for c, n in row.counts.items()} for irq, row in diff_interrupts(ints, ints_now).items()
            }
            rec["irq_names"] = {str(k): v for k, v in irqs.items()}
            return [rec]

        yield Context(
            {
                "type": "context",
                "competition": None,
                "io": {"series": self.series.label, **asdict(self.series), "workers": self.workers,
                       "role": self.role},
            },
            after,
        )  # fmt: skip


# an I/O scheduler's name (the kernel's ELV_NAME_MAX is 16): written to a disk's
# queue/scheduler and, for a device to be made, asked of `modprobe -n NAME-iosched`,
# where a leading '-' would be an option and a '/' a path
SCHEDULER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,31}")


def check_scheduler_name(name: str) -> str:
    """`name` if it can be an I/O scheduler's; else a UsageError, before anything runs."""
    if not SCHEDULER_NAME.fullmatch(name):
        shown = name if name.isprintable() else name.encode("unicode_escape").decode()
        raise UsageError(f"--scheduler: '{shown}' is not an I/O scheduler's name (a letter or digit, then "
                         "letters, digits, '_' or '-', as mq-deadline, bfq, kyber, none)")  # fmt: skip
    return name


def parse_list(text: str, option: str, known: tuple[str, ...] | None = None) -> list[str]:
    items = [s.strip() for s in text.split(",")]
    if any(not s for s in items):
        raise UsageError(f"{option}: '{text}' has an empty item")
    for s in items:
        if known is not None and s not in known:
            raise UsageError(f"{option}: unknown '{s}' (known: {', '.join(known)})")
    return list(dict.fromkeys(items))


def parse_qds(text: str) -> list[int]:
    most = min(engine.probes()[e.probe.split(":")[0]].options["qd"]["max"] for e in ENGINES.values() if e.queued)
    out = []
    for s in parse_list(text, "--qd"):
        n = whole_number(s)
        if n is None or not 1 <= n <= most:
            raise UsageError(f"--qd: '{s}' is not a queue depth from 1 to {most}")
        out.append(n)
    return out


def check(
    *, target: str | None, size: str | None, engines: str, qd: str | None, bs: str, span: str | None,
    workers: str | None, placement: str, duration: float | None, ops: int | None, reps: int, warmup: float,
    scheduler: str | None, allow_overwrite: bool, explain: engine.Explain | None, uring_wait: bool = False,
    taskrun: str | None = None, rw: str | None = None, mix: int | None = None, fsync: int | None = None,
    fdatasync: int | None = None, rate: str | None = None, uring_poll: bool = False,
) -> dict:  # fmt: skip
    """Every option checked before anything is made; the choices (the
    user's target, checked, as `target`; None when one is to be made).
    The io_uring options, --rw, --mix and --size default to None so that
    one given where it cannot apply is told apart from its default, and
    refused."""
    if scheduler is not None:  # first: it reaches modprobe's argv and a sysfs file
        check_scheduler_name(scheduler)
    duration = check_amounts(duration, ops, reps, warmup, 0.1, default_duration=1.0)
    if explain and ops is not None:
        raise UsageError("--explain charges a fixed window of time: use --duration, not --ops")
    rates = _rates(rate)
    if rate is not None and ops is not None:
        raise UsageError("--rate paces a fixed window of time: use --duration, not --ops")
    opts = engine.probes()["io"].options
    blocks = []
    for b in parse_list(bs, "--bs"):
        block = parse_size(b, "--bs")
        if not opts["bs"]["min"] <= block <= opts["bs"]["max"] or block % 512:
            raise UsageError(
                f"--bs: {b} is not a multiple of 512 bytes from {opts['bs']['min']} to {opts['bs']['max']}"
            )
        blocks.append(block)
    series = _series(engines, qd, uring_wait, taskrun, rw, mix, blocks, rates, uring_poll)
    sync = _sync(series, fsync, fdatasync)
    taskrun = taskrun or DEFAULT_TASKRUN
    block = max(blocks)
    span_bytes = parse_size(span, "--span") if span is not None else None
    if span_bytes is not None and (span_bytes < block or span_bytes % (1 << 20)):
        raise UsageError(f"--span: {span} is not a whole number of MiB of at least one block ({size_text(block)})")
    made_size = parse_size(size or DEFAULT_SIZE)
    if made_size < devices.MIN_SIZE or made_size % (1 << 20):
        raise UsageError(f"--size: {size} is not a whole number of MiB of at least 1M")
    ncpus = engine.topology()["available"]
    counts = parse_worker_counts(workers, ncpus, placement=placement)
    if uring_poll and (target is None or target in devices.MADE):
        raise UsageError(f"--uring-poll: the devices oslens makes ({', '.join(devices.MADE)}) complete no I/O by "
                         "polling; give --target a device with poll queues (nvme with poll_queues set)")  # fmt: skip
    kind, user_target = _target(target, any(s.writes for s in series), allow_overwrite)
    if uring_poll and (why := user_target.no_polling()):
        raise UsageError(f"--uring-poll: {user_target.path}: {why}")
    if user_target is not None and size is not None:
        raise UsageError(f"--size: the size of a device oslens makes, not of --target {target}")
    if kind is not None and made_size > _mem_available() // 2:
        raise UsageError(f"--size {made_size >> 20}M: more than half of this machine's available memory")
    target_size = user_target.size() if user_target else made_size
    if span_bytes is not None and span_bytes > target_size:
        what = user_target.path if user_target else f"the {kind} device (--size)"
        raise UsageError(f"--span: {span} is more than the {size_text(target_size)} of {what}")
    if scheduler is not None:
        if kind == "zram":
            raise UsageError("--scheduler: zram is bio-based and has no I/O scheduler (use --target loop)")
        check_scheduler(scheduler, user_target)
    layout = _holes(user_target, span_bytes or target_size, allow_overwrite) if user_target else 0
    return dict(
        kind=kind, target=user_target, size=made_size, series=series, span=span_bytes,
        counts=counts, placement=placement, duration=duration, ops=ops, reps=reps, warmup=warmup,
        scheduler=scheduler, explain=explain,
        uring={"wait": int(uring_wait), "taskrun": TASKRUN[taskrun], **({"poll": 1} if uring_poll else {})},
        layout=layout, sync=sync,
    )  # fmt: skip


def _engines(engines: str, rw: str | None) -> list[tuple[str, str | None]]:
    """(engine, the direction its old name implied) per --engine item; an
    old name's direction beside an --rw is refused, as two answers to one
    question."""
    out = []
    for name in parse_list(engines, "--engine", (*ENGINES, *OLD_ENGINES)):
        new, implied = OLD_ENGINES.get(name, (name, None))
        if implied and rw is not None:
            raise UsageError(f"--engine {name} is {new} with --rw {implied}: give --engine {new} and --rw")
        out.append((new, implied))
    return list(dict.fromkeys(out))


def _series(
    engines: str, qd: str | None, uring_wait: bool, taskrun: str | None, rw: str | None, mix: int | None,
    blocks: list[int], rates: list[int], uring_poll: bool = False,
) -> list[Series]:  # fmt: skip
    """The series asked: each engine at each --qd where it has a queue, in
    each pattern, block size and rate; options refused where no series
    they apply to is asked."""
    chosen = _engines(engines, rw)
    queued = [n for n, e in ENGINES.items() if e.queued]
    if not any(ENGINES[n].queued for n, _ in chosen) and qd:
        raise UsageError(f"--qd: the queued engines' only ({', '.join(queued)}), and none is asked")
    if "uring" not in {n for n, _ in chosen}:
        given = [o for o, v in (("--uring-wait", uring_wait or None), ("--taskrun", taskrun),
                                ("--uring-poll", uring_poll or None)) if v]  # fmt: skip
        if given:
            raise UsageError(f"{', '.join(given)}: io_uring's only, and no uring engine is asked")
    patterns = parse_list(rw or DEFAULT_RW, "--rw", tuple(PATTERNS))
    mixed = [p for p in patterns if PATTERNS[p][1] is None]
    if mix is not None:
        if not mixed:
            raise UsageError(f"--mix: the share of reads of a mixed --rw (randrw, rw), and --rw is {rw or DEFAULT_RW}")
        if not 1 <= mix <= 99:
            raise UsageError(f"--mix: {mix} is not a percentage of reads from 1 to 99")
    qds = parse_qds(qd or DEFAULT_QD)
    out = []
    for name, implied in chosen:
        for pattern in [implied] if implied else patterns:
            reads = PATTERNS[pattern][1]
            reads = (mix or DEFAULT_MIX) if reads is None else reads
            if name == "cached" and PATTERNS[pattern][0] and reads:
                raise UsageError("--engine cached reads from the page cache: a sequential read there is a "
                                 "memory copy, give a random --rw")  # fmt: skip
            for q in qds if ENGINES[name].queued else [1]:
                for b in blocks:
                    out.extend(Series(name, q, pattern, reads, b, r) for r in rates)
    return list(dict.fromkeys(out))


def _rates(rate: str | None) -> list[int]:
    """--rate's I/Os per second per worker; [0] (unpaced) without it."""
    if rate is None:
        return [0]
    opt = engine.probes()["io"].options["rate"]
    low = 100  # the engine's IO_RATE_MIN: a worker waits at most 10 ms for a token
    out = []
    for item in parse_list(rate, "--rate"):
        n = _count(item)
        if n is None or not low <= n <= opt["max"]:
            raise UsageError(
                f"--rate: '{item}' is not a number of I/Os per second per CPU from {low} to {opt['max']:,}"
            )
        out.append(n)
    return out


def _count(text: str) -> int | None:
    """A whole number, with k or m for thousands and millions (10k: 10,000)."""
    scale = {"k": 1000, "m": 1000000}.get(text[-1:].lower(), 1)
    n = whole_number(text[:-1] if scale > 1 else text)
    return n * scale if n is not None else None


def _sync(series: list[Series], fsync: int | None, fdatasync: int | None) -> dict | None:
    """--fsync N or --fdatasync N as the probe's options, refused where no
    series writes."""
    if fsync is None and fdatasync is None:
        return None
    if fsync is not None and fdatasync is not None:
        raise UsageError("--fsync and --fdatasync: give one")
    name, n = ("--fsync", fsync) if fsync is not None else ("--fdatasync", fdatasync)
    most = engine.probes()["io"].options["fsync"]["max"]
    if not 1 <= n <= most:
        raise UsageError(f"{name}: {n} is not a number of writes from 1 to {most:,}")
    if not any(s.writes for s in series):
        raise UsageError(f"{name}: syncs the writes, and no --rw writes")
    return {"fsync": n, "datasync": int(fdatasync is not None)}


def _target(target: str | None, writing: bool, allow_overwrite: bool) -> tuple[str | None, Target | None]:
    """(the kind of device to make, or None; the user's target, checked, or
    None): --target names a kind oslens makes, or a device or file; left
    out, the first kind this machine can make."""
    if target is None:
        avail = devices.available_kinds()
        kind = next((k for k in devices.MADE if avail[k] is None), None)
        if kind is None:
            raise UsageError(
                f"no default target here ({'; '.join(f'{k}: {w}' for k, w in avail.items())}): "
                f"give --target DEVICE|FILE"
            )
        return kind, None
    if target not in devices.MADE:
        return None, check_user_target(target, writing, allow_overwrite)
    if (why := devices.available_kinds()[target]) is not None:
        raise UsageError(f"--target {target}: {why}")
    return target, None


def _holes(target: Target, end: int, allow_overwrite: bool) -> int:
    """The bytes of holes in the part of a user's file the I/Os reach, to be
    written before the run (--allow-overwrite), or refused: a read of a hole
    returns zeros without reaching the device, and a write to one allocates
    first, so either would time the filesystem's shortcut, not the I/O.
    fio lays a file out before it reads it for the same reason."""
    if target.is_block:
        return 0
    holes = hole_bytes(target.path, end)
    if holes and not allow_overwrite:
        raise UsageError(
            f"--target {target.path}: {size_text(holes)} of the {size_text(end)} the I/Os reach are holes (sparse or "
            "fallocated, never written): reads of a hole never reach the device; write the file first, or give "
            "--allow-overwrite to have oslens write its holes (its data is left as it is)"
        )
    return holes


def _mem_available() -> int:
    from ..collectors import load

    v = load._meminfo().get("mem_available_bytes")
    return v if isinstance(v, int) else 1 << 62  # unknown: the kernel refuses what it cannot hold


def plan(choices: dict, target: Target) -> Plan:
    """The invocations on a target that exists (made, or the user's)."""
    c = choices
    size = target.size()
    limit = time_limit(c["reps"], (c["duration"] or 0) + c["warmup"] + 2.0)
    one = time_limit(1, (c["duration"] or 0) + c["warmup"] + 2.0)
    points = []
    for s in c["series"]:
        e = ENGINES[s.engine]
        span = c["span"] if c["span"] is not None else (min(size, CACHED_SPAN) if s.engine == "cached" else None)
        opts = {"bs": s.bs, "reads": s.reads} | ({"span_mb": span >> 20} if span else {})
        opts |= {"seq": 1} if s.sequential else {}
        opts |= {"rate": s.rate} if s.rate else {}
        opts |= {"qd": s.qd} if e.queued else {}
        opts |= c["uring"] if s.engine == "uring" else {}
        opts |= c["sync"] if c["sync"] and s.writes else {}
        for n in c["counts"]:
            common = dict(probe=e.probe, workers=n, placement=c["placement"], warmup=c["warmup"], opts=opts,
                          target=target.path, duration=c["duration"])  # fmt: skip
            args = engine.run_argv(**common, reps=c["reps"], time_limit=limit, ops=c["ops"], latency=True)
            points.append(IoPoint(s, n, tuple(args), target))
            args = engine.run_argv(**common, reps=1, time_limit=one, ops=c["ops"], completions=True)
            points.append(IoPoint(s, n, tuple(args), target, role="completions", reps=1))
            if c["explain"]:
                args = engine.run_argv(**common, reps=c["reps"], time_limit=limit, latency=True, explain=c["explain"])
                points.append(IoPoint(s, n, tuple(args), target, role="explain"))
    params = {
        "target": target.describe(),
        "engines": [s.label for s in c["series"]],
        "series": [asdict(s) | {"label": s.label, "family": s.family} for s in c["series"]],
        "bs": sorted({s.bs for s in c["series"]}),
        "sync": c["sync"],
        "span_bytes": c["span"],
        "workers": c["counts"],
        "placement": c["placement"],
        "duration_s": c["duration"],
        "ops": c["ops"],
        "reps": c["reps"],
        "warmup_s": c["warmup"],
        "scheduler": c["scheduler"],
        **engine.Explain.params(c["explain"]),
        "uring": c["uring"],
    }
    return Plan(points, c["reps"], params)
