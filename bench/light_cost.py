"""What `--explain light` costs a worker, from the interruptions it adds
rather than from throughput (a benchmark, not a test: timing claims live
here).

bench/explain.py measures the mode's cost as lost throughput, and on a
shared host the round-to-round spread of throughput (the host's steal)
is wider than the 5 % the mode must stay within. Light mode runs nothing
per system call or fault: what it adds to a worker's CPU is interruptions
(the sampling clock of each worker's CPU, every --sample-period, and the
programs on the interrupts and lock waits that happen anyway). So its
cost is measured where it happens, against the engine's minimal loop:

1. The null probe timed operation by operation: an operation takes a few
   ns, and an interruption of its CPU shows as one operation that took
   that much longer. The light run is the null probe's explained twin
   exactly as `oslens scale --explain light` plans it (bench/explain.py's
   planned: the planner's argv, per-operation timing included), and the
   plain run that argv without the attribution's own options
   (engine.Explain.argv()), so that the two differ by the attribution
   alone and both time their operations as the twin does (the planner's
   point, as tests/test_bench_argv.py holds). Plain and
   light runs alternate (a new random order each round); per run, the
   operations above --threshold are the interrupted ones, and the time
   they held is the sum of their excess over the median operation. The
   light run's extra interrupted operations per second, set against the
   samples its clock took, give the share of interruptions the timed
   region catches (an interruption between two timed operations is not
   seen), and its extra held time divided by that share is the mode's
   cost on the null probe: interrupt entry and exit, the perf clock, and
   every program, end to end.
2. For each probe asked (--probes), the engine's programs' own run time
   in light mode, in its explained twin as the planner builds it (the
   kernel's BPF statistics, as bench/explain_programs.py reads them): a
   sample's program walks a longer stack when a worker is
   in the kernel, and contended locks run the lock-wait programs.
3. Per probe, the share of the workers' CPU time the mode takes: the
   null probe's, end to end (step 1), plus what the probe's programs take
   beyond the null probe's (step 2 against step 1's snapshots). The
   programs' share counts every CPU's programs against the workers' CPUs,
   so on a machine with more CPUs than workers it is an upper bound. CPU
   time is not throughput: contention_begin runs while its thread waits
   for a lock it would spin on anyway, contention_end inside the critical
   section every other waiter queues on; bench/explain.py measures the
   throughput.

Usage: python bench/light_cost.py [--rounds 9] [--seconds 2] [--workers 2]
       [--sample-rate HZ] [--threshold-ns 1000] [--probes getppid,dup,...]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import time

import numpy as np
from explain import cli_defaults, planned
from explain_programs import enable_stats, names, programs

from oslens import engine
from oslens.analysis.histogram import Histogram
from oslens.analysis.stats import median_ci

OSMARK_PROBES = "getppid,fork,dup,mmap,open,sem,socket"
WARMUP_S = 0.3


def interruptions(records: list[dict], threshold_ns: float) -> tuple[int, float, float]:
    """Over the workers' histograms: the operations above threshold, the
    ns they held beyond the median operation, and the operations timed."""
    n_above, held, timed = 0, 0.0, 0
    for r in records:
        if r["type"] != "hist":
            continue
        h = Histogram.from_record(r["hist"])
        values = h.representatives() * h.unit_ns
        cumulative = np.cumsum(h.counts)
        median = values[np.searchsorted(cumulative, (h.count + 1) // 2)]
        above = values > threshold_ns
        n_above += int(h.counts[above].sum())
        held += float((h.counts[above] * (values[above] - median)).sum())
        timed += h.count
    return n_above, held, timed


def without(args: tuple[str, ...], options: list[str]) -> tuple[str, ...]:
    """args with the run of options (one place) taken out."""
    n = len(options)
    at = [i for i in range(len(args) - n + 1) if list(args[i : i + n]) == options]
    if len(at) != 1:
        raise SystemExit(f"{' '.join(options)}: not once in the planned argv {' '.join(args)}")
    return args[: at[0]] + args[at[0] + n :]


def light_argvs(probe: str, mode: str, workers: int, seconds: float, hz: int | None):
    """The plain run's engine argv and the light run's: the point's twin
    explained in light mode at hz, as `oslens scale --explain light
    --sample-rate HZ` plans it (with this bench's warm-up and one
    repetition), and that argv without the attribution's options."""
    how = engine.Explain("light", hz)
    _, twin = planned(probe, mode, workers, seconds, how, warmup=WARMUP_S)
    return without(twin, how.argv()), twin


