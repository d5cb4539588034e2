"""Measures what `oslens profile` costs the workload it profiles (not a
test: timing claims live here). Target: ≤ 5 % slowdown with full
attribution.

Each workload runs bare, under the engine with procfs and perf counters only
(--no-bpf), with every BPF part but the system-call tracepoints
(--no-syscalls), and under full attribution, alternated round by round so
that drift hits all alike. The figure is the median wall time's ratio to
bare, with an order-statistic interval.

Workloads:
- getppid: a loop of system calls, the worst case (every call is traced
  at entry and exit);
- build:   `make -jN` of a generated C project (40 files), a realistic mix.

Usage: python bench/profile.py [--rounds 7] [--calls 2000000]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from oslens import engine
from oslens.analysis.stats import median_ci

GETPPID = r"""
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(int argc, char **argv) { long n = atol(argv[1]); for (long i = 0; i < n; i++) syscall(SYS_getppid); return 0; }
"""


def make_project(root: Path, files: int = 40) -> None:
    """A C project big enough to take a second or so, with headers, so the
    compiler opens, reads and maps many files, forks and execs."""
    (root / "src").mkdir(parents=True)
    for i in range(files):
        (root / "src" / f"m{i}.h").write_text(f"int f{i}(int);\n")
        body = "\n".join(f"static int g{i}_{k}(int x) {{ return x * {k + 3} + (x >> {k % 7}); }}" for k in range(60))
        calls = " + ".join(f"g{i}_{k}(x)" for k in range(60))
        (root / "src" / f"m{i}.c").write_text(
            f'#include "m{i}.h"\n#include <stdio.h>\n{body}\nint f{i}(int x) {{ return {calls}; }}\n'
        )
    objs = " ".join(f"src/m{i}.o" for i in range(files))
    (root / "Makefile").write_text(f"all: {objs}\n%.o: %.c\n\tcc -O2 -c $< -o $@\nclean:\n\trm -f src/*.o\n")


def wall(cmd: list[str], mode: str, cwd: str | None = None) -> tuple[float, float]:
    """(the workload's wall time, the profiler's fixed cost around it).
    Profiled, the workload's time is the engine's own: from releasing the
    command to reaping it (loading BPF and reading procfs are not the
    workload's slowdown, and are reported apart)."""
    eng = str(engine.engine_path())
    flags = {"bare": None, "counters": ["--no-bpf"], "no-syscalls": ["--no-syscalls"], "full": []}[mode]
    with open(os.devnull, "w") as null, tempfile.TemporaryFile("w+") as records:
        argv = cmd if flags is None else [eng, "profile", "--out-fd", str(records.fileno()), *flags, "--", *cmd]
        t = time.perf_counter()
        subprocess.run(argv, cwd=cwd, check=True, stdout=null, pass_fds=(records.fileno(),))
        total = time.perf_counter() - t
        if flags is None:
            return total, 0.0
        records.seek(0)
        end = next(r for r in map(json.loads, records) if r["type"] == "end_target")
        return end["wall_ns"] / 1e9, total - end["wall_ns"] / 1e9


def bench(name: str, cmd: list[str], rounds: int, before=None, cwd: str | None = None) -> None:
    modes = ("bare", "counters", "no-syscalls", "full")
    times: dict[str, list[float]] = {m: [] for m in modes}
    fixed: dict[str, list[float]] = {m: [] for m in modes}
    for _ in range(rounds):
        for mode in modes:
            if before:
                before()
            w, f = wall(cmd, mode, cwd)
            times[mode].append(w)
            fixed[mode].append(f)
    base = median_ci(times["bare"])
    print(f"{name}: bare {base.median * 1e3:.1f} ms [{base.low * 1e3:.1f} – {base.high * 1e3:.1f}]")
    for mode in modes[1:]:
        m = median_ci(times[mode])
        print(
            f"  {mode:<11} {m.median * 1e3:8.1f} ms [{m.low * 1e3:.1f} – {m.high * 1e3:.1f}]  "
            f"slowdown {m.median / base.median - 1:+.1%}   (start-up and report: "
            f"{median_ci(fixed[mode]).median * 1e3:.0f} ms more)"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=2_000_000)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="oslens-bench-") as tmp:
        src = Path(tmp) / "getppid.c"
        src.write_text(GETPPID)
        exe = Path(tmp) / "getppid"
        subprocess.run(["cc", "-O2", "-o", str(exe), str(src)], check=True)
        print(f"{a.rounds} alternated rounds, median wall time [interval]; engine {engine.engine_path()}")
        bench(f"getppid × {a.calls:,}", [str(exe), str(a.calls)], a.rounds)
        proj = Path(tmp) / "proj"
        make_project(proj)
        jobs = str(os.cpu_count() or 1)
        make = shutil.which("make")
        bench(
            f"make -j{jobs} of 40 C files",
            [make, "-s", "-j", jobs],
            a.rounds,
            before=lambda: subprocess.run([make, "-s", "clean"], cwd=proj, check=True),
            cwd=str(proj),
        )


if __name__ == "__main__":
    main()
