"""What `scale --explain` costs in each mode and how much it explains (a
benchmark, not a test: timing claims live here).

For each probe and worker count, a plain engine run and one explained run per
mode alternate (the same fixed time; in a new random order each round,
seeded by the round), so that all see the same machine and none always runs
first. Each run's engine argv is the one `oslens scale --explain MODE` runs:
the point and its explained twin as plan.scale.plan builds them (with the
bench's duration, one repetition and its warm-up, and the command's defaults
for every other option), so that what is measured is the configuration
users run, whatever options the planner gives a twin (the per-operation
timing of a timed probe among them: its cost is part of the mode's). The
medians over the rounds give, per mode,

- the attribution's cost: 1 - explained throughput / plain throughput (of
  the medians; and the median of each round's pair, with its order-statistic
  interval, since a probe's own round-to-round spread can exceed the cost), and
  per operation in ns (full mode's grows with the system calls and faults
  per operation, which it counts; light mode's should not);
- the same cost from the workers' CPU time per operation (their own
  threads' rusage over the timed loop, times the loop's time per operation):
  the kernel counts a task's CPU time without the time its vCPU was not run
  (CONFIG_PARAVIRT_TIME_ACCOUNTING), and interrupts and BPF programs that
  run on a worker's CPU while it runs are charged to it
  (CONFIG_IRQ_TIME_ACCOUNTING off), so on a shared host this estimator is not
  moved by the host's steal, which dominates the throughput's round-to-round
  spread. It does not see what an explained mode costs other tasks: a
  probe's partner process (sem, socket, pingpong) or a fork's child;
- light mode: its programs' own run time as a share of the workers' time,
  as the engine states it per point (the kernel's BPF statistics over the
  window): the part of the cost that no throughput noise hides;
- how much of the explained time per operation the causes cover (the share
  left unexplained);
- the lock wait per operation it measured: a mode that slows the workers
  issues fewer lock requests per second, so the contention it sees
  understates the plain point's (the observer effect on the explanation).

Usage: python bench/explain.py [--rounds 5] [--seconds 1] [--probes dup,getppid,mmap,fork,sem,socket]
       [--modes process,thread] [--explain-modes full,light[@HZ][,control]]
"""

from __future__ import annotations

import argparse
import functools
import inspect
import json
import random
import statistics
import subprocess

from oslens import engine
from oslens.analysis.explain import explain_point
from oslens.analysis.stats import median_ci
from oslens.kallsyms import Kallsyms, resolve_charges
from oslens.plan.scale import plan
from oslens.records import explained_points

# What the bench chooses of a point's plan; every other option is the command's default.
REPS = 1  # one repetition per engine run: the rounds alternate the runs
WARMUP_S = 0.2


def explained_as(kind: str) -> engine.Explain | None:
    """How a kind of run attributes: full or light, each with @HZ its sample
    rate (light@250), or control (None), a second run of the plain point in
    an explained run's place (an A/A test: whatever "cost" it shows is the
    harness's own bias, not the attribution's)."""
    if kind == "control":
        return None
    mode, _, hz = kind.partition("@")
    return engine.Explain(mode, int(hz) if hz else None)


@functools.lru_cache(maxsize=1)
def cli_defaults() -> dict:
    """What `oslens scale` gives its planner for each option not typed: its
    own defaults, read from the command (so that the two cannot drift
    apart). The planner's parameters the command has no option for are left
    to the planner's defaults, as the command leaves them."""
    from oslens.commands.scale import command

    given = command.make_context("scale", []).params
    return {k: v for k, v in given.items() if k in inspect.signature(plan).parameters}


def planned(
    probe: str,
    mode: str,
    workers: int,
    seconds: float,
    explain: engine.Explain | None,
    warmup: float = WARMUP_S,
    reps: int = REPS,
) -> tuple[tuple[str, ...], tuple[str, ...] | None]:
    """A point's engine argv and its explained twin's (None without
    explain), exactly as `oslens scale --explain` plans them: plan.scale.plan
    with these settings and the command's defaults for the rest."""
    settings = dict(probe=probe, mode=mode, workers=str(workers), duration=seconds, warmup=warmup, reps=reps)
    points = plan(**{**cli_defaults(), **settings, "explain": explain}).points
    plain = [p.args for p in points if not p.explained]
    twins = [p.args for p in points if p.explained]
    if len(plain) != 1 or len(twins) != (explain is not None):
        raise SystemExit(f"{probe} {mode} ×{workers}: planned {len(points)} engine runs, not one point and its twin")
    return plain[0], twins[0] if twins else None


