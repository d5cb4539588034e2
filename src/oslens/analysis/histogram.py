"""The engine's log-linear histograms: decoding, merging, percentiles.

Layout (engine/hist.h): values below 2**(b+1) have a bucket each; above,
every power of two is cut into 2**b sub-buckets, so a bucket is at most
2**-b of its lower bound wide. A percentile is the representative (middle)
value of the bucket holding the nearest-rank element, clamped to the exact
min and max, so it is within half a bucket width of the true order
statistic: 0.39 % for b = 7."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# A percentile is told only where at least TAIL_SAMPLES values lie beyond
# it: below that its nearest rank is the maximum or next to it (9 values
# give p99 = p99.9 = max), a tail no one can read. Every report of a
# histogram applies this one rule (told_percentiles) and states it so.
TAIL_SAMPLES = 10
TAIL_RULE = (
    f"a percentile q is given only when at least {TAIL_SAMPLES} values lie beyond it, "
    f"n ≥ {TAIL_SAMPLES}/(1 − q): p50 from 20, p90 from 100, p99 from 1,000, p99.9 from 10,000"
)


def samples_to_tell(q: float) -> int:
    """The fewest values that tell percentile q (0 ≤ q < 100) under TAIL_RULE."""
    # rounded first: 10 / (1 − 0.999) is 10000.000000000009 in floating point
    return math.ceil(round(TAIL_SAMPLES * 100 / (100 - q), 6))


def told_percentiles_of(values, qs) -> np.ndarray:
    """Nearest-rank percentiles of raw values (q in 0..100), NaN where too
    few values tell them (TAIL_RULE)."""
    v = np.asarray(values, dtype=float)
    return np.array(
        [float(np.percentile(v, q, method="inverted_cdf")) if v.size >= samples_to_tell(q) else np.nan for q in qs]
    )


def untold(label: str, q: float, n: int) -> str:
    """Why percentile q (named label) of n values is not given."""
    return f"{label} needs {samples_to_tell(q):,} values ({TAIL_SAMPLES} beyond it), {n:,} measured"


@dataclass(frozen=True)
class Histogram:
    unit_ns: float
    sub_bits: int
    index: np.ndarray  # sorted bucket indices with a non-zero count
    counts: np.ndarray
    count: int
    sum: int  # exact, in units
    min: int
    max: int

    @classmethod
    def from_record(cls, h: dict) -> "Histogram":
        b = np.array(h["buckets"], dtype=np.int64).reshape(-1, 2)
        order = np.argsort(b[:, 0])
        return cls(
            float(h["unit_ns"]),
            int(h["sub_bucket_bits"]),
            b[order, 0],
            b[order, 1],
            int(h["count"]),
            int(h["sum"]),
            int(h["min"]),
            int(h["max"]),
        )

    def to_record(self) -> dict:
        return {
            "unit_ns": self.unit_ns,
            "sub_bucket_bits": self.sub_bits,
            "count": self.count,
            "sum": self.sum,
            "min": self.min,
            "max": self.max,
            "buckets": np.column_stack([self.index, self.counts]).tolist(),
        }

    def merge(self, other: "Histogram") -> "Histogram":
        """The histogram of both sets of values. Units must agree: histograms
        from engines with different TSC calibrations are not mergeable."""
        if self.sub_bits != other.sub_bits or not np.isclose(self.unit_ns, other.unit_ns, rtol=1e-9):
            raise ValueError("histograms with different units or layouts cannot be merged")
        if other.count == 0:
            return self
        if self.count == 0:
            return other
        idx = np.union1d(self.index, other.index)
        counts = np.zeros(idx.size, dtype=np.int64)
        counts[np.searchsorted(idx, self.index)] += self.counts
        counts[np.searchsorted(idx, other.index)] += other.counts
        return Histogram(
            self.unit_ns,
            self.sub_bits,
            idx,
            counts,
            self.count + other.count,
            self.sum + other.sum,
            min(self.min, other.min),
            max(self.max, other.max),
        )

    def subtract(self, part: "Histogram") -> "Histogram":
        """The histogram of the values of self that are not in `part` (a subset of
        them, counted in the same layout: all faults minus the major ones), bucket
        by bucket: counts and sum exact; min and max only to their bucket's width."""
        if self.sub_bits != part.sub_bits or not np.isclose(self.unit_ns, part.unit_ns, rtol=1e-9):
            raise ValueError("histograms with different units or layouts cannot be subtracted")
        counts = dict(zip(self.index.tolist(), self.counts.tolist()))
        for i, c in zip(part.index.tolist(), part.counts.tolist()):
            counts[i] = counts.get(i, 0) - c
        if any(c < 0 for c in counts.values()) or part.count > self.count:
            raise ValueError("not a subset: a bucket of the part holds more than the whole's")
        kept = sorted((i, c) for i, c in counts.items() if c > 0)
        index = np.array([i for i, _ in kept], dtype=np.int64)
        counts_kept = np.array([c for _, c in kept], dtype=np.int64)
        shape = Histogram(self.unit_ns, self.sub_bits, index, counts_kept, 0, 0, 0, 0)
        low = high = 0
        if kept:
            lower, width = shape.bounds()
            low, high = int(max(self.min, lower[0])), int(min(self.max, lower[-1] + width[-1] - 1))
        return Histogram(
            self.unit_ns, self.sub_bits, index, counts_kept, self.count - part.count, self.sum - part.sum, low, high
        )

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Lower bound and width, in units, of each non-empty bucket."""
        sub = 1 << self.sub_bits
        idx = self.index
        shift = np.where(idx < sub, 0, idx // sub - 1)
        lower = np.where(idx < sub, idx, ((idx % sub) + sub) << shift)
        return lower.astype(np.float64), (1 << shift).astype(np.float64)

    def representatives(self) -> np.ndarray:
        lower, width = self.bounds()
        return lower + (width - 1) / 2

    def percentiles(self, qs) -> np.ndarray:
        """Nearest-rank percentiles (q in 0..100), in ns."""
        if self.count == 0:
            return np.full(len(qs), np.nan)
        return _nearest_rank(
            np.clip(self.representatives(), self.min, self.max) * self.unit_ns, self.counts, self.count, qs
        )

    def percentile(self, q: float) -> float:
        return float(self.percentiles([q])[0])

    def told_percentiles(self, qs) -> np.ndarray:
        """percentiles(qs), NaN where too few values tell it (TAIL_RULE)."""
        values = self.percentiles(qs)
        return np.where([self.count >= samples_to_tell(q) for q in qs], values, np.nan)

    @property
    def mean_ns(self) -> float:
        return self.sum / self.count * self.unit_ns if self.count else float("nan")

    @property
    def std_ns(self) -> float:
        """From bucket midpoints: within the bucket resolution of the exact value."""
        if self.count < 2:
            return float("nan")
        mid = self.representatives()
        mean = self.sum / self.count
        return float(np.sqrt(np.sum(self.counts * (mid - mean) ** 2) / (self.count - 1))) * self.unit_ns

    @property
    def min_ns(self) -> float:
        return self.min * self.unit_ns

    @property
    def max_ns(self) -> float:
        return self.max * self.unit_ns


def merge_all(hists) -> Histogram:
    hists = list(hists)
    out = hists[0]
    for h in hists[1:]:
        out = out.merge(h)
    return out


def _nearest_rank(values: np.ndarray, counts: np.ndarray, total: int, qs) -> np.ndarray:
    """Nearest-rank percentiles (q in 0..100) of `total` values: `values`
    ascending, each held `counts` times."""
    ranks = np.maximum(1, np.ceil(np.asarray(qs, dtype=float) / 100 * total)).astype(np.int64)
    return values[np.searchsorted(np.cumsum(counts), ranks, side="left")]


def pooled_percentiles(hists, qs) -> np.ndarray:
    """Nearest-rank percentiles (ns) of the values of histograms that cannot
    be merged bucket by bucket (engines of different TSC calibrations: one
    per invocation), each bucket taken at its representative value in ns."""
    values, counts = [], []
    for h in hists:
        if h.count:
            values.append(np.clip(h.representatives(), h.min, h.max) * h.unit_ns)
            counts.append(h.counts)
    if not values:
        return np.full(len(qs), np.nan)
    v, c = np.concatenate(values), np.concatenate(counts)
    order = np.argsort(v, kind="stable")
    return _nearest_rank(v[order], c[order], int(c.sum()), qs)
