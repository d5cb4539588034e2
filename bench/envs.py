"""Native against container and KVM guest (issue 15): the same operations
timed with `oslens latency` on the host and `--in ENV`, alternated round by
round, and what making the environment costs (for a guest: its boot). Not a test: timing claims live
here. This host is itself a guest, so "native" is a KVM guest's kernel; the
ratios are of the container over that.

Per operation: p50 and p99 per environment (medians over rounds) and each
ratio to native with its order-statistic interval over the rounds' ratios.
Then the set-up: wall and host CPU time (user+system of oslens and all it
started) of one getppid point, native and in the container.

Usage: python bench/envs.py [--rounds 5] [--ops 20000] [--envs 'native;container;kvm:cpus=2']
(environments apart by ';' when any has options, as `oslens envs --envs`)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

from oslens.analysis.stats import median_ci
from oslens.commands.envs import split_specs

OPERATIONS = ["getppid", "fault:anon", "fork", "pingpong:pipe"]


def oslens(*args: str, db: str) -> tuple[dict, float, float]:
    """The command's JSON document, its wall seconds and host CPU seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "oslens", "--db", db, "-q", "--json", *args], capture_output=True, text=True, check=True
    ).stdout
    wall = time.monotonic() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(out), wall, cpu


def percentiles(doc: dict) -> dict[str, tuple[float, float]]:
    return {
        f"{o['probe']}:{o['variant']}": (o["p50_ns"], o["p99_ns"]) for o in doc["operations"] if o["phase"] == "alone"
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--ops", type=int, default=20000)
    ap.add_argument("--envs", default="native,container")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="oslens-bench-envs.") as tmp:
        measure(a, os.path.join(tmp, "db"))


def measure(a: argparse.Namespace, db: str) -> None:
    envs = split_specs(a.envs)
    got: dict[str, list[dict]] = {e: [] for e in envs}
    setup: dict[str, list[tuple[float, float]]] = {e: [] for e in envs}
    boot: dict[str, list[tuple[float, float]]] = {e: [] for e in envs}
    for _ in range(a.rounds):
        for e in envs:
            doc, _, _ = oslens(
                "latency", "--in", e, "--probe", ",".join(OPERATIONS), "--ops", str(a.ops), "--reps", "1", db=db
            )
            got[e].append(percentiles(doc))
            doc, wall, cpu = oslens(
                "scale", "--in", e, "--probe", "getppid", "--workers", "1", "--ops", "1000", "--reps", "1", db=db
            )
            setup[e].append((wall, cpu))
            made = doc["machine"].get("environment") or {}
            if made.get("boot_s") is not None:
                boot[e].append((made["boot_s"], made.get("boot_host_cpu_s") or float("nan")))
    base = envs[0]
    print(f"{a.rounds} alternated rounds, {a.ops} operations each; median ns [ratio to {base}: median, interval]")
    for op in got[base][0]:
        line = [f"{op:<16}"]
        for e in envs:
            p50 = median_ci([r[op][0] for r in got[e]]).median
            p99 = median_ci([r[op][1] for r in got[e]]).median
            cell = f"{e} p50 {p50:,.0f} p99 {p99:,.0f}"
            if e != base:
                for k, name in ((0, "p50"), (1, "p99")):
                    iv = median_ci([r[op][k] / b[op][k] for r, b in zip(got[e], got[base])])
                    cell += f" · {name} ×{iv.median:.3f} [{iv.low:.3f}–{iv.high:.3f}, {iv.coverage:.0%}]"
            line.append(cell)
        print("  ".join(line))
    print("one getppid point (1,000 ops), whole command: median wall s, host CPU s")
    for e in envs:
        walls, cpus = zip(*setup[e])
        line = f"  {e:<10} wall {median_ci(list(walls)).median:.2f} s, CPU {median_ci(list(cpus)).median:.2f} s"
        if boot[e]:
            b_wall, b_cpu = zip(*boot[e])
            line += f"; of it the guest's boot: wall {median_ci(list(b_wall)).median:.2f} s, QEMU CPU "
            line += f"{median_ci(list(b_cpu)).median:.2f} s"
        print(line)


if __name__ == "__main__":
    main()
