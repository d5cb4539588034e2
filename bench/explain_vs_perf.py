"""`--explain` side by side with perf on the same run (a benchmark, not a
test): its sampled kernel functions against `perf record -g -e cpu-clock`,
its lock waits against `perf lock contention` (tracepoint mode; Debian's
perf has no -b).

The engine runs one explained point under perf, so both watch the same
threads at the same time:

- functions: perf samples the workers at 1 kHz of their CPU time, as the
  engine's own sampler does; kept are perf's samples of the workers' threads
  inside the engine's measured window (perf records CLOCK_MONOTONIC, the
  window's clock). Per kernel function, its share of the kernel samples
  (self: the leaf) in each; agreement is the ranking of the top functions
  (Spearman) and the largest difference of share among them. Each sampler's
  timer lands in the other's programs now and then (perf's in the engine's
  BPF programs, which the engine cannot sample): those frames are left out.
- locks: per caller of the lock (the first function outside the locking
  code, as perf names it), its share of the total wait in each; perf's
  total covers the whole run (warm-up, master), the engine's the workers'
  window, so shares are compared, not totals.

Usage: python bench/explain_vs_perf.py [--probe mmap] [--mode thread] [--workers 2] [--seconds 2]
       [--explain full|light] [--top 10]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from oslens import engine
from oslens.analysis.kstacks import spinning_in
from oslens.kallsyms import Kallsyms, resolve_charges

FLAGS = {"full": "--explain", "light": "--explain-light"}
LOCKING = re.compile(r"^(_raw_|queued_|native_queued|__mutex_lock|mutex_lock|rwsem_|down_|__down|up_|lock_|osq_)")


def engine_argv(a) -> list[str]:
    return [str(engine.engine_path()), "run", "--probe", a.probe, "--mode", a.mode, "--workers", str(a.workers),
            "--duration", str(a.seconds), "--warmup", "0.2", FLAGS[a.explain]]  # fmt: skip


def records(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def window_and_workers(recs: list[dict]) -> tuple[int, int, set[int], dict]:
    explain = next(r for r in recs if r["type"] == "explain")
    tids = {w["tid"] for r in recs if r["type"] == "started" for w in r["workers"]}
    return explain["window_start_ns"], explain["window_end_ns"], tids, explain


def ours_functions(explain: dict, tids: set[int], syms: Kallsyms) -> Counter:
    resolve_charges(explain, syms)
    own: Counter = Counter()
    for s in explain.get("samples", []):
        if s["tid"] in tids and s.get("frames"):
            own[s["frames"][0]] += s["count"]
    return own


def perf_functions(data: Path, start: int, end: int, tids: set[int]) -> Counter:
    """Leaf kernel function of each of perf's samples of the workers in the window."""
    out = subprocess.run(["perf", "script", "-i", str(data), "-F", "tid,time,ip,sym", "--ns"],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    own: Counter = Counter()
    for block in out.split("\n\n"):
        lines = [ln for ln in block.strip().splitlines() if ln.strip()]
        if not lines:
            continue
        head = lines[0].split()
        tid, t_ns = int(head[0]), int(round(float(head[1].rstrip(":")) * 1e9))
        if tid not in tids or not start <= t_ns <= end:
            continue
        frame = lines[1].split() if len(lines) > 1 else []
        if len(frame) >= 2 and frame[0].startswith("ffff"):  # a kernel address: the leaf is in the kernel
            own[frame[1].split("+")[0]] += 1
    return own


def without_bpf(c: Counter) -> Counter:
    return Counter({f: n for f, n in c.items() if not f.startswith(("bpf_prog_", "0x", "__bpf_prog", "bpf_trace"))})


def spearman(a: list[float], b: list[float]) -> float:
    def ranks(xs):
        order = sorted(range(len(xs)), key=lambda i: -xs[i])
        r = [0.0] * len(xs)
        for k, i in enumerate(order):
            r[i] = k
        return r

    ra, rb = ranks(a), ranks(b)
    n = len(a)
    return 1 - 6 * sum((x - y) ** 2 for x, y in zip(ra, rb)) / (n * (n * n - 1)) if n > 1 else float("nan")


def compare_shares(title: str, ours: Counter, theirs: Counter, top: int, names=("explain", "perf")) -> None:
    to, tt = sum(ours.values()), sum(theirs.values())
    if not to or not tt:
        print(f"{title}: nothing to compare ({names[0]} {to}, {names[1]} {tt})")
        return
    # the ranking is read among those that matter: under 1 % in both, ties of a few samples reorder at random
    keys = [k for k, _ in (ours + theirs).most_common(top) if max(ours[k] / to, theirs[k] / tt) >= 0.01]
    so = [ours[k] / to for k in keys]
    st = [theirs[k] / tt for k in keys]
    print(f"\n{title} ({names[0]}: {to}, {names[1]}: {tt}; shares of each one's total)")
    print(f"  {'':44} {names[0]:>8} {names[1]:>8} {'diff':>7}")
    for k, a, b in zip(keys, so, st):
        print(f"  {k[:44]:44} {a:8.1%} {b:8.1%} {a - b:+7.1%}")
    worst = max(abs(a - b) for a, b in zip(so, st))
    print(f"  ranking agreement (Spearman, top {len(keys)}): {spearman(so, st):.2f}; largest share difference "
          f"{worst:.1%}; mean |difference| {statistics.mean(abs(a - b) for a, b in zip(so, st)):.1%}")  # fmt: skip


def functions(a, syms: Kallsyms, tmp: Path) -> None:
    data = tmp / "perf.data"
    p = subprocess.run(["perf", "record", "-q", "-F", "1000", "-g", "-e", "cpu-clock", "-k", "CLOCK_MONOTONIC",
                        "-o", str(data), "--", *engine_argv(a)], capture_output=True, text=True)  # fmt: skip
    if p.returncode:
        sys.exit(f"perf record failed: {p.stderr.strip()[-300:]}")
    start, end, tids, explain = window_and_workers(records(p.stdout))
    ours = without_bpf(ours_functions(explain, tids, syms))
    theirs = without_bpf(perf_functions(data, start, end, tids))
    compare_shares(f"kernel functions, self samples: {a.probe} {a.mode} ×{a.workers}, {a.explain} mode", ours,
                   theirs, a.top)  # fmt: skip


def perf_lock_callers(data: Path) -> Counter:
    p = subprocess.run(["perf", "lock", "contention", "-i", str(data), "-E", "1000"],
                       capture_output=True, text=True, check=True)  # fmt: skip
    out = p.stdout + p.stderr  # perf 6.1 writes the table on stderr
    units = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}
    waits: Counter = Counter()
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 9 and f[0].isdigit() and f[2] in units:
            waits[f[-1].split("+")[0]] += float(f[1]) * units[f[2]]
    return waits