def run_engine(args: tuple[str, ...], window_s: float | None, named: bool = False) -> tuple[list[dict], float, dict]:
    """One engine run of this argv: its records, and with window_s the
    seconds between two snapshots of its programs' statistics taken after
    the warm-up, about window_s apart, with each program's runs and ns
    between them, by program id (named: by its name, read while it is
    loaded)."""
    proc = engine.spawn(list(args), stdout=subprocess.PIPE, text=True)
    delta: dict = {}
    window = 0.0
    try:
        if window_s is not None:
            started = time.monotonic()
            while not programs(proc.pid):  # loaded: then the window begins after the warm-up
                if proc.poll() is not None or time.monotonic() - started > 30:
                    raise SystemExit(f"the engine loaded no program: {' '.join(args)}")
                time.sleep(0.05)
            time.sleep(WARMUP_S + 0.2)
            t0, before = time.monotonic(), programs(proc.pid)
            time.sleep(window_s)
            t1, after = time.monotonic(), programs(proc.pid)
            window = t1 - t0
            known = names() if named else {}
            for pid, (runs, ns) in after.items():
                runs0, ns0 = before.get(pid, (0, 0))
                key = known.get(pid, str(pid)) if named else pid
                total = delta.get(key, (0, 0))
                delta[key] = (total[0] + runs - runs0, total[1] + ns - ns0)
        out, _ = proc.communicate()
    except BaseException:
        proc.kill()
        proc.communicate()
        raise
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)}: exit {proc.returncode}")
    return [json.loads(line) for line in out.splitlines() if line.strip()], window, delta


def null_run(args: argparse.Namespace, light: bool) -> dict:
    """One null-probe run timed op by op; in light mode the engine's
    programs' run time inside the window too (two snapshots)."""
    plain, explained = light_argvs("null", cli_defaults()["mode"], args.workers, args.seconds, args.sample_rate)
    records, window, delta = run_engine(explained if light else plain, max(args.seconds - 1.0, 0.5) if light else None)
    if not any(r["type"] == "hist" for r in records):
        raise SystemExit(f"the planned null run times no operation: {' '.join(plain)}")
    bpf_runs = sum(runs for runs, _ in delta.values())
    bpf_ns = sum(ns for _, ns in delta.values())
    n_above, held, timed = interruptions(records, args.threshold_ns)
    worker_s = args.seconds * args.workers
    return {
        "interrupted_per_s": n_above / worker_s,
        "held_share": held / (worker_s * 1e9),
        "timed_per_s": timed / worker_s,
        "bpf_share": bpf_ns / (window * 1e9 * args.workers) if window else 0.0,
        "bpf_runs_per_s": bpf_runs / (window * args.workers) if window else 0.0,
    }


def probe_round(probe: str, mode: str, args: argparse.Namespace) -> tuple[float, float, dict[str, tuple[int, int]]]:
    """One light run of a probe (its planned twin): the seconds between the
    two snapshots, the workers' operations per second, and each program's
    runs and ns there, by name."""
    seconds = max(args.seconds, 2.0)
    _, explained = light_argvs(probe, mode, args.workers, seconds, args.sample_rate)
    records, window, by_name = run_engine(explained, seconds - 1.0, named=True)
    ops = sum(r["ops_per_sec"] for r in records if r["type"] == "worker")
    return window, ops, by_name


def show(label: str, values: list[float], fmt: str) -> str:
    ci = median_ci(values)
    return f"{label} {fmt.format(ci.median)} [{fmt.format(ci.low)}, {fmt.format(ci.high)}]"


def measure(args: argparse.Namespace) -> tuple[list[dict], list[dict], dict]:
    """The null probe's runs, plain and light alternated, and each probe's
    explained rounds, with the kernel's BPF statistics on throughout."""
    stats = enable_stats()
    try:
        plain, light = [], []
        for i in range(args.rounds):
            order = [False, True]
            random.Random(i).shuffle(order)
            for mode in order:
                (light if mode else plain).append(null_run(args, mode))
        per_probe = {}
        for probe in filter(None, args.probes.split(",")):
            mode = "process" if probe in ("fork",) else "thread"
            per_probe[probe] = [probe_round(probe, mode, args) for _ in range(args.probe_rounds)]
    finally:
        os.close(stats)
    return plain, light, per_probe


