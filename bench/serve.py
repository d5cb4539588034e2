"""What profiling costs a real server (a benchmark, not a test: timing
claims live here). For nginx and redis, each under its load generator as
`oslens serve` runs them, repetitions with the server profiled
(`oslens-engine profile --pid`, everything it attaches) and without
alternate, the same warm-up, window and load; the load generator's count
(the server's own for redis) gives requests per second over the whole
load, and the cost is 1 - profiled / unprofiled, medians over the rounds.

Usage: python bench/serve.py [--rounds 5] [--servers nginx,redis] [--warmup 2] [--seconds 5]
       [--connections 64]   (as root)
"""

from __future__ import annotations

import argparse
import statistics

from oslens import engine, runtime
from oslens.plan.serve import split_cpus
from oslens.serve import ServePoint, serve_once


def per_s(server: str, cpus: tuple, clients: tuple, args, profiled: bool, rep: int) -> float | None:
    point = ServePoint(server, cpus, clients, args.connections, args.warmup, args.seconds, rep, profiled=profiled)
    record = serve_once(point)[0]
    return record["load"]["per_s"] if record["load"]["errors"] == 0 else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--servers", default="nginx,redis")
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--connections", type=int, default=64)
    args = ap.parse_args()
    runtime.private_tmp()
    server_cpus, client_cpus = split_cpus(engine.placement(engine.topology()["available"], "compact"), None)
    print(f"server on CPUs {server_cpus}, load generator on {client_cpus}; {args.rounds} rounds, "
          f"{args.warmup} s warm-up, {args.seconds} s window, {args.connections} connections")  # fmt: skip
    print(f"{'server':10} {'plain req/s':>12} {'profiled':>12} {'cost':>7}   per round (plain / profiled)")
    for server in args.servers.split(","):
        plain, profiled = [], []
        for r in range(args.rounds):
            plain.append(per_s(server, tuple(server_cpus), tuple(client_cpus), args, False, r))
            profiled.append(per_s(server, tuple(server_cpus), tuple(client_cpus), args, True, r))
        a = statistics.median(x for x in plain if x is not None)
        b = statistics.median(x for x in profiled if x is not None)
        rounds = " ".join(f"{x or 0:.0f}/{y or 0:.0f}" for x, y in zip(plain, profiled))
        print(f"{server:10} {a:12,.0f} {b:12,.0f} {1 - b / a:7.1%}   {rounds}")


if __name__ == "__main__":
    main()
