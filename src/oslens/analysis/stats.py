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

SPREAD_LIMIT = 0.10
# Workers released further apart than this share of a fixed-work run did not
# really run concurrently for all of it.
SKEW_LIMIT = 0.01


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
    # At p = 1/2 the binomial's mass is C(n, i) / 2^n; its logarithm is a
    # running sum, so every CDF value comes from one pass without
    # scipy.stats, whose import alone took a second of every `show`.
    i = np.arange(1, (n + 1) // 2)
    log_mass = np.concatenate(([0.0], np.cumsum(np.log(n - i + 1) - np.log(i)))) - n * math.log(2.0)
    return 1.0 - 2.0 * np.cumsum(np.exp(log_mass))


def proportion_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper-Pearson) two-sided interval of a proportion seen k
    times in n draws."""
    _check_confidence(confidence)
    if not 0 <= k <= n or n == 0:
        raise ValueError(f"need 0 <= k <= n and n > 0, not k={k}, n={n}")
    # The beta quantiles live in scipy.special; imported here, where the
    # first interval is asked for, not by every command that shows a run.
    from scipy.special import betaincinv

    a = (1 - confidence) / 2
    low = 0.0 if k == 0 else float(betaincinv(k, n - k + 1, a))
    high = 1.0 if k == n else float(betaincinv(k + 1, n - k, 1 - a))
    return low, high


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
    return Interval(
        median=float(np.median(a)), low=float(a[i]), high=float(a[n - 1 - i]), n=int(n), coverage=float(cov[i])
    )


def ratio_interval(a: Interval, b: Interval) -> Interval:
    """a's median over b's (b.low > 0), each end from the ends of both
    intervals: a conservative (Bonferroni) bound whose coverage is what the
    two together guarantee — none, from two repetitions a side."""
    return Interval(
        median=a.median / b.median,
        low=a.low / b.high if b.high else float("inf"),
        high=a.high / b.low if b.low else float("inf"),
        n=min(a.n, b.n),
        coverage=max(a.coverage + b.coverage - 1.0, 0.0),
    )


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
            warnings.append(
                f"only 1 repetition: no interval around the median can be given "
                f"({needed} are needed for {conf} confidence)"
            )
        else:
            warnings.append(
                f"only {interval.n} repetitions: the interval covers the median with "
                f"{_percent(interval.coverage, confidence)} confidence, not {conf} "
                f"({needed} are needed)"
            )
    spread = relative_spread(values)
    if math.isinf(spread):
        warnings.append(
            "spread unbounded across repetitions: values differ around a median of 0 or include an infinity"
        )
    elif spread > SPREAD_LIMIT:
        warnings.append(
            f"spread {_percent(spread, SPREAD_LIMIT)} across repetitions exceeds {_percent(SPREAD_LIMIT, spread)}"
        )
    return warnings


# ------------------------------------------------------- two-sample comparison
#
# Comparing two runs compares their repetitions: few values, no reason to be
# normal, sometimes tied (a count that is often 0). The Mann-Whitney U test
# assumes none of that; with few values it is computed exactly, and it cannot
# reach every significance level: 3 against 3 repetitions can never give a
# two-sided p below 0.1, which is said rather than read as "no difference".

EXACT_LIMIT = 60  # n_a + n_b up to which the p-value is exact rather than a normal approximation


@dataclass(frozen=True)
class RankTest:
    """A two-sided Mann-Whitney U test of two samples."""

    p: float
    u: float  # U of the first sample
    method: str  # "exact", "exact with ties", "normal approximation"
    n_a: int
    n_b: int
    ties: bool

    def to_dict(self) -> dict:
        return asdict(self)


def min_two_sided_p(n_a: int, n_b: int) -> float:
    """The smallest two-sided p-value the Mann-Whitney U test can give with
    these sample sizes (reached by a complete separation without ties):
    2 / C(n_a + n_b, n_a), at most 1."""
    if n_a < 1 or n_b < 1:
        return 1.0
    return min(1.0, 2.0 / math.comb(n_a + n_b, n_a))


def repetitions_for_test(confidence: float = 0.95) -> int:
    """The fewest repetitions in each of two runs with which the two-sided
    Mann-Whitney U test can reach significance at `confidence` at all."""
    _check_confidence(confidence)
    n = 1
    while min_two_sided_p(n, n) > 1.0 - confidence:
        n += 1
    return n


def _rank_sum_distribution(ranks: np.ndarray, n_a: int) -> np.ndarray:
    """P(doubled rank sum = s) of n_a of `ranks` (midranks) drawn without
    replacement: the permutation distribution of the rank-sum statistic,
    counted by dynamic programming on doubled (integer) ranks."""
    r2 = np.rint(2 * ranks).astype(np.int64)
    total = int(r2.sum())
    counts = np.zeros((n_a + 1, total + 1))
    counts[0, 0] = 1.0
    for r in r2:
        counts[1:, r:] += counts[:-1, : total + 1 - r].copy()
    return counts[n_a] / counts[n_a].sum()


def _exact_p_with_ties(ranks: np.ndarray, n_a: int) -> float:
    """Two-sided p of the rank sum of the first n_a of `ranks` (midranks)."""
    dist = _rank_sum_distribution(ranks, n_a)
    w = int(np.rint(2 * ranks[:n_a]).sum())
    p = 2.0 * min(dist[: w + 1].sum(), dist[w:].sum())
    return float(min(1.0, p))


def min_two_sided_p_given(a: Sequence[float], b: Sequence[float]) -> float:
    """The smallest two-sided p-value mann_whitney() could give for any split
    of these values into samples of these sizes: min_two_sided_p() without
    ties, larger with them (1 when every value is equal). It depends on the
    pooled values only, not on which sample holds which, so leaving out the
    comparisons that cannot reach a level does not bias those that can."""
    from scipy.stats import rankdata

    x, y = _ordered_array(a), _ordered_array(b)
    both = np.concatenate([x, y])
    if np.unique(both).size == both.size or both.size > EXACT_LIMIT or not np.all(np.isfinite(both)):
        return 1.0 if np.unique(both).size == 1 else min_two_sided_p(x.size, y.size)
    dist = _rank_sum_distribution(rankdata(both), x.size)
    nonzero = np.nonzero(dist)[0]
    return float(min(1.0, 2.0 * min(dist[nonzero[0]], dist[nonzero[-1]])))


def mann_whitney(a: Sequence[float], b: Sequence[float]) -> RankTest:
    """Two-sided Mann-Whitney U test. Exact for small samples: scipy's exact
    distribution without ties; with ties (which that distribution ignores)
    the exact permutation distribution of the midrank sum. Beyond
    EXACT_LIMIT values, the tie-corrected normal approximation."""
    from scipy.stats import mannwhitneyu, rankdata

    x, y = _ordered_array(a), _ordered_array(b)
    n_a, n_b = int(x.size), int(y.size)
    both = np.concatenate([x, y])
    ties = bool(np.unique(both).size < both.size)
    ranks = rankdata(both)
    u = float(ranks[:n_a].sum() - n_a * (n_a + 1) / 2.0)
    if n_a + n_b > EXACT_LIMIT or not np.all(np.isfinite(both)):
        method, p = (
            "normal approximation",
            float(mannwhitneyu(x, y, alternative="two-sided", method="asymptotic").pvalue),
        )
    elif ties:
        method, p = "exact with ties", _exact_p_with_ties(ranks, n_a)
    else:
        method, p = "exact", float(mannwhitneyu(x, y, alternative="two-sided", method="exact").pvalue)
    if math.isnan(p):  # every value equal: nothing tells the samples apart
        p = 1.0
    return RankTest(p=float(min(1.0, p)), u=u, method=method, n_a=n_a, n_b=n_b, ties=ties)


def adjust_fdr(pvalues: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values (q-values), in the given order:
    flagging every q below alpha keeps the expected share of false findings
    among those flagged below alpha, and when nothing differs at all, the
    chance of flagging anything below alpha."""
    p = np.asarray(pvalues, dtype=float)
    m = p.size
    if m == 0:
        return []
    order = np.argsort(p)
    scaled = p[order] * m / np.arange(1, m + 1)
    q_sorted = np.minimum.accumulate(scaled[::-1])[::-1]
    q = np.empty(m)
    q[order] = np.minimum(q_sorted, 1.0)
    return [float(v) for v in q]


BOOTSTRAP_MIN_N = 5


def bootstrap_ratio_ci(
    a: Sequence[float], b: Sequence[float], confidence: float = 0.95, resamples: int = 4000, seed: int = 0
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of median(b) / median(a), resampling each
    sample's repetitions (fixed seed: the same data give the same interval).
    None when a sample has fewer than BOOTSTRAP_MIN_N values (the resampled
    median takes too few distinct values to mean anything) or a resampled
    median of `a` is 0."""
    _check_confidence(confidence)
    x, y = _ordered_array(a), _ordered_array(b)
    if min(x.size, y.size) < BOOTSTRAP_MIN_N or not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        return None
    rng = np.random.default_rng(seed)
    med_x = np.median(x[rng.integers(0, x.size, (resamples, x.size))], axis=1)
    med_y = np.median(y[rng.integers(0, y.size, (resamples, y.size))], axis=1)
    if np.any(med_x == 0):
        return None
    ratios = med_y / med_x
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(ratios, [tail, 100.0 - tail])
    return float(low), float(high)