def report_probes(args: argparse.Namespace, per_probe: dict, null_cost: float, null_programs: float) -> None:
    """Per probe: its programs' share of the workers' CPUs, and the mode's
    cost on it: the null probe's, end to end, plus what the probe's
    programs take beyond the null probe's (a longer stack to walk, lock
    waits to time)."""
    hz = args.sample_rate
    print(f"\nper probe, {args.workers} workers, light at {hz:,} Hz, {args.probe_rounds} rounds (medians)")
    print(f"{'probe':10} {'programs':>10} {'CPU time':>9}  the costliest programs")
    for probe, rounds in per_probe.items():
        shares, tops = [], {}
        for secs, _ops, delta in rounds:
            shares.append(sum(ns for _, ns in delta.values()) / (secs * 1e9 * args.workers))
            for name, (_, ns) in delta.items():
                tops.setdefault(name, []).append(ns / (secs * 1e9 * args.workers))
        prog = float(np.median(shares))
        top = sorted(tops.items(), key=lambda kv: -float(np.median(kv[1])))[:3]
        print(
            f"{probe:10} {prog:10.2%} {null_cost + prog - null_programs:9.2%}  "
            + ", ".join(f"{n} {float(np.median(v)):.2%}" for n, v in top)
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--sample-rate", type=int, metavar="HZ", help="default: light mode's")
    ap.add_argument("--threshold-ns", type=float, default=1000.0)
    ap.add_argument("--probes", default=OSMARK_PROBES, help="probes whose programs' time is measured ('' for none)")
    ap.add_argument("--probe-rounds", type=int, default=3)
    args = ap.parse_args()
    if args.seconds < 1.5:
        ap.error("--seconds: at least 1.5 (two snapshots inside the window)")
    if args.sample_rate is not None and not 1 <= args.sample_rate <= engine.Explain.most_hz():
        ap.error(f"--sample-rate: 1 to {engine.Explain.most_hz():,} Hz")
    args.sample_rate = engine.Explain("light", args.sample_rate).sample_hz  # None: light mode's
    plain, light, per_probe = measure(args)
    hz = args.sample_rate
    print(
        f"null probe timed op by op, {args.workers} worker(s), {args.rounds} rounds of {args.seconds:g} s, "
        f"light at {hz:,} Hz, interrupted: above {args.threshold_ns:g} ns (median [95 % interval])"
    )
    for label, runs in (("plain", plain), ("light", light)):
        print(
            f"  {label:6}"
            + show(" interrupted/s", [r["interrupted_per_s"] for r in runs], "{:,.0f}")
            + show("  held", [r["held_share"] for r in runs], "{:.3%}")
            + show("  timed ops/s", [r["timed_per_s"] for r in runs], "{:,.3g}")
        )
    extra_n = [b["interrupted_per_s"] - a["interrupted_per_s"] for a, b in zip(plain, light)]
    extra_held = [b["held_share"] - a["held_share"] for a, b in zip(plain, light)]
    caught = float(np.median(extra_n)) / hz
    print(
        show("  light − plain: interrupted/s", extra_n, "{:+,.0f}")
        + f"  (the clock took {hz:,}/s: caught {caught:.0%})"
    )
    print(show("  light − plain: held time", extra_held, "{:+.3%}"))
    if caught <= 0:
        print("  the light runs show no more interruptions than the plain ones: no cost per sample can be told")
        return
    cost = [h / caught for h in extra_held]
    per_sample_ns = [c * 1e9 / hz for c in cost]
    bpf = [r["bpf_share"] for r in light]
    print(show("  cost of light mode on the null probe (held time / caught)", cost, "{:+.2%}"))
    print(show("  per sample, end to end", per_sample_ns, "{:,.0f} ns"))
    print(
        show("  the programs' run time (all of them, per sample)", [b * 1e9 / hz for b in bpf], "{:,.0f} ns")
        + show("; as a share of the workers' CPUs", bpf, "{:.2%}")
    )
    if per_probe:
        report_probes(args, per_probe, float(np.median(cost)), float(np.median(bpf)))


if __name__ == "__main__":
    main()
