"""fork and fork-static against OSMark's forkbench as a plain C program (not a
test: timing claims live here). Target: the engine's time per fork within
5 % of the plain loop built the same way (dynamic: the engine's link flags;
static: -static), both pinned to the same CPU, alternated round by round.

fork's cost grows with the parent's address space (dup_mmap copies each
mapping and the page tables of its private pages; the child's exit tears
them down), so each line also gives the parent's mappings and anonymous
memory: the engine's worker record reports its own (`image`).

The verdict is the median of the per-round ratios, with its order-statistic
interval: rounds pair an engine run with a plain run right after it.

Usage: python bench/fork.py [--rounds 7] [--ops 3000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
from pathlib import Path

from oslens import engine
from oslens.analysis.stats import median_ci

HERE = Path(__file__).parent


def build(out: Path) -> dict[str, Path]:
    src = HERE / "fork_loop.c"
    exes = {"dynamic": out / "fork_loop", "static": out / "fork_loop_static"}
    # the engine's flags (engine/Makefile): dynamic without PIE, or -static
    flags = ["cc", "-O2", "-std=gnu11", "-pthread", "-D_GNU_SOURCE"]
    subprocess.run([*flags, "-no-pie", "-o", str(exes["dynamic"]), str(src)], check=True)
    subprocess.run([*flags, "-static", "-o", str(exes["static"]), str(src)], check=True)
    return exes


def engine_fork(exe: Path, probe: str, ops: int) -> tuple[float, int, int, int]:
    """ns per fork, mappings, anonymous kB of the worker, and its CPU."""
    out = subprocess.run(
        [str(exe), "run", "--probe", probe, "--workers", "1", "--ops", str(ops), "--reps", "1"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    w = next(r for r in map(json.loads, out.splitlines()) if r["type"] == "worker")
    image = w.get("image") or {}
    return 1e9 * w["seconds"] / w["ops"], image.get("mappings", -1), image.get("anon_kb", -1), w["cpu"]


def plain_fork(exe: Path, ops: int, cpu: int) -> tuple[float, int, int]:
    ns, maps, anon = subprocess.run(
        [str(exe), str(ops), str(cpu)], capture_output=True, text=True, check=True
    ).stdout.split()
    return float(ns), int(maps), int(anon)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--ops", type=int, default=3000)
    a = ap.parse_args()
    dyn = engine.engine_path()
    static = dyn.with_name(dyn.name + "-static")
    pairs = {"dynamic": (dyn, "fork"), "static": (static, "fork-static")}
    with tempfile.TemporaryDirectory() as tmp:
        plain = build(Path(tmp))
        times: dict[str, list[float]] = {f"{k} {w}": [] for k in pairs for w in ("engine", "plain")}
        images: dict[str, tuple[int, int]] = {}
        for _ in range(a.rounds):
            for kind, (exe, probe) in pairs.items():
                if not exe.exists():
                    continue
                ns, maps, anon, cpu = engine_fork(exe, probe, a.ops)
                times[f"{kind} engine"].append(ns)
                images[f"{kind} engine"] = (maps, anon)
                ns, maps, anon = plain_fork(plain[kind], a.ops, cpu)
                times[f"{kind} plain"].append(ns)
                images[f"{kind} plain"] = (maps, anon)
    print(f"{a.rounds} alternated rounds of {a.ops} forks, median µs per fork [interval]; engine {dyn}")
    for kind, (_, probe) in pairs.items():
        if not times[f"{kind} engine"]:
            print(f"{kind}: {pairs[kind][0]} not built")
            continue
        e, p = median_ci(times[f"{kind} engine"]), median_ci(times[f"{kind} plain"])
        (em, ea), (pm, pa) = images[f"{kind} engine"], images[f"{kind} plain"]
        for who, m, maps, anon in (("engine", e, em, ea), ("plain", p, pm, pa)):
            span = f"[{m.low / 1e3:.1f} – {m.high / 1e3:.1f}]"
            print(f"{probe:12} {who:6} {m.median / 1e3:7.1f} {span}  {maps} mappings, {anon} KiB anon")
        # Paired by round: the machine's drift between rounds cancels out.
        r = median_ci([x / y for x, y in zip(times[f"{kind} engine"], times[f"{kind} plain"], strict=True)])
        print(
            f"{'':12} engine / plain {e.median / p.median - 1:+.1%}; paired by round "
            f"{r.median - 1:+.1%} [{r.low - 1:+.1%} – {r.high - 1:+.1%}, {r.coverage:.0%}]"
        )


if __name__ == "__main__":
    main()
