"""What timing operations costs the loop it times (a benchmark, not a test).

Per probe, one worker, three runs alternated in a new random order each
round: no timing, every operation timed (`--latency`, what an explained
twin did before), and one in N timed (`--latency --latency-every auto`,
what `scale --explain` runs on both sides of a pair now). Gives, per probe,
the ns each way adds to an operation (from the medians of the rounds'
throughputs), the share of the loop that is, and the N the workers chose.

Usage: python bench/timing.py [--rounds 5] [--seconds 1] [--probes getppid,dup,...] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import random
import statistics
import subprocess
import sys

from oslens import engine

PROBES = "getppid,dup,fcntl,fstat,futex-wake,eventfd,ioctl,stat,getdents64,pipe,socket,sem,fork,mmap"
WAYS = {"untimed": {}, "every": {"latency": True}, "sampled": {"latency": True, "latency_every": engine.SAMPLED_TIMING}}


def run(args: list[str]) -> list[dict]:
    p = subprocess.run([*engine._exe(), *args], capture_output=True, text=True, check=True)
    return [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--probes", default=PROBES)
    ap.add_argument("--out")
    a = ap.parse_args()
    rows = []
    print(f"{'probe':12} {'ns/op':>8} {'every: +ns/op':>14} {'share':>7} {'sampled: +ns/op':>16} {'share':>7} {'N':>9}")
    for probe in a.probes.split(","):
        argv = {
            way: engine.run_argv(probe=probe, workers=1, duration=a.seconds, warmup=0.2, **kw)
            for way, kw in WAYS.items()
        }
        rates: dict[str, list[float]] = {w: [] for w in WAYS}
        every: list[int] = []
        for r in range(a.rounds):
            order = list(WAYS)
            random.Random(r).shuffle(order)
            for way in order:
                recs = run(argv[way])
                rates[way].append(statistics.fmean(w["ops_per_sec"] for w in recs if w["type"] == "worker"))
                every += [h["every"] for h in recs if h["type"] == "hist" and way == "sampled"]
        ns = {w: 1e9 / statistics.median(v) for w, v in rates.items()}
        row = {
            "probe": probe,
            "ns_per_op": ns["untimed"],
            "every_added_ns": ns["every"] - ns["untimed"],
            "every_share": 1 - ns["untimed"] / ns["every"],
            "sampled_added_ns": ns["sampled"] - ns["untimed"],
            "sampled_share": 1 - ns["untimed"] / ns["sampled"],
            "sampled_every": sorted(set(every)),
            "rounds": a.rounds,
            "argv": argv,
        }
        rows.append(row)
        print(
            f"{probe:12} {row['ns_per_op']:8.0f} {row['every_added_ns']:14.1f} {row['every_share']:7.1%} "
            f"{row['sampled_added_ns']:16.1f} {row['sampled_share']:7.1%} "
            f"{min(every):>4}–{max(every):<4}"
        )
    if a.out:
        doc = {
            "command": " ".join(["python", "bench/timing.py", *sys.argv[1:]]),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "kernel": platform.release(),
            "machine": {"cpus": engine.topology()["available"]},
            "rows": rows,
        }
        with open(a.out, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
