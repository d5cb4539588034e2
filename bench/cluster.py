"""`oslens cluster bsp` against references (not a test: timing claims live
here), on this host with 2 ranks.

1. The collective's own cost: the harness's figure (the wait of the rank
   that arrived last, median over steps) against a minimal MPI loop doing
   the same (spin, then the collective, the last entrant's wait; its ranks
   pinned as the harness's are), and against the collective back to back,
   as osu_barrier times it (cheaper: its flags stay hot in the cache and the
   partner is already polling). The harness and the minimal loop run in
   pairs, in random order within each round, so that a round's ratio
   compares two runs under the same load (other work on the machine moves
   both); the verdict is the median ratio over the rounds with a bootstrap
   interval, and the rounds' own spread is printed beside it.
2. Measured vs predicted bulk-synchronous slowdown, without and with noise
   injected on one rank's CPU (a SCHED_FIFO thread, `oslens-engine inject`)
   of a few sizes: how far the tail-at-scale prediction is off.

Usage: python bench/cluster.py [--rounds 20] [--iterations 3000] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from oslens import engine

HERE = Path(__file__).parent


def launcher(n: int = 2) -> list[str]:
    argv = [shutil.which("mpirun") or "mpirun", "-n", str(n), "--bind-to", "none"]
    return argv + (["--allow-run-as-root"] if os.geteuid() == 0 else [])


def oslens_bsp(db: Path, *args: str) -> dict:
    p = subprocess.run(
        [sys.executable, "-m", "oslens", "--db", str(db), "cluster", "bsp", "--ranks", "2", *args, "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(p.stdout)["bsp"]


def minimal_loop(exe: Path, calls: int, collective: str, compute_us: int = 0) -> float:
    argv = [*launcher(), str(exe), str(calls), collective, str(compute_us)]
    out = subprocess.run(argv, capture_output=True, text=True, check=True)
    return float(out.stdout.split()[0])


def bootstrap_median(x: np.ndarray, rng: np.random.Generator, n: int = 10_000) -> tuple[float, float]:
    """A 95 % percentile-bootstrap interval of the median of x."""
    medians = np.median(x[rng.integers(0, len(x), (n, len(x)))], axis=1)
    return float(np.quantile(medians, 0.025)), float(np.quantile(medians, 0.975))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--iterations", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=1, help="the order within each round")
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    cpus = sorted(os.sched_getaffinity(0))[:2]
    os.sched_setaffinity(0, cpus)  # one CPU per rank
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "mpi_barrier"
        subprocess.run(["mpicc", "-O2", "-o", str(exe), str(HERE / "mpi_barrier.c")], check=True)
        db = Path(tmp) / "b.db"
        print(f"1. the collective's own cost, ns: {a.rounds} rounds of a pair in random order, 2 ranks on CPUs {cpus}")
        for coll in ("barrier", "allreduce"):
            ours, same = np.zeros(a.rounds), np.zeros(a.rounds)
            for i in range(a.rounds):
                for which in rng.permutation(2):
                    if which == 0:
                        args = ("--compute-us", "20", "--iterations", str(a.iterations), "--collective", coll)
                        ours[i] = oslens_bsp(db, *args, "--no-bpf")["collective_ns"]
                    else:
                        same[i] = minimal_loop(exe, a.iterations, coll, 20)
            tight = [minimal_loop(exe, a.iterations * 10, coll) for _ in range(3)]
            ratio = ours / same
            lo, hi = bootstrap_median(ratio, rng)
            print(
                f"   {coll:9} harness {np.median(ours):4.0f} (rounds {ours.min():.0f}–{ours.max():.0f})"
                f"  minimal loop {np.median(same):4.0f} ({same.min():.0f}–{same.max():.0f})"
                f"  back to back {np.median(tight):4.0f}\n"
                f"             harness / minimal, median of the rounds' ratios {np.median(ratio):.3f}"
                f" [95 % interval {lo:.3f}–{hi:.3f}]; rounds {ratio.min():.2f}–{ratio.max():.2f}"
            )
        print("2. measured vs predicted slowdown (mean, p99), 1 ms steps, noise injected on rank 1's CPU")
        for busy_us in (0, 50, 200, 1000):
            inj = None
            if busy_us:
                inj = subprocess.Popen(
                    [
                        str(engine.engine_path()),
                        "inject",
                        "--cpu",
                        str(cpus[1]),
                        "--period-us",
                        "10000",
                        "--busy-us",
                        str(busy_us),
                        "--duration",
                        "60",
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            try:
                b = oslens_bsp(db, "--compute-us", "1000", "--iterations", str(a.iterations), "--no-bpf")
            finally:
                if inj:
                    inj.terminate()
                    inj.wait()
            m, p = b["measured"], b["predicted"]
            lo, hi = p["mean_interval"]
            print(
                f"   inject {busy_us:5} µs / 10 ms: measured {m['mean']:.3f} p99 {m['p99']:.3f} · predicted "
                f"{p['mean']:.3f} [{lo:.3f}–{hi:.3f}] p99 {p['p99']:.3f} · off {b['error']:+.1%}"
            )


if __name__ == "__main__":
    main()
