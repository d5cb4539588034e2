"""Measures `latency` as an instrument (not a test: timing claims live here).

1. What timing one operation costs: an empty loop, the serialised clock pair,
   the pair plus the histogram update (bench/timing_cost.c, built from the
   engine's own clock.h and hist.h), and the null probe's p50 as every
   latency table reports it.
2. getppid p50 from oslens against `perf bench syscall basic`, and the pipe
   ping-pong round trip (same CPU, other CPU) against `perf bench sched pipe`
   pinned the same way, run right after on the same machine.

Usage: python bench/latency.py [--seconds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from oslens import engine
from oslens.analysis.histogram import Histogram, merge_all

HERE = Path(__file__).resolve().parent
ENGINE_SRC = HERE.parent / "engine"


def timing_cost(cpu: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        exe = Path(tmp) / "timing_cost"
        subprocess.run(
            [
                os.environ.get("CC", "cc"),
                "-O2",
                "-std=gnu11",
                "-D_GNU_SOURCE",
                f"-I{ENGINE_SRC}",
                str(HERE / "timing_cost.c"),
                *(str(ENGINE_SRC / f) for f in ("clock.c", "hist.c", "json.c")),
                "-lm",
                "-o",
                str(exe),
            ],
            check=True,
        )
        out = subprocess.run(["taskset", "-c", str(cpu), str(exe)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def oslens_hist(probe: str, cpu: int, seconds: float) -> Histogram:
    p = subprocess.run(
        [
            str(engine.engine_path()),
            "run",
            "--probe",
            probe,
            "--cpus",
            str(cpu),
            "--latency",
            "--duration",
            str(seconds),
            "--warmup",
            "0.3",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    hists = [
        Histogram.from_record(json.loads(line)["hist"]) for line in p.stdout.splitlines() if '"type":"hist"' in line
    ]
    return merge_all(hists)


def perf_usecs(*args: str) -> float | None:
    if shutil.which("perf") is None:
        return None
    p = subprocess.run(args, capture_output=True, text=True)
    m = re.search(r"([\d.]+)\s+usecs/op", p.stdout + p.stderr)
    return float(m.group(1)) * 1000 if m else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=2.0, help="seconds per oslens measurement")
    a = ap.parse_args()
    cpus = [c["cpu"] for c in engine.topology()["cpus"]]
    cpu = cpus[0]

    t = timing_cost(cpu)
    floor = oslens_hist("null", cpu, a.seconds)
    print(f"Cost of timing one operation on CPU {cpu} (clock: {t['clock']}), ns per iteration:")
    print(f"  empty loop                        {t['empty_ns']:7.2f}")
    print(f"  histogram update alone            {t['record_only_ns']:7.2f}   (target ≤ 5 ns)")
    print(f"  serialised clock pair, no work    {t['clock_pair_ns']:7.2f}")
    print(f"  clock pair + histogram update     {t['timed_ns']:7.2f}")
    print(
        f"  null probe as reported: p50 {floor.percentile(50):.1f} ns, p99 {floor.percentile(99):.1f} ns "
        "(the part of the pair inside the timed window)"
    )

    print("\noslens against perf bench, run back to back (ns per operation):")
    getppid = oslens_hist("getppid", cpu, a.seconds)
    perf_sys = perf_usecs("taskset", "-c", str(cpu), "perf", "bench", "syscall", "basic")
    print(
        f"  getppid          oslens p50 {getppid.percentile(50):8.0f}  mean {getppid.mean_ns:8.0f}   "
        f"perf bench syscall basic (mean) {perf_sys if perf_sys else 'n/a':>8}"
    )
    same = oslens_hist("pingpong:pipe", cpu, a.seconds)
    perf_same = perf_usecs("taskset", "-c", str(cpu), "perf", "bench", "sched", "pipe", "-l", "200000")
    print(
        f"  pipe, same CPU   oslens p50 {same.percentile(50):8.0f}  mean {same.mean_ns:8.0f}   "
        f"perf bench sched pipe (mean)    {perf_same if perf_same else 'n/a':>8}"
    )
    if len(cpus) > 1:
        other = oslens_hist("pingpong-other:pipe", cpu, a.seconds)
        pair = f"{cpus[0]},{cpus[1]}"
        perf_other = perf_usecs("taskset", "-c", pair, "perf", "bench", "sched", "pipe", "-l", "200000")
        print(
            f"  pipe, two CPUs   oslens p50 {other.percentile(50):8.0f}  mean {other.mean_ns:8.0f}   "
            f"perf bench sched pipe on {pair} {perf_other if perf_other else 'n/a':>8}"
        )
    if shutil.which("perf") is None:
        print("  (perf not installed: apt-get install linux-perf)")


if __name__ == "__main__":
    main()
