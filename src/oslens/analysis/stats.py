"""Summaries of repeated measurements that say how far they can be trusted.

Repetitions of a benchmark are few and rarely normal (a preempted run is slow,
never fast), so the median is reported with a distribution-free interval from
order statistics instead of a mean with a t-interval.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np
from scipy.stats import binom

SPREAD_LIMIT = 0.10


@dataclass(frozen=True)
class Interval:
    """A median and the interval [low, high] that covers the true median with
    probability `coverage` (exact for continuous data, conservative with ties)."""

    median: float
    low: float
    high: float
    n: int
    coverage: float

    def to_dict(self) -> dict:
        return asdict(self)


def _ordered_array(values: Sequence[float]) -> np.ndarray:
    a = np.asarray(values, dtype=float).ravel()
    if a.size == 0:
        raise ValueError("no values")
    # Infinities have a place in the order (a ratio over a worker that did no
    # operation); NaN has none, and is a bug upstream.
    if np.any(np.isnan(a)):
        raise ValueError("values must not be NaN")
    return a


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), not {confidence}")


def _coverages(n: int) -> np.ndarray:
    """Coverage of the pair (x_(k), x_(n+1-k)) for k = 1 .. ceil(n/2): the
    probability that Binomial(n, 1/2) falls in [k, n-k]."""
    k = np.arange(1, (n + 1) // 2 + 1)
    return 1.0 - 2.0 * binom.cdf(k - 1, n, 0.5)


def median_ci(values: Sequence[float], confidence: float = 0.95) -> Interval:
    """The median with the narrowest symmetric order-statistic interval whose
    coverage reaches `confidence`; with too few values, (min, max) and the
    smaller coverage it actually has."""
    _check_confidence(confidence)
    a = np.sort(_ordered_array(values))
    n = a.size
    cov = _coverages(n)
    reaching = np.nonzero(cov >= confidence)[0]
    # Coverage falls as k grows, so the last k that still reaches is the narrowest.
    i = int(reaching[-1]) if reaching.size else 0
    return Interval(median=float(np.median(a)), low=float(a[i]), high=float(a[n - 1 - i]),
                    n=int(n), coverage=float(cov[i]))


def repetitions_needed(confidence: float = 0.95) -> int:
    """The fewest values whose (min, max) covers the median with `confidence`."""
    _check_confidence(confidence)
    # 1 - 2 * 0.5**n >= confidence  <=>  n >= log2(2 / (1 - confidence))
    n = max(1, math.ceil(math.log2(2.0 / (1.0 - confidence)) - 1e-12))
    return n


def relative_spread(values: Sequence[float]) -> float:
    """(max - min) / |median|: 0 when all values are equal, inf when they
    differ around a median of 0 (no relative scale exists) or include an
    infinity."""
    a = _ordered_array(values)
    if a.min() == a.max():
        return 0.0
    width = float(a.max() - a.min())
    median = abs(float(np.median(a)))
    if math.isinf(width) or median == 0.0 or math.isinf(median):
        return math.inf
    return width / median


def _percent(x: float, other: float) -> str:
    """x as a percentage with just enough decimals to differ from `other`."""
    for decimals in range(0, 4):
        text = f"{x * 100:.{decimals}f}%"
        if text != f"{other * 100:.{decimals}f}%":
            return text
    return f"{x * 100:.4f}%"


def trust_warnings(values: Sequence[float], confidence: float = 0.95) -> list[str]:
    """Reasons not to trust the median of `values`; empty when there are none."""
    interval = median_ci(values, confidence)
    warnings = []
    if interval.coverage < confidence:
        needed = repetitions_needed(confidence)
        conf = _percent(confidence, interval.coverage)
        if interval.n == 1:
            warnings.append(f"only 1 repetition: no interval around the median can be given "
                            f"({needed} are needed for {conf} confidence)")
        else:
            warnings.append(f"only {interval.n} repetitions: the interval covers the median with "
                            f"{_percent(interval.coverage, confidence)} confidence, not {conf} "
                            f"({needed} are needed)")
    spread = relative_spread(values)
    if math.isinf(spread):
        warnings.append("spread unbounded across repetitions: values differ around a median "
                        "of 0 or include an infinity")
    elif spread > SPREAD_LIMIT:
        warnings.append(f"spread {_percent(spread, SPREAD_LIMIT)} across repetitions exceeds "
                        f"{_percent(SPREAD_LIMIT, spread)}")
    return warnings
