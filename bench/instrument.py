"""Measures the instrument itself (not a test: timing claims live here).

1. Harness cost: getppid ns/op through the engine against a bare C loop of
   getppid built with the engine's compiler flags, pinned to the same CPU,
   alternated run by run so that drift hits both alike.
2. Run-to-run spread of each OSMark probe's throughput over N repetitions,
   at one worker and at every CPU.

Usage: python bench/instrument.py [--rounds 9] [--reps 5] [--duration 1]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from oslens import engine
from oslens.analysis.stats import median_ci, relative_spread

HERE = Path(__file__).resolve().parent
CFLAGS = ["-O2", "-g", "-std=gnu11", "-pthread", "-D_GNU_SOURCE"]  # as engine/Makefile


def build_bare(tmp: Path) -> Path:
    exe = tmp / "bare_getppid"
    subprocess.run([os.environ.get("CC", "cc"), *CFLAGS, str(HERE / "bare_getppid.c"), "-o", str(exe)], check=True)
    return exe


def engine_records(*args: str) -> list[dict]:
    p = subprocess.run([str(engine.engine_path()), *args], capture_output=True, text=True, check=True)
    return [json.loads(line) for line in p.stdout.splitlines()]


def harness_cost(rounds: int, duration: float) -> dict:
    cpu = engine.topology()["cpus"][0]["cpu"]
    with tempfile.TemporaryDirectory(prefix="oslens-bench-") as tmp:
        bare_exe = build_bare(Path(tmp))
        n = 3_000_000
        bare, harnessed = [], []
        for _ in range(rounds):
            bare.append(
                float(
                    subprocess.run([str(bare_exe), str(n), str(cpu)], capture_output=True, text=True, check=True).stdout
                )
            )
            recs = engine_records(
                "run", "--probe", "getppid", "--cpus", str(cpu), "--duration", str(duration), "--warmup", "0.2"
            )
            w = next(r for r in recs if r["type"] == "worker")
            harnessed.append(1e9 / w["ops_per_sec"])
    b, h = median_ci(bare), median_ci(harnessed)
    diffs = np.array(harnessed) - np.array(bare)
    return {
        "cpu": cpu,
        "bare_ns": b,
        "engine_ns": h,
        "paired_diff_ns": median_ci(diffs.tolist()),
        "bare_spread": relative_spread(bare),
        "engine_spread": relative_spread(harnessed),
    }


def probe_spread(reps: int, duration: float) -> list[dict]:
    ncpu = engine.topology()["available"]
    rows = []
    for probe in ("fork", "mmap", "dup", "socket", "sem"):
        for workers in sorted({1, ncpu}):
            recs = engine_records(
                "run",
                "--probe",
                probe,
                "--workers",
                str(workers),
                "--reps",
                str(reps),
                "--duration",
                str(duration),
                "--warmup",
                "0.3",
            )
            per_rep: dict[int, float] = {}
            for r in recs:
                if r["type"] == "worker":
                    per_rep[r["rep"]] = per_rep.get(r["rep"], 0.0) + r["ops_per_sec"]
            totals = list(per_rep.values())
            rows.append(
                {
                    "probe": probe,
                    "workers": workers,
                    "total": median_ci(totals),
                    "spread": relative_spread(totals),
                    "cv": float(np.std(totals, ddof=1) / np.mean(totals)) if len(totals) > 1 else 0.0,
                }
            )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9, help="alternated bare/engine getppid rounds")
    ap.add_argument("--reps", type=int, default=5, help="repetitions per OSMark probe point")
    ap.add_argument("--duration", type=float, default=1.0, help="seconds per measurement")
    a = ap.parse_args()

    c = harness_cost(a.rounds, a.duration)
    print(f"getppid on CPU {c['cpu']}, {a.rounds} alternated rounds (median [interval]):")
    for key, label in (("bare_ns", "bare C loop"), ("engine_ns", "oslens-engine"), ("paired_diff_ns", "engine - bare")):
        iv = c[key]
        print(f"  {label:<14} {iv.median:8.2f} ns/op  [{iv.low:.2f} – {iv.high:.2f}] ({iv.coverage:.0%})")
    print(f"  run-to-run spread: bare {c['bare_spread']:.1%}, engine {c['engine_spread']:.1%}")
    print(f"\nOSMark probes, total ops/s over {a.reps} repetitions of {a.duration:g} s:")
    print(f"  {'probe':<8}{'workers':>8}{'median':>14}{'spread':>9}{'CV':>8}")
    for r in probe_spread(a.reps, a.duration):
        print(f"  {r['probe']:<8}{r['workers']:>8}{r['total'].median:>14,.0f}{r['spread']:>9.1%}{r['cv']:>8.1%}")


if __name__ == "__main__":
    sys.exit(main())
