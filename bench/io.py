"""`oslens io`'s engine against fio and against a bare C loop (issue 16), on
the same device, engine, block size, queue depth, pattern (random or in
order, reads, writes or a mix), syncs, rate and CPUs, alternated round by
round: IOPS ratio per point (the harness must add nothing: within 3 % of
the reference, or faster) and each one's CPU per I/O; the rows at 1, 2, …
CPUs are the scaling of this machine's zram and loop devices. Not a test:
timing claims live here.

oslens: the engine invoked as `oslens io` invokes it for the repetitions
it reports (`--latency`: every I/O timed into a histogram; completions are
followed in a repetition of their own), one pinned worker per CPU, fixed
time. fio: one job per CPU pinned
there (--cpus_allowed), the same random 4 KiB direct reads with
--norandommap, its defaults otherwise (io_uring: an enter per I/O, rings set
up with DEFER_TASKRUN where the kernel has it; it times every I/O too).
bare: bench/uring_loop.c, the engine's io_uring loop with nothing around it
(no histogram, no counter, no BPF), one process per CPU, each seeded by its
index as the engine seeds its workers (loops of one seed read the same
blocks in step and share them in the cache: that reference was up to 15 %
faster on zram); it drives the ring either way (`wait`), so each of the
engine's ways has its reference.

CPU per I/O: the submitting processes' own user+system time over their
I/Os (the engine's workers' rusage of the measured window; fio's usr_cpu
and sys_cpu over its runtime; the bare loop's getrusage).

Usage: python bench/io.py [--rounds 5] [--seconds 2] [--size 256M] [--kinds zram,loop] [--cases L,…]
Needs root, fio and a C compiler (scripts/install-deps.sh bench).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from oslens import engine
from oslens.blockdev import devices
from oslens.blockdev.target import parse_size

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Case:
    """One comparison: the engine's probe and options, and the reference
    running the same job: fio with these job options (rw, rwmixread, fsync,
    rate_iops … as fio spells them), or the bare loop driven `how` at `qd`."""

    label: str
    probe: str
    opts: dict
    ref: str  # fio or bare
    fio: dict = field(default_factory=dict)
    bare: tuple[str, int] | None = None


def fio_job(ioengine: str, qd: int = 1, **more) -> dict:
    """fio's options for a job like the engine's. scramble_buffers=0: the
    engine writes each worker's one incompressible buffer, and fio's default
    of changing a few bytes of it before each write doubles its CPU per
    write on zram (9.4 µs against 4.6; why, not pinned down); with it off,
    the two write at the same cost (measured, stop 39)."""
    return {"ioengine": ioengine, "iodepth": qd, "rw": "randread", "direct": 1, "scramble_buffers": 0} | more


CASES = [
    Case("psync", "io:direct", {}, "fio", fio_job("psync")),
    Case("uring qd1", "io-uring", {"qd": 1}, "fio", fio_job("io_uring")),
    Case("uring qd16", "io-uring", {"qd": 16}, "fio", fio_job("io_uring", 16)),
    Case("uring qd16", "io-uring", {"qd": 16}, "bare", bare=("reap", 16)),
    Case("uring qd16 wait=1", "io-uring", {"qd": 16, "wait": 1}, "bare", bare=("wait", 16)),
    # issue 32's modes: each against fio running the same job
    Case("psync randwrite", "io:direct", {"reads": 0}, "fio", fio_job("psync", rw="randwrite")),
    Case("psync randrw 70/30", "io:direct", {"reads": 70}, "fio", fio_job("psync", rw="randrw", rwmixread=70)),
    Case("psync read", "io:direct", {"seq": 1}, "fio", fio_job("psync", rw="read")),
    Case("libaio qd1", "libaio", {"qd": 1}, "fio", fio_job("libaio")),
    Case("libaio qd16", "libaio", {"qd": 16}, "fio", fio_job("libaio", 16)),
    Case("libaio qd16 write", "libaio", {"qd": 16, "seq": 1, "reads": 0}, "fio", fio_job("libaio", 16, rw="write")),
    Case("cached randwrite fsync 4", "io:cached", {"reads": 0, "fsync": 4}, "fio",
         fio_job("psync", rw="randwrite", direct=0, fsync=4, end_fsync=1)),
    # a sync on a queued engine waits for the I/Os in flight, as fio's libaio engine does (its io_uring
    # engine queues an IORING_OP_FSYNC beside them instead: not the same job)
    Case("libaio qd8 randwrite fsync 8", "libaio", {"qd": 8, "reads": 0, "fsync": 8}, "fio",
         fio_job("libaio", 8, rw="randwrite", fsync=8)),
    Case("uring qd8 randwrite fsync 8", "io-uring", {"qd": 8, "reads": 0, "fsync": 8}, "fio",
         fio_job("libaio", 8, rw="randwrite", fsync=8)),
    # CPU per I/O at a rate (co-design study, Fig. 6.6-6.9): the IOPS are the rate's on both sides. fio
    # waits for its next I/O by spinning where the device completes in the caller (zram: usr 99.9 %, 10
    # context switches in 40,000 I/Os), by sleeping where it blocks (loop); the engine always sleeps on an
    # absolute timer, so on zram fio's CPU per I/O is its spin, not the I/O's
    Case("psync at 20k/s", "io:direct", {"rate": 20000}, "fio", fio_job("psync", rate_iops=20000)),
    Case("uring qd4 at 20k/s", "io-uring", {"qd": 4, "rate": 20000}, "fio", fio_job("io_uring", 4, rate_iops=20000)),
    Case("libaio qd4 at 20k/s", "libaio", {"qd": 4, "rate": 20000}, "fio", fio_job("libaio", 4, rate_iops=20000)),
]  # fmt: skip
COOP_TASKRUN = 0x100  # the engine's default ring set-up (taskrun=1), given to the bare loop


def run_oslens(target: str, probe: str, opts: dict, cpus: list[int], seconds: float) -> tuple[float, float]:
    argv = engine.run_argv(probe=probe, cpus=cpus, duration=seconds, warmup=0.3, reps=1, target=target,
                           opts=opts or None, latency=True)  # fmt: skip
    out = subprocess.run([str(engine.engine_path()), *argv], capture_output=True, text=True, check=True).stdout
    ws = [r for r in map(json.loads, out.splitlines()) if r["type"] == "worker"]
    # rusage spans the measured loop (with --latency the warm-up comes before it)
    cpu = sum(w["rusage"]["user_s"] + w["rusage"]["sys_s"] for w in ws)
    return sum(w["ops_per_sec"] for w in ws), cpu / sum(w["ops"] for w in ws) * 1e6


def run_fio(target: str, size: int, job: dict, cpus: list[int], seconds: float) -> tuple[float, float]:
    """fio, one job per CPU pinned there; a sequential job reads its own
    slice of the device, as the engine's workers do (offset_increment)."""
    jobs = []
    for c in cpus:
        jobs += [f"--name=cpu{c}", f"--cpus_allowed={c}"]
    opts = dict(job)
    if opts["rw"] in ("read", "write", "rw"):
        opts |= {"size": size // len(cpus), "offset_increment": size // len(cpus)}
    args = ["fio", "--output-format=json", f"--filename={target}", "--bs=4k", "--norandommap", "--randrepeat=0",
            "--time_based", f"--runtime={seconds * 1000:.0f}ms", "--ramp_time=300ms",
            *(f"--{k}={v}" for k, v in opts.items())]  # fmt: skip
    out = subprocess.run(args + jobs, capture_output=True, text=True, check=True).stdout
    doc = json.loads(out[out.index("{") :])
    iops = sum(j[d]["iops"] for j in doc["jobs"] for d in ("read", "write"))
    ios = sum(j[d]["total_ios"] for j in doc["jobs"] for d in ("read", "write"))
    cpu = sum((j["usr_cpu"] + j["sys_cpu"]) / 100 * j["job_runtime"] / 1e3 for j in doc["jobs"])
    return iops, cpu / ios * 1e6 if ios else float("nan")


def run_bare(
    exe: Path, target: str, how: str, qd: int, cpus: list[int], seconds: float, same_seed: bool = False
) -> tuple[float, float]:
    """One bare loop per CPU, each seeded by its index as the engine seeds
    its workers (`same_seed`: all alike, the old reference, for comparison)."""
    procs = [
        subprocess.Popen(
            [str(exe), target, how, str(qd), str(seconds), str(c), hex(COOP_TASKRUN), str(0 if same_seed else i)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for i, c in enumerate(cpus)
    ]
    got = [json.loads(p.communicate()[0]) for p in procs]
    iops = sum(g["iops"] for g in got)
    return iops, sum(g["cpu_us_per_io"] * g["iops"] for g in got) / iops


def build_bare(out: Path) -> Path:
    exe = out / "uring_loop"
    subprocess.run([os.environ.get("CC", "cc"), "-O2", str(HERE / "uring_loop.c"), "-o", str(exe)], check=True)
    return exe


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--size", default="256M")
    ap.add_argument("--kinds", default="zram,loop")
    ap.add_argument("--cases", help="only these labels, comma-separated")
    a = ap.parse_args()
    if os.geteuid() != 0 or not shutil.which("fio"):
        sys.exit("bench/io.py needs root and fio (scripts/install-deps.sh bench)")
    cpus_all = sorted(os.sched_getaffinity(0))
    with tempfile.TemporaryDirectory() as tmp:
        bare = build_bare(Path(tmp))
        for kind in a.kinds.split(","):
            if why := devices.available_kinds()[kind]:
                print(f"{kind}: {why}")
                continue
            t = devices.make(kind, parse_size(a.size))
            try:
                bench_device(a, t, kind, cpus_all, bare)
            finally:
                devices.remove_device(t.made_line)


def bench_device(a, t, kind: str, cpus_all: list[int], bare: Path) -> None:
    print(f"\n== {kind}: {t.path}, {a.size}, 4 KiB I/Os, {a.rounds} rounds alternated, "
          f"{a.seconds:g} s each")  # fmt: skip
    print(f"{'case':<26} {'vs':<5} {'CPUs':>4} {'oslens IOPS':>12} {'its IOPS':>12} {'ratio [min–max]':>17} "
          f"{'oslens µs CPU/IO':>17} {'its µs CPU/IO':>14}")  # fmt: skip
    only = set(a.cases.split(",")) if a.cases else None
    for case in CASES:
        if only and case.label not in only:
            continue
        for n in range(1, len(cpus_all) + 1):
            cpus = cpus_all[:n]
            o, r = [], []
            for i in range(a.rounds):
                for who in ("oslens", case.ref) if i % 2 == 0 else (case.ref, "oslens"):
                    if who == "oslens":
                        o.append(run_oslens(t.path, case.probe, case.opts, cpus, a.seconds))
                    elif who == "fio":
                        r.append(run_fio(t.path, t.size(), case.fio, cpus, a.seconds))
                    else:
                        r.append(run_bare(bare, t.path, *case.bare, cpus, a.seconds))
            ratios = np.array([x[0] for x in o]) / np.array([y[0] for y in r])
            print(
                f"{case.label:<26} {case.ref:<5} {n:>4} {np.median([x[0] for x in o]):>12,.0f} "
                f"{np.median([y[0] for y in r]):>12,.0f} "
                f"{np.median(ratios):>6.3f} [{ratios.min():.2f}–{ratios.max():.2f}] "
                f"{np.median([x[1] for x in o]):>17.2f} {np.median([y[1] for y in r]):>14.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