def ours_lock_callers(explain: dict, tids: set[int], syms: Kallsyms) -> Counter:
    resolve_charges(explain, syms)
    waits: Counter = Counter()
    for c in explain["charges"]:
        if c["kind"] == "lock" and c["tid"] in tids:
            frames = [f.split("+")[0] for f in c.get("callers") or []]
            caller = next((f for f in frames if not LOCKING.match(f)), frames[0] if frames else "?")
            waits[caller] += c["ns"]
    # light mode: a spinning waiter is sampled, not timed — its samples in the slow path, by caller
    period = explain.get("sample_period_ns") or 0
    for s in explain.get("samples", []) if explain.get("mode") == "light" else []:
        spun = spinning_in(tuple(s.get("frames") or ()))
        if s["tid"] in tids and not s.get("off_cpu") and spun is not None:
            waits[spun[0] if spun else "?"] += s["count"] * period
    return waits


def locks(a, syms: Kallsyms, tmp: Path) -> None:
    data = tmp / "lock.data"
    p = subprocess.run(["perf", "lock", "record", "-o", str(data), "--", *engine_argv(a)],
                       capture_output=True, text=True)  # fmt: skip
    if p.returncode:
        sys.exit(f"perf lock record failed: {p.stderr.strip()[-300:]}")
    _, _, tids, explain = window_and_workers(records(p.stdout))
    compare_shares(f"lock wait by caller: {a.probe} {a.mode} ×{a.workers}, {a.explain} mode",
                   ours_lock_callers(explain, tids, syms), perf_lock_callers(data), a.top)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--probe", default="mmap")
    ap.add_argument("--mode", default="thread")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--explain", choices=list(FLAGS), default="light")
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--only", choices=["functions", "locks"])
    a = ap.parse_args()
    syms = Kallsyms()
    with tempfile.TemporaryDirectory(prefix="oslens-bench-") as d:
        if a.only != "locks":
            functions(a, syms, Path(d))
        if a.only != "functions":
            locks(a, syms, Path(d))


if __name__ == "__main__":
    main()
