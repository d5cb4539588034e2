"""Where an explained run's own cost goes: per BPF program of the engine, how
often it ran and its time, per operation of the workers and as a share of
their CPU time (a benchmark, not a test: timing claims live here).

bench/explain.py measures what a mode costs (plain and explained runs
alternated); this says which of its programs the cost is in. The kernel
counts each program's runs and time while statistics are enabled, here
through a BPF_ENABLE_STATS descriptor this script holds (they stop when it
exits, however it exits). Two snapshots inside the measured window of one
explained engine run, read from the engine's own program descriptors
(/proc/PID/fdinfo: no other engine's programs), give each program's share;
what no program accounts for (the tracepoints' and perf events' own
dispatch, the stats' two clock reads per run) is the rest of the cost
bench/explain.py finds.

Usage: python bench/explain_programs.py [--probe fork] [--mode thread] [--workers 2]
       [--explain light] [--sample-rate HZ] [--seconds 4] [--rounds 3]
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import json
import os
import platform
import struct
import subprocess
import time
from pathlib import Path

from explain import planned  # bench/explain.py, beside this script: the planner's argv

from oslens import engine

BPF_SYSCALL = {"x86_64": 321, "aarch64": 280}  # __NR_bpf
BPF_ENABLE_STATS, BPF_STATS_RUN_TIME = 32, 0


def enable_stats() -> int:
    """A descriptor that keeps the kernel's per-program statistics on while open."""
    nr = BPF_SYSCALL.get(platform.machine())
    if nr is None:
        raise SystemExit(f"no bpf() system call number known for {platform.machine()}")
    libc = ctypes.CDLL(None, use_errno=True)
    attr = ctypes.create_string_buffer(struct.pack("I", BPF_STATS_RUN_TIME), 128)
    fd = libc.syscall(nr, BPF_ENABLE_STATS, attr, 128)
    if fd < 0:
        raise SystemExit(f"BPF_ENABLE_STATS: {os.strerror(ctypes.get_errno())}")
    return fd


def tree(pid: int) -> list[int]:
    """pid and its descendants now."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for task in glob.glob(f"/proc/{p}/task/*/children"):
            try:
                todo += [int(c) for c in Path(task).read_text().split()]
            except OSError:  # the thread ended meanwhile
                continue
    return out


def programs(pid: int) -> dict[int, tuple[int, int]]:
    """The programs the engine started as `pid` holds: id -> (runs, ns)."""
    found: dict[int, tuple[int, int]] = {}
    for p in tree(pid):
        for info in glob.glob(f"/proc/{p}/fdinfo/*"):
            try:
                fields = dict(line.split(":", 1) for line in Path(info).read_text().splitlines() if ":" in line)
            except OSError:  # closed meanwhile
                continue
            if "run_cnt" in fields:  # a program's descriptor (a link's names its program too, without counts)
                found[int(fields["prog_id"])] = (int(fields["run_cnt"]), int(fields["run_time_ns"]))
    return found


def names() -> dict[int, str]:
    out = subprocess.run(["bpftool", "prog", "show", "--json"], capture_output=True, text=True, check=True).stdout
    return {p["id"]: p.get("name", str(p["id"])) for p in json.loads(out)}


WARMUP_S = 0.3


def twin_argv(args: argparse.Namespace) -> list[str]:
    """The explained run's engine argv, as `oslens scale --explain` plans the
    twin of this point (bench/explain.py's planned: the planner's own)."""
    how = engine.Explain(args.explain, args.sample_rate)
    _, twin = planned(args.probe, args.mode, args.workers, args.seconds, how, warmup=WARMUP_S)
    return list(twin)


def one_round(args: argparse.Namespace) -> tuple[float, float, dict[str, tuple[int, int]]]:
    """One explained run: the seconds between the two snapshots, the
    workers' operations per second, and each program's runs and ns there."""
    warmup = WARMUP_S
    cmd = [str(engine.engine_path()), *twin_argv(args)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    started = time.monotonic()
    while not programs(proc.pid):  # loaded: then the window begins after the warm-up
        if proc.poll() is not None or time.monotonic() - started > 30:
            raise SystemExit(f"the engine loaded no program: {' '.join(cmd)}")
        time.sleep(0.05)
    time.sleep(warmup + 0.2)
    t0, before = time.monotonic(), programs(proc.pid)
    time.sleep(args.seconds - 1.0)
    t1, after = time.monotonic(), programs(proc.pid)
    known = names()
    out, _ = proc.communicate()
    records = [json.loads(line) for line in out.splitlines() if line.strip()]
    ops = sum(r["ops_per_sec"] for r in records if r["type"] == "worker")
    delta: dict[str, tuple[int, int]] = {}
    for pid, (runs, ns) in after.items():
        runs0, ns0 = before.get(pid, (0, 0))
        name = known.get(pid, str(pid))
        total = delta.get(name, (0, 0))
        delta[name] = (total[0] + runs - runs0, total[1] + ns - ns0)
    return t1 - t0, ops, delta


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--probe", default="fork")
    ap.add_argument("--mode", default="thread")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--explain", choices=engine.EXPLAIN_MODES, default="light")
    ap.add_argument("--sample-rate", type=int, metavar="HZ", help="default: the mode's")
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if args.seconds < 2:
        ap.error("--seconds: at least 2 (two snapshots 1 s inside the window)")
    if args.sample_rate is not None and not 1 <= args.sample_rate <= engine.Explain.most_hz():
        ap.error(f"--sample-rate: 1 to {engine.Explain.most_hz():,} Hz")
    args.sample_rate = engine.Explain(args.explain, args.sample_rate).sample_hz  # None: the mode's
    stats = enable_stats()
    try:
        rounds = [one_round(args) for _ in range(args.rounds)]
    finally:
        os.close(stats)
    how = engine.Explain(args.explain, args.sample_rate)
    print(f"{args.probe} {args.mode} {args.workers} workers, {how}, {args.rounds} rounds")
    print(f"{'program':28} {'runs/s':>10} {'ns/run':>8} {'ns/op':>8} {'share of worker CPU':>20}")
    names = sorted({n for _, _, d in rounds for n in d}, key=lambda n: -sum(d.get(n, (0, 0))[1] for *_, d in rounds))
    total = [0.0] * len(rounds)
    for name in names:
        per = []
        for i, (secs, ops, d) in enumerate(rounds):
            runs, ns = d.get(name, (0, 0))
            total[i] += ns / (secs * 1e9 * args.workers)
            per.append(
                (
                    runs / secs,
                    ns / runs if runs else 0.0,
                    ns / (ops * secs) if ops else 0.0,
                    ns / (secs * 1e9 * args.workers),
                )
            )
        med = [sorted(x[j] for x in per)[len(per) // 2] for j in range(4)]
        print(f"{name:28} {med[0]:10.0f} {med[1]:8.0f} {med[2]:8.1f} {med[3]:20.2%}")
    print(
        f"{'all programs':28} {'':10} {'':8} {'':8} {sorted(total)[len(total) // 2]:20.2%}  (rounds: "
        + ", ".join(f"{t:.2%}" for t in total)
        + ")"
    )


if __name__ == "__main__":
    main()
