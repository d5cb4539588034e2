"""From command-line choices to the list of engine invocations of a run.

Everything a user can get wrong is checked here, against what the engine
and the machine actually offer, before anything is measured or stored."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from . import engine
from .errors import UsageError

OSMARK_PROBES = ("fork", "mmap", "dup", "socket", "sem")
MAX_SECONDS = 86400.0   # the engine's own bounds, checked here to fail before storing
MAX_OPS = 2**62


@dataclass(frozen=True)
class Point:
    """One engine invocation: a probe at a worker count, all repetitions."""
    probe: str
    variant: str
    mode: str
    workers: int
    args: tuple[str, ...] = field(compare=False)

    @property
    def series(self) -> tuple[str, str, str]:
        return (self.probe, self.variant, self.mode)

    @property
    def label(self) -> str:
        return f"{self.probe}:{self.variant} {self.mode} ×{self.workers}"


def default_worker_counts(ncpus: int) -> list[int]:
    """1, 2, 4, … below the CPU count, then the CPU count itself."""
    counts, n = [], 1
    while n < ncpus:
        counts.append(n)
        n *= 2
    counts.append(ncpus)
    return counts


def parse_worker_counts(text: str | None, ncpus: int, option: str = "--workers") -> list[int]:
    if not text:
        return default_worker_counts(ncpus)
    counts = []
    for part in text.split(","):
        part = part.strip()
        if part == "max":
            n = ncpus
        elif part.isdigit() and int(part) > 0:
            n = int(part)
        else:
            raise UsageError(f"{option}: '{part}' is not a positive whole number or 'max'")
        if n > ncpus:
            what = "workers" if option == "--workers" else "CPUs"
            raise UsageError(f"{option}: {n} {what} but this machine gives us {ncpus} CPUs")
        if n not in counts:
            counts.append(n)
    return sorted(counts)


def parse_probes(text: str | None) -> list[tuple[str, str]]:
    """'mmap,mmap:private,all' -> [(probe, variant)], checked against the engine."""
    known = engine.probes()
    specs = [s.strip() for s in (text.split(",") if text else OSMARK_PROBES) if s.strip()]
    if not specs:
        raise UsageError("--probe: no probe named")
    out: list[tuple[str, str]] = []
    for spec in specs:
        if spec == "all":
            out += [(p.name, v) for p in known.values() for v in p.variants]
            continue
        name, _, variant = spec.partition(":")
        info = known.get(name)
        if info is None:
            raise UsageError(f"unknown probe '{name}' (known: {', '.join(sorted(known))})")
        if variant and variant not in info.variants:
            raise UsageError(f"probe {name} has no variant '{variant}' (has: {', '.join(info.variants)})")
        out.append((name, variant or info.variants[0]))
    return list(dict.fromkeys(out))


def parse_opts(pairs: tuple[str, ...], probes: list[tuple[str, str]]) -> dict[str, dict[str, int]]:
    """--opt KEY=VALUE pairs, per probe that has the option; a key no chosen
    probe understands is an error rather than silently ignored."""
    known = engine.probes()
    per_probe: dict[str, dict[str, int]] = {name: {} for name, _ in probes}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key:
            raise UsageError(f"--opt: '{pair}' is not KEY=VALUE")
        takers = [n for n in per_probe if key in known[n].options]
        if not takers:
            raise UsageError(f"--opt: no chosen probe has an option '{key}'")
        try:
            num = int(value)
        except ValueError:
            raise UsageError(f"--opt {key}: '{value}' is not a whole number") from None
        for n in takers:
            o = known[n].options[key]
            if not o["min"] <= num <= o["max"]:
                raise UsageError(f"--opt {key}: {num} is outside {o['min']}..{o['max']} for probe {n}")
            per_probe[n][key] = num
    return per_probe


@dataclass
class ScalePlan:
    points: list[Point]
    reps: int
    params: dict

    @property
    def total_reps(self) -> int:
        return len(self.points) * self.reps


def _check_amounts(duration: float | None, ops: int | None, reps: int, warmup: float,
                   interval: float, default_duration: float) -> float | None:
    """The numbers every measuring command takes; returns the duration
    (None for fixed work)."""
    if duration is not None and ops is not None:
        raise UsageError("--duration and --ops are exclusive: fixed time or fixed work")
    if duration is None and ops is None:
        duration = default_duration
    for name, value in (("--duration", duration), ("--warmup", warmup), ("--interval", interval)):
        if value is not None and not math.isfinite(value):
            raise UsageError(f"{name}: {value} is not a finite number of seconds")
    if duration is not None and not 0 < duration <= MAX_SECONDS:
        raise UsageError(f"--duration: {duration} is not a number of seconds in (0, {MAX_SECONDS}]")
    if ops is not None and not 0 < ops <= MAX_OPS:
        raise UsageError(f"--ops: {ops} is not a number of operations from 1 to {MAX_OPS}")
    if reps < 1:
        raise UsageError(f"--reps: {reps} is not a positive number of repetitions")
    if not 0 <= warmup <= MAX_SECONDS:
        raise UsageError(f"--warmup: {warmup} is not a number of seconds in [0, {MAX_SECONDS}]")
    if not 0 < interval <= MAX_SECONDS:
        raise UsageError(f"--interval: {interval} is not a positive number of seconds")

    return duration


def scale_plan(*, probe: str | None, workers: str | None, mode: str, placement: str,
               duration: float | None, ops: int | None, reps: int, warmup: float,
               interval: float, opts: tuple[str, ...]) -> ScalePlan:
    duration = _check_amounts(duration, ops, reps, warmup, interval, default_duration=1.0)

    ncpus = engine.topology()["available"]
    counts = parse_worker_counts(workers, ncpus)
    probes = parse_probes(probe)
    probe_opts = parse_opts(opts, probes)
    modes = ["process", "thread"] if mode == "both" else [mode]

    budget = (duration or 0) + warmup
    # A generous wall-clock limit per invocation: a hung worker must end the
    # run, a slow machine must not.
    limit = 120.0 + reps * (budget * 3 + 30.0)
    points = []
    for name, variant in probes:
        for m in modes:
            for n in counts:
                args = ["run", "--probe", f"{name}:{variant}", "--workers", str(n), "--mode", m,
                        "--placement", placement, "--reps", str(reps), "--warmup", f"{warmup:g}",
                        "--interval", f"{interval:g}", "--time-limit", f"{limit:g}"]
                args += ["--duration", f"{duration:g}"] if duration is not None else ["--ops", str(ops)]
                for k, v in probe_opts[name].items():
                    args += ["--opt", f"{k}={v}"]
                points.append(Point(name, variant, m, n, tuple(args)))
    params = {"probes": [f"{n}:{v}" for n, v in probes], "workers": counts, "modes": modes,
              "placement": placement, "duration_s": duration, "ops": ops, "reps": reps,
              "warmup_s": warmup, "interval_s": interval, "opts": probe_opts}
    return ScalePlan(points, reps, params)


# ----------------------------------------------------------------- latency

# Not in the default catalogue: the floor (always measured separately), the
# OSMark variants of mmap/fork whose point is scaling, and the sem ping-pong
# that pingpong and semop cover.
LATENCY_NOT_DEFAULT = ("null", "fork-static", "mmap", "sem", "fork:mapped")


@dataclass(frozen=True)
class MeasuredPoint:
    """One engine invocation on a fixed set of CPUs, optionally with a
    competing workload on others around it (latency, noise)."""
    probe: str
    variant: str
    mode: str
    cpus: tuple[int, ...]
    args: tuple[str, ...] = field(compare=False)
    compete: object = field(default=None, compare=False)  # CompeteSpec or None

    @property
    def label(self) -> str:
        where = f" vs {self.compete.label}" if self.compete else ""
        return f"{self.probe}:{self.variant}{where}"

    def surroundings(self):
        from .compete import competing  # import cycle: compete uses parse_probes
        return competing(self.compete, list(self.cpus)) if self.compete else None


@dataclass
class MeasuredPlan:
    points: list
    reps: int
    params: dict

    @property
    def total_reps(self) -> int:
        return len(self.points) * self.reps


def latency_plan(*, probe: str | None, workers: str, mode: str, placement: str, duration: float | None,
                 ops: int | None, reps: int, warmup: float, compete: str | None, mix: bool) -> MeasuredPlan:
    from .compete import parse_compete
    duration = _check_amounts(duration, ops, reps, warmup, 0.1, default_duration=0.3)
    ncpus = engine.topology()["available"]
    counts = parse_worker_counts(workers, ncpus)
    if len(counts) != 1:
        raise UsageError("--workers: latency takes one worker count (a number or 'max')")
    cpus = tuple(engine.placement(counts[0], placement))
    if probe:
        probes = parse_probes(probe)
    else:
        # fork:mapped needs 1 GiB per worker: asked for by name only.
        probes = [(p.name, v) for p in engine.probes().values() if p.name not in LATENCY_NOT_DEFAULT and p.timed
                  for v in p.variants if f"{p.name}:{v}" not in LATENCY_NOT_DEFAULT]
    untimed = [n for n, _ in probes if not engine.probes()[n].timed]
    if untimed:
        raise UsageError(f"probe {untimed[0]} has no per-operation latency (use 'oslens noise' for detours)")
    spec = parse_compete(compete) if compete else None
    if spec:
        from .compete import competitor_cpus
        competitor_cpus(spec, list(cpus))  # refuse now, not after the first point
    limit = 120.0 + reps * ((duration or 0) + warmup) * 3 + reps * 30.0
    amount = ["--duration", f"{duration:g}"] if duration is not None else ["--ops", str(ops)]
    base = ["run", "--cpus", ",".join(map(str, cpus)), "--mode", mode, "--latency", "--reps", str(reps),
            "--warmup", f"{warmup:g}", "--time-limit", f"{limit:g}", *amount]
    measured = [("null", "default")] + [pv for pv in probes if pv[0] != "null"]
    points = []
    if mix:
        names = ",".join(f"{n}:{v}" for n, v in measured)
        for c in ([None, spec] if spec else [None]):
            points.append(MeasuredPoint("mix", f"{len(measured)} operations", mode, cpus,
                                       tuple(base + ["--probe", names, "--mix"]), c))
    else:
        for name, variant in measured:
            for c in ([None, spec] if spec else [None]):
                points.append(MeasuredPoint(name, variant, mode, cpus,
                                           tuple(base + ["--probe", f"{name}:{variant}"]), c))
    params = {"probes": [f"{n}:{v}" for n, v in measured], "workers": counts[0], "cpus": list(cpus),
              "mode": mode, "placement": placement, "duration_s": duration, "ops": ops, "reps": reps,
              "warmup_s": warmup, "mix": mix, "compete": spec.label if spec else None,
              "compete_cpus": list(spec.cpus) if spec and spec.cpus else None}
    return MeasuredPlan(points, reps, params)


# ------------------------------------------------------------------- noise

def parse_cpus(text: str | None) -> tuple[int, ...]:
    """A CPU list (0-3,8) checked against the CPUs this process may use; all of them by default."""
    available = [c["cpu"] for c in engine.topology()["cpus"]]
    if not text:
        return tuple(available)
    cpus: list[int] = []
    for part in text.split(","):
        a, _, b = part.strip().partition("-")
        if not a.isdigit() or (b and not b.isdigit()) or (b and int(b) < int(a)):
            raise UsageError(f"--cpus: '{part}' is not a CPU or a range like 0-3")
        cpus += range(int(a), int(b or a) + 1)
    for c in cpus:
        if c not in available:
            raise UsageError(f"--cpus: CPU {c} is not online or not available to this process")
    if len(set(cpus)) != len(cpus):
        raise UsageError("--cpus: a CPU is listed twice")
    return tuple(cpus)


def noise_plan(*, cpus: str | None, duration: float, threshold: int | None, reps: int, warmup: float,
               mode: str, compete: str | None, attribution: bool, ftq_us: int | None = None,
               step_us: float = 1000.0) -> MeasuredPlan:
    from .compete import competitor_cpus, parse_compete
    duration = _check_amounts(duration, None, reps, warmup, 0.1, default_duration=5.0)
    if not (math.isfinite(step_us) and step_us > 0):
        raise UsageError(f"--step-us: {step_us} is not a positive number of microseconds")
    if threshold is not None and not 0 < threshold <= 10**9:
        raise UsageError(f"--threshold: {threshold} is not a number of ns from 1 to 1e9")
    chosen = parse_cpus(cpus)
    spec = parse_compete(compete) if compete else None
    if spec:
        competitor_cpus(spec, list(chosen))
    limit = 120.0 + reps * (duration + warmup) * 3
    args = ["run", "--probe", "detour", "--cpus", ",".join(map(str, chosen)), "--mode", mode,
            "--duration", f"{duration:g}", "--warmup", f"{warmup:g}", "--reps", str(reps),
            "--interval", f"{min(duration, 0.5):g}", "--time-limit", f"{limit:g}"]
    if threshold:
        args += ["--opt", f"threshold_ns={threshold}"]
    if ftq_us is not None:
        if not 0 < ftq_us <= 10**6:
            raise UsageError(f"--ftq-us: {ftq_us} is not a number of µs from 1 to 1000000")
        args += ["--opt", f"ftq_us={ftq_us}"]
    if attribution:
        args.append("--trace")
    points = [MeasuredPoint("detour", "default", mode, chosen, tuple(args), c) for c in ([None, spec] if spec else [None])]
    params = {"cpus": list(chosen), "duration_s": duration, "threshold_ns": threshold, "reps": reps,
              "warmup_s": warmup, "mode": mode, "compete": spec.label if spec else None, "attribution": attribution,
              "ftq_us": ftq_us, "step_ns": step_us * 1000}
    return MeasuredPlan(points, reps, params)


def check_profile_target(command: list[str], pid: int | None, duration: float | None,
                         time_limit: float | None) -> None:
    """A profile needs exactly one target, one that exists, before anything
    is loaded or stored."""
    import os
    import shutil

    if command and command[0] == "--":
        command = command[1:]
    if bool(command) == (pid is not None):
        raise UsageError("give either --pid PID or -- CMD ARGS… (one target)")
    for name, v in (("--duration", duration), ("--time-limit", time_limit)):
        if v is not None and not (0 < v <= 7 * 86400 and math.isfinite(v)):
            raise UsageError(f"{name} must be a positive number of seconds, not {v:g}")
    if command:
        if duration is not None:
            raise UsageError("--duration is for --pid; a command is profiled until it exits (see --time-limit)")
        exe = command[0]
        if "/" in exe:
            if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
                raise UsageError(f"cannot run '{exe}': not an executable file")
        elif shutil.which(exe) is None:
            raise UsageError(f"cannot run '{exe}': not found in PATH")
        return
    if pid <= 0:
        raise UsageError(f"--pid: {pid} is not a process id")
    if pid == os.getpid():
        raise UsageError("--pid: cannot profile oslens itself")
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        raise UsageError(f"--pid: no process {pid}") from None
    except PermissionError:
        pass