def argvs(probe: str, mode: str, workers: int, seconds: float, kind: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The plain run's engine argv and the kind's: the point's explained
    twin in that mode as the planner builds it, or for control the plain
    argv again. The plain run is the point as `scale --explain` plans it
    (an explained point's may differ from an unexplained one's: the
    per-operation timing it shares with its twin); for control, as a bare
    `--explain` (the default mode) plans it."""
    plain, twin = planned(probe, mode, workers, seconds, explained_as(kind) or engine.Explain())
    return plain, plain if kind == "control" else twin


@functools.lru_cache(maxsize=1)
def symbols() -> Kallsyms:
    """The kernel's symbols, read once, when a run first needs them."""
    return Kallsyms()


def run(args: tuple[str, ...]) -> list[dict]:
    """One engine run of this argv (started as oslens starts it), its records."""
    proc = engine.spawn(list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate()
    except BaseException:
        proc.kill()
        proc.communicate()
        raise
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)}: exit {proc.returncode}: {err.strip()[-300:]}")
    records = [json.loads(line) for line in out.splitlines() if line.strip()]
    # named as a stored run's are: light mode tells a spinning lock waiter by its stack's functions
    for r in records:
        if r["type"] == "explain" and r.get("available"):
            resolve_charges(r, symbols())
    return records


def by_rep(records: list[dict]) -> list[list[dict]]:
    """The worker records of each repetition that ended in time (ok, or
    late as a stored run's analysis takes it), every worker's."""
    ended = {r["rep"] for r in records if r["type"] == "rep" and r.get("status") in ("ok", "late")}
    reps: dict[int, list[dict]] = {}
    for r in records:
        if r["type"] == "worker" and r["rep"] in ended:
            reps.setdefault(r["rep"], []).append(r)
    if not reps:
        raise SystemExit("the engine measured no repetition to its end")
    return list(reps.values())


def ops_per_s(records: list[dict]) -> float:
    """The workers' operations per second together, the mean over repetitions."""
    return statistics.mean(sum(r["ops_per_sec"] for r in rep) for rep in by_rep(records))


def cpu_ns_per_op(records: list[dict]) -> float:
    """The workers' CPU time per operation, the mean over workers: each
    one's CPU share of its timed loop times the loop's time per operation."""
    per = []
    for r in (r for rep in by_rep(records) for r in rep):
        if r["ops"] and r["rusage"]["interval_s"] > 0:
            ru = r["rusage"]
            per.append((ru["user_s"] + ru["sys_s"]) / ru["interval_s"] / r["ops_per_sec"] * 1e9)
    return statistics.mean(per)


