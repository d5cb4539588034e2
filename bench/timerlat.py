"""Measures `timerlat` against cyclictest (rt-tests), the tool whose figure
its thread latency is (not a test: timing claims live here).

On one CPU, alternated round by round so that drift hits all alike:
cyclictest (one thread, SCHED_FIFO, the same period, memory locked) and the
timerlat probe, both with /dev/cpu_dma_latency held at 0 (cyclictest's
default) and both with the idle states left alone (cyclictest --laptop,
timerlat's default); and the timerlat probe with the kernel trace that gives
the IRQ latency and the causes (its cost on the latency it measures).
Per tool and round: p50, p99 and max of the thread latency. cyclictest
counts whole microseconds, truncated (its histogram's buckets: about 0.5 µs
low on average), its overflows (beyond MAX_US) in n but not in the
percentiles; oslens counts nanoseconds.
Run it on an idle machine.

Usage: python bench/timerlat.py [--rounds 5] [--seconds 5] [--period-us 1000] [--prio 95]
(`sh scripts/install-deps.sh bench` installs rt-tests.)
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess

import numpy as np

from oslens import engine
from oslens.analysis.histogram import Histogram
from oslens.analysis.stats import median_ci

MAX_US = 20000  # cyclictest's histogram range; later wake-ups are counted as overflows


def cyclictest(cpu: int, seconds: float, period_us: int, prio: int, idle_limit: bool) -> dict:
    p = subprocess.run(
        ["cyclictest", "-m", "-q", "-t", "1", "-a", str(cpu), "-p", str(prio), "-i", str(period_us),
         "-D", f"{seconds:g}s", "-h", str(MAX_US), *([] if idle_limit else ["--laptop"])],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    buckets = [tuple(map(int, m.groups())) for m in re.finditer(r"^(\d+)\s+(\d+)\s*$", p.stdout, re.M)]
    us = np.array([b for b, n in buckets for _ in range(n)], dtype=float)
    overflows = int(re.search(r"^# Histogram Overflows:\s+(\d+)", p.stdout, re.M).group(1))
    peak = int(re.search(r"^# Max Latencies:\s+(\d+)", p.stdout, re.M).group(1))
    return {
        "n": int(us.size) + overflows,
        "p50": float(np.percentile(us, 50, method="inverted_cdf")) * 1e3,
        "p99": float(np.percentile(us, 99, method="inverted_cdf")) * 1e3,
        "max": peak * 1e3,
    }


def timerlat(cpu: int, seconds: float, period_us: int, prio: int, idle_limit: bool, trace: bool = False) -> dict:
    args = [str(engine.engine_path()), "run", "--probe", "timerlat", "--cpus", str(cpu), "--mode", "thread",
            "--duration", str(seconds), "--warmup", "0.2", "--opt", f"period_us={period_us}", "--opt", f"prio={prio}",
            *(["--opt", "dma_latency_us=0"] if idle_limit else []), *(["--trace"] if trace else [])]  # fmt: skip
    p = subprocess.run(args, capture_output=True, text=True, check=True)
    r = next(json.loads(line) for line in p.stdout.splitlines() if '"type":"timerlat"' in line.replace(" ", ""))
    h = Histogram.from_record(r["thread"])
    return {"n": h.count, "p50": h.percentile(50), "p99": h.percentile(99), "max": h.max_ns, "policy": r["policy"]}


TOOLS = {
    "cyclictest": lambda *a: cyclictest(*a, idle_limit=True),
    "timerlat --dma-latency 0": lambda *a: timerlat(*a, idle_limit=True),
    "timerlat --dma-latency 0, traced": lambda *a: timerlat(*a, idle_limit=True, trace=True),
    "cyclictest --laptop": lambda *a: cyclictest(*a, idle_limit=False),
    "timerlat": lambda *a: timerlat(*a, idle_limit=False),
}
PAIRS = (
    ("cyclictest", "timerlat --dma-latency 0"),
    ("cyclictest --laptop", "timerlat"),
    ("timerlat --dma-latency 0", "timerlat --dma-latency 0, traced"),
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--period-us", type=int, default=1000)
    ap.add_argument("--prio", type=int, default=95)
    a = ap.parse_args()
    if shutil.which("cyclictest") is None:
        raise SystemExit("cyclictest is not installed (sh scripts/install-deps.sh bench)")
    cpu = engine.topology()["cpus"][-1]["cpu"]
    runs: dict[str, list[dict]] = {t: [] for t in TOOLS}
    for _ in range(a.rounds):
        for tool, measure in TOOLS.items():
            runs[tool].append(measure(cpu, a.seconds, a.period_us, a.prio))
    print(
        f"thread latency on CPU {cpu}, a timer every {a.period_us} µs at SCHED_FIFO {a.prio}, "
        f"{a.rounds} alternated rounds of {a.seconds:g} s (median over rounds [95 % interval]):"
    )
    for tool, rs in runs.items():
        cells = []
        for q in ("p50", "p99", "max"):
            iv = median_ci([r[q] / 1e3 for r in rs])
            cells.append(f"{q} {iv.median:7.2f} µs [{iv.low:.2f} – {iv.high:.2f}]")
        print(f"  {tool:33} " + "   ".join(cells) + f"   wake-ups/round {np.median([r['n'] for r in rs]):,.0f}")
    for first, second in PAIRS:
        for q in ("p50", "p99"):
            d = median_ci([(t[q] - c[q]) / 1e3 for c, t in zip(runs[first], runs[second])])
            print(f"  ({second}) − ({first}), {q}, paired: {d.median:+.2f} µs [{d.low:+.2f} – {d.high:+.2f}]")


if __name__ == "__main__":
    main()
