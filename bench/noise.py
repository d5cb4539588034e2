"""Measures `noise` as an instrument (not a test: timing claims live here).

1. The detour probe's loop time per iteration (target ≤ 30 ns).
2. Noise (% of CPU lost) with BPF attribution on and off, alternated run by
   run on the same CPU so that drift hits both alike (attribution must add
   ≤ 1 % noise). Run it on an idle machine.

Usage: python bench/noise.py [--rounds 5] [--seconds 3]
"""

from __future__ import annotations

import argparse
import json
import subprocess

import numpy as np

from oslens import engine
from oslens.analysis.stats import median_ci


def detour(cpu: int, seconds: float, trace: bool) -> dict:
    args = [
        str(engine.engine_path()),
        "run",
        "--probe",
        "detour",
        "--cpus",
        str(cpu),
        "--duration",
        str(seconds),
        "--warmup",
        "0.2",
        "--interval",
        "0.5",
    ]
    if trace:
        args.append("--trace")
    p = subprocess.run(args, capture_output=True, text=True, check=True)
    recs = [json.loads(line) for line in p.stdout.splitlines()]
    d = next(r for r in recs if r["type"] == "detours")
    t = next((r for r in recs if r["type"] == "trace"), None)
    return {
        "loop_ns": d["runtime_ns"] / d["iterations"],
        "lost": d["total_ns"] / d["runtime_ns"],
        "count": d["count"],
        "traced": bool(t and t.get("available")),
        "reason": t and t.get("reason"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=3.0)
    a = ap.parse_args()
    cpu = engine.topology()["cpus"][-1]["cpu"]
    off, on = [], []
    for _ in range(a.rounds):
        off.append(detour(cpu, a.seconds, False))
        on.append(detour(cpu, a.seconds, True))
    if not on[0]["traced"]:
        print(f"attribution unavailable: {on[0]['reason']}")
    loop = median_ci([r["loop_ns"] for r in off])
    print(f"detour probe on CPU {cpu}, {a.rounds} alternated rounds of {a.seconds:g} s (median [interval]):")
    print(f"  loop time per iteration      {loop.median:6.2f} ns [{loop.low:.2f} – {loop.high:.2f}]  (target ≤ 30 ns)")
    for label, rs in (("attribution off", off), ("attribution on ", on)):
        iv = median_ci([100 * r["lost"] for r in rs])
        print(
            f"  CPU lost, {label}    {iv.median:7.3f} % [{iv.low:.3f} – {iv.high:.3f}]"
            f"   detours/s {np.median([r['count'] for r in rs]) / a.seconds:,.0f}"
        )
    diff = median_ci([100 * (b["lost"] - x["lost"]) for x, b in zip(off, on)])
    print(
        f"  paired difference (on - off) {diff.median:+7.3f} points [{diff.low:+.3f} – {diff.high:+.3f}]"
        "  (target ≤ 1 point)"
    )


if __name__ == "__main__":
    main()