def measured(args: tuple[str, ...], kind: str) -> dict[str, float]:
    """One run of a kind's argv (explained in that mode, or the control):
    its rate, the share of its time unexplained, calls and lock wait per
    operation."""
    recs = run(args)
    if explained_as(kind) is None:  # the control explains nothing
        nan = float("nan")
        return {"rate": ops_per_s(recs), "cpu": cpu_ns_per_op(recs), "unexpl": nan, "calls": nan, "lock": nan,
                "programs": nan}  # fmt: skip
    ep = next(iter(explained_points(recs).values()))
    s = explain_point(ep)
    if s is None:
        raise SystemExit(f"{ep.probe}: not explained ({kind}): {ep.unavailable}")
    counted = [c.count_per_op for c in s.causes if c.group == "syscall"]
    return {
        "rate": ops_per_s(recs),
        "cpu": cpu_ns_per_op(recs),
        "unexpl": s.unexplained_ns / s.ns_per_op,
        "calls": sum(counted) if None not in counted else float("nan"),
        "lock": sum(c.ns_per_op for c in s.causes if c.group == "lock"),
        "programs": float("nan") if s.program_share is None else s.program_share,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--probes", default="dup,getppid,mmap,fork,sem,socket")
    ap.add_argument("--modes", default="process,thread")
    ap.add_argument("--explain-modes", default="full,light")
    ap.add_argument("--workers", help="worker counts (default: 1 and every CPU)")
    ap.add_argument("--out", help="also write the rows, the command, the machine and the date to this JSON file "
                    "(bench/results/...)")  # fmt: skip
    args = ap.parse_args()
    rows: list[dict] = []
    ncpu = engine.topology()["available"]
    counts = [int(n) for n in args.workers.split(",")] if args.workers else sorted({1, ncpu})
    kinds = args.explain_modes.split(",")
    print(
        f"{'probe':10} {'mode':8} {'workers':>7} {'explain':>10} {'plain ops/s':>12} {'explained':>12} {'cost':>7} "
        f"{'paired cost [interval]':>24} {'CPU-time cost [interval]':>26} "
        f"{'ns/op':>8} {'calls/op':>8} {'lock ns/op':>10} {'unexplained':>11} {'programs':>8}"
    )
    for probe in args.probes.split(","):
        for mode in args.modes.split(","):
            for n in counts:
                plain: list[float] = []
                plain_cpu: list[float] = []
                got: dict[str, dict[str, list[float]]] = {
                    k: {"rate": [], "cpu": [], "unexpl": [], "calls": [], "lock": [], "programs": []} for k in kinds
                }
                # a drift within a round (the machine warming, memory
                # filling) falls on every side of the pairs alike
                runs = {k: argvs(probe, mode, n, args.seconds, k) for k in kinds}
                points = {plain for plain, _ in runs.values()}
                if len(points) != 1:  # one point beside every mode's twin, as `scale --explain` plans any of them
                    raise SystemExit(f"{probe} {mode} ×{n}: the planner's point depends on the mode: {points}")
                (plain_args,) = points
                for r in range(args.rounds):
                    order = [None, *kinds]
                    random.Random(r).shuffle(order)
                    for k in order:
                        if k is None:
                            recs = run(plain_args)
                            plain.append(ops_per_s(recs))
                            plain_cpu.append(cpu_ns_per_op(recs))
                        else:
                            for key, value in measured(runs[k][1], k).items():
                                got[k][key].append(value)
                p = statistics.median(plain)
                for k in kinds:
                    g = got[k]
                    e = statistics.median(g["rate"])
                    cost_ns = n / e * 1e9 - n / p * 1e9  # per operation of one worker
                    # each round's explained run beside that round's plain one
                    paired = median_ci([1 - x / y for x, y in zip(g["rate"], plain)])
                    interval = f"{paired.median:+.1%} [{paired.low:+.1%}, {paired.high:+.1%}]"
                    # as a throughput cost: 1 - plain CPU per op / explained CPU per op
                    by_cpu = median_ci([1 - y / x for x, y in zip(g["cpu"], plain_cpu)])
                    cpu_interval = f"{by_cpu.median:+.1%} [{by_cpu.low:+.1%}, {by_cpu.high:+.1%}]"
                    rows.append({"probe": probe, "mode": mode, "workers": n, "explain": k, "plain_ops_s": p,
                                 "explained_ops_s": e, "cost": 1 - e / p, "paired_cost": paired.median,
                                 "paired_low": paired.low, "paired_high": paired.high,
                                 "paired_confidence": paired.coverage, "cpu_cost": by_cpu.median,
                                 "lock_ns_per_op": statistics.median(g["lock"]), "rounds": args.rounds,
                                 "argv": runs[k][1]})  # fmt: skip
                    print(
                        f"{probe:10} {mode:8} {n:7d} {k:>10} {p:12.4g} {e:12.4g} {1 - e / p:7.1%} {interval:>24} "
                        f"{cpu_interval:>26} "
                        f"{cost_ns:8.0f} "
                        f"{statistics.median(g['calls']):8.2f} {statistics.median(g['lock']):10.1f} "
                        f"{statistics.median(g['unexpl']):11.2%} {statistics.median(g['programs']):8.2%}"
                    )
    if args.out:
        write_results(args.out, rows)


def write_results(path: str, rows: list[dict]) -> None:
    """The rows with what they were measured on and by what command."""
    import datetime
    import platform
    import sys

    doc = {
        "command": " ".join(["python", "bench/explain.py", *sys.argv[1:]]),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "kernel": platform.release(),
        "machine": {"cpus": engine.topology()["available"], "model": _cpu_model()},
        "rows": rows,
    }
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        return ""


if __name__ == "__main__":
    main()
