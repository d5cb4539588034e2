"""What `scale --explain` costs in each mode and how much it explains (a
benchmark, not a test: timing claims live here).

For each probe and worker count, a plain engine run and one explained run per
mode alternate (`run`, `run --explain`, `run --explain-light`, the same fixed
time; in a new random order each round, seeded by the round), so that all
see the same machine and none always runs first; the medians over the
rounds give, per mode,

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
import json
import random
import statistics
import subprocess

from oslens import engine
from oslens.analysis.explain import explain_point
from oslens.analysis.stats import median_ci
from oslens.kallsyms import Kallsyms, resolve_charges
from oslens.records import explained_points


def flags(kind: str) -> list[str]:
    """The engine's options for a kind of run: full or light, each with
    @HZ its sample rate (light@250), or control, a second plain run in an
    explained run's place (an A/A test: whatever "cost" it shows is the
    harness's own bias, not the attribution's)."""
    if kind == "control":
        return []
    mode, _, hz = kind.partition("@")
    return engine.Explain(mode, int(hz) if hz else None).argv()


SYMBOLS = Kallsyms()


def run(probe: str, mode: str, workers: int, seconds: float, explain: str | None) -> list[dict]:
    args = [str(engine.engine_path()), "run", "--probe", probe, "--mode", mode, "--workers", str(workers)]
    args += ["--duration", str(seconds), "--warmup", "0.2"] + (flags(explain) if explain else [])
    p = subprocess.run(args, capture_output=True, text=True, check=True)
    records = [json.loads(line) for line in p.stdout.splitlines() if line.strip()]
    # named as a stored run's are: light mode tells a spinning lock waiter by its stack's functions
    for r in records:
        if r["type"] == "explain" and r.get("available"):
            resolve_charges(r, SYMBOLS)
    return records


def ops_per_s(records: list[dict]) -> float:
    return sum(r["ops_per_sec"] for r in records if r["type"] == "worker")


def cpu_ns_per_op(records: list[dict]) -> float:
    """The workers' CPU time per operation, the mean over workers: each
    one's CPU share of its timed loop times the loop's time per operation."""
    per = []
    for r in records:
        if r["type"] == "worker" and r["ops"] and r["rusage"]["interval_s"] > 0:
            ru = r["rusage"]
            per.append((ru["user_s"] + ru["sys_s"]) / ru["interval_s"] / r["ops_per_sec"] * 1e9)
    return statistics.mean(per)


def measured(probe: str, mode: str, workers: int, seconds: float, explain: str) -> dict[str, float]:
    """One run explained in mode `explain`: its rate, the share of its time
    unexplained, calls and lock wait per operation."""
    recs = run(probe, mode, workers, seconds, explain)
    if not flags(explain):  # the control explains nothing
        nan = float("nan")
        return {"rate": ops_per_s(recs), "cpu": cpu_ns_per_op(recs), "unexpl": nan, "calls": nan, "lock": nan,
                "programs": nan}  # fmt: skip
    ep = next(iter(explained_points(recs).values()))
    s = explain_point(ep)
    if s is None:
        raise SystemExit(f"{probe}: not explained ({explain}): {ep.unavailable}")
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
    args = ap.parse_args()
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
                for r in range(args.rounds):
                    order = [None, *kinds]
                    random.Random(r).shuffle(order)
                    for k in order:
                        if k is None:
                            recs = run(probe, mode, n, args.seconds, None)
                            plain.append(ops_per_s(recs))
                            plain_cpu.append(cpu_ns_per_op(recs))
                        else:
                            for key, value in measured(probe, mode, n, args.seconds, k).items():
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
                    print(
                        f"{probe:10} {mode:8} {n:7d} {k:>10} {p:12.4g} {e:12.4g} {1 - e / p:7.1%} {interval:>24} "
                        f"{cpu_interval:>26} "
                        f"{cost_ns:8.0f} "
                        f"{statistics.median(g['calls']):8.2f} {statistics.median(g['lock']):10.1f} "
                        f"{statistics.median(g['unexpl']):11.2%} {statistics.median(g['programs']):8.2%}"
                    )


if __name__ == "__main__":
    main()
