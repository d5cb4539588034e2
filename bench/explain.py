"""What `scale --explain` costs and how much it explains (a benchmark, not a
test: timing claims live here).

For each probe and worker count, plain and explained engine runs alternate
(`run` vs `run --explain`, the same fixed time), so that both see the same
machine; the medians over the rounds give

- the attribution's cost: 1 - explained throughput / plain throughput, and
  per operation in ns, with the system calls per operation (the cost grows
  with the tracepoint hits, not with the time);
- how much of the explained time per operation the causes cover: the share
  left unexplained.

Usage: python bench/explain.py [--rounds 5] [--seconds 1] [--probes dup,getppid,mmap,fork,sem,socket]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess

from oslens import engine
from oslens.analysis.explain import explain_point
from oslens.records import explained_points


def run(probe: str, mode: str, workers: int, seconds: float, explain: bool) -> list[dict]:
    args = [str(engine.engine_path()), "run", "--probe", probe, "--mode", mode, "--workers", str(workers)]
    args += ["--duration", str(seconds), "--warmup", "0.2"] + (["--explain"] if explain else [])
    p = subprocess.run(args, capture_output=True, text=True, check=True)
    return [json.loads(line) for line in p.stdout.splitlines() if line.strip()]


def ops_per_s(records: list[dict]) -> float:
    return sum(r["ops_per_sec"] for r in records if r["type"] == "worker")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--probes", default="dup,getppid,mmap,fork,sem,socket")
    ap.add_argument("--modes", default="process,thread")
    args = ap.parse_args()
    ncpu = engine.topology()["available"]
    counts = sorted({1, ncpu})
    print(
        f"{'probe':10} {'mode':8} {'workers':>7} {'plain ops/s':>12} {'explained':>12} {'cost':>7} "
        f"{'ns/op':>8} {'calls/op':>8} {'unexplained':>11}"
    )
    for probe in args.probes.split(","):
        for mode in args.modes.split(","):
            for n in counts:
                plain, expl, unexplained, calls = [], [], [], []
                for _ in range(args.rounds):
                    plain.append(ops_per_s(run(probe, mode, n, args.seconds, False)))
                    recs = run(probe, mode, n, args.seconds, True)
                    expl.append(ops_per_s(recs))
                    ep = next(iter(explained_points(recs).values()))
                    s = explain_point(ep)
                    if s is None:
                        print(f"{probe}: not explained: {ep.unavailable}")
                        return
                    unexplained.append(s.unexplained_ns / s.ns_per_op)
                    calls.append(sum(c.count_per_op for c in s.causes if c.group == "syscall"))
                p, e = statistics.median(plain), statistics.median(expl)
                cost_ns = n / e * 1e9 - n / p * 1e9  # per operation of one worker
                print(
                    f"{probe:10} {mode:8} {n:7d} {p:12.4g} {e:12.4g} {1 - e / p:7.1%} {cost_ns:8.0f} "
                    f"{statistics.median(calls):8.2f} {statistics.median(unexplained):11.2%}"
                )


if __name__ == "__main__":
    main()
