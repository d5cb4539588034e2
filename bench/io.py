"""`oslens io`'s engine against fio (issue 16), on the same device, engine,
block size, queue depth and CPUs, alternated round by round: IOPS ratio
per point (the harness must add nothing: within 3 % of fio, or faster) and
each one's CPU per I/O; then the scaling of this machine's zram and loop
devices at 1, 2, … submitting CPUs. Not a test: timing claims live here.

oslens: `oslens-engine run --probe io:pread|io-uring:read --cpus C` (one
pinned worker per CPU, fixed time). fio: one job per CPU, each pinned there
(--cpus_allowed, --numjobs), the same random 4 KiB direct reads with
--norandommap; io_uring with --iodepth_batch_submit=qd and
--iodepth_batch_complete_min=1, which is how oslens's loop submits. CPU per
I/O: the processes' own user+system time (getrusage of the child) over the
I/Os.

Usage: python bench/io.py [--rounds 5] [--seconds 2] [--size 256M]
Needs root and fio (scripts/install-deps.sh bench).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np

from oslens import blockdev, engine

CASES = [
    ("pread", "io:pread", "psync", 1),
    ("uring qd1", "io-uring:read", "io_uring", 1),
    ("uring qd16", "io-uring:read", "io_uring", 16),
]


def run_oslens(target: str, probe: str, qd: int, cpus: list[int], seconds: float) -> tuple[float, float]:
    args = [
        str(engine.engine_path()),
        "run",
        "--probe",
        probe,
        "--target",
        target,
        "--cpus",
        ",".join(map(str, cpus)),
        "--duration",
        str(seconds),
        "--warmup",
        "0.3",
    ] + (["--opt", f"qd={qd}"] if probe.startswith("io-uring") else [])
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    recs = [json.loads(line) for line in out.splitlines()]
    ws = [r for r in recs if r["type"] == "worker"]
    iops = sum(w["ops_per_sec"] for w in ws)
    ios = sum(w["ops"] for w in ws)
    cpu = sum(w["rusage"]["user_s"] + w["rusage"]["sys_s"] for w in ws)

    return iops, cpu / ios * 1e6


def run_fio(target: str, ioengine: str, qd: int, cpus: list[int], seconds: float) -> tuple[float, float]:
    jobs = []
    for c in cpus:
        jobs += [f"--name=cpu{c}", f"--cpus_allowed={c}"]
    args = [
        "fio",
        "--output-format=json",
        f"--filename={target}",
        f"--ioengine={ioengine}",
        "--direct=1",
        "--rw=randread",
        "--bs=4k",
        f"--iodepth={qd}",
        "--norandommap",
        "--randrepeat=0",
        "--time_based",
        f"--runtime={seconds}",
        "--ramp_time=0.3",
        "--thread=0",
    ]
    if ioengine == "io_uring":
        args += [f"--iodepth_batch_submit={qd}", "--iodepth_batch_complete_min=1"]
    out = subprocess.run(args + jobs, capture_output=True, text=True, check=True).stdout
    doc = json.loads(out[out.index("{") :])
    iops = sum(j["read"]["iops"] for j in doc["jobs"])
    ios = sum(j["read"]["total_ios"] for j in doc["jobs"])
    cpu = sum((j["usr_cpu"] + j["sys_cpu"]) / 100 * j["job_runtime"] / 1e3 for j in doc["jobs"])
    return iops, cpu / ios * 1e6 if ios else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--size", default="256M")
    a = ap.parse_args()
    if os.geteuid() != 0 or not shutil.which("fio"):
        sys.exit("bench/io.py needs root and fio (scripts/install-deps.sh bench)")
    cpus_all = sorted(os.sched_getaffinity(0))
    for kind in ("zram", "loop"):
        if blockdev.available_kinds()[kind]:
            print(f"{kind}: {blockdev.available_kinds()[kind]}")
            continue
        t = blockdev.make(kind, blockdev.parse_size(a.size))
        try:
            print(
                f"\n== {kind}: {t.path}, {a.size}, 4 KiB random direct reads, {a.rounds} rounds alternated, "
                f"{a.seconds:g} s each"
            )
            print(
                f"{'case':<12} {'CPUs':>4} {'oslens IOPS':>12} {'fio IOPS':>12} {'ratio':>14} "
                f"{'oslens µs CPU/IO':>17} {'fio µs CPU/IO':>14}"
            )
            for label, probe, ioengine, qd in CASES:
                for n in range(1, len(cpus_all) + 1):
                    cpus = cpus_all[:n]
                    o, f = [], []
                    for r in range(a.rounds):
                        for who in ("oslens", "fio") if r % 2 == 0 else ("fio", "oslens"):
                            if who == "oslens":
                                o.append(run_oslens(t.path, probe, qd, cpus, a.seconds))
                            else:
                                f.append(run_fio(t.path, ioengine, qd, cpus, a.seconds))
                    ratios = np.array([x[0] for x in o]) / np.array([y[0] for y in f])
                    lo, hi = np.min(ratios), np.max(ratios)
                    print(
                        f"{label:<12} {n:>4} {np.median([x[0] for x in o]):>12,.0f} "
                        f"{np.median([y[0] for y in f]):>12,.0f} "
                        f"{np.median(ratios):>6.3f} [{lo:.2f}–{hi:.2f}] {np.median([x[1] for x in o]):>17.2f} "
                        f"{np.median([y[1] for y in f]):>14.2f}"
                    )
        finally:
            blockdev.remove_device(t.made_line)


if __name__ == "__main__":
    main()
