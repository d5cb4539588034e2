"""OS entry run lengths (the co-design study's chapter 4): how long kernel
entries ran on the CPU, from the engine's `run_lengths` objects
(engine/bpf/runlen.h) — counts, the entries longer than 1, 10 and 100 µs
counted exactly, and a histogram by powers of two. The study found most
entries short and a few long ones holding much of the kernel's time; these
are the figures that show it."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass


@dataclass
class RunLengths:
    count: int
    mean_ns: float
    total_ns: int
    # threshold ns -> (share of the entries longer, share of their kernel time in them)
    over: dict[int, tuple[float, float]]
    log2_hist: list[tuple[int, int]]  # (floor(log2(ns)), entries)

    @staticmethod
    def of(parts: list[dict]) -> RunLengths | None:
        """The sum of engine objects {count, sum_ns, over: [[ns, count, sum_ns]…],
        log2_hist: [[b, count]…]}: several repetitions, or several kinds that do not
        overlap in time. None when no entry was seen."""
        count = sum(p["count"] for p in parts)
        total = sum(p["sum_ns"] for p in parts)
        if not count:
            return None
        over: dict[int, list[int]] = defaultdict(lambda: [0, 0])
        hist: dict[int, int] = defaultdict(int)
        for p in parts:
            for ns_, n, s in p["over"]:
                over[ns_][0] += n
                over[ns_][1] += s
            for b, n in p["log2_hist"]:
                hist[b] += n
        return RunLengths(
            count,
            total / count,
            total,
            {t: (n / count, s / total if total else 0.0) for t, (n, s) in sorted(over.items())},
            sorted(hist.items()),
        )

    def share_at_most(self, ns: int) -> float | None:
        """The share of entries no longer than `ns` (a threshold the engine counted exactly)."""
        return 1 - self.over[ns][0] if ns in self.over else None

    def to_dict(self) -> dict:
        d = asdict(self)
        d["over"] = {str(k): list(v) for k, v in self.over.items()}  # JSON keys are strings
        d["log2_hist"] = [list(x) for x in self.log2_hist]
        return d
