import dataclasses
import math

import numpy as np
import pytest
from scipy.stats import beta, binom

from oslens.analysis.stats import (
    SPREAD_LIMIT,
    Interval,
    _coverages,
    median_ci,
    proportion_interval,
    relative_spread,
    repetitions_needed,
    trust_warnings,
)


def test_three_values_give_min_max_with_75_percent():
    iv = median_ci([3.0, 1.0, 2.0])
    assert (iv.median, iv.low, iv.high, iv.n) == (2.0, 1.0, 3.0, 3)
    assert iv.coverage == pytest.approx(0.75)  # 1 - 2 * (1/2)**3


def test_six_values_reach_95_only_with_min_max():
    iv = median_ci([6, 2, 5, 1, 4, 3])
    assert (iv.low, iv.high, iv.median) == (1.0, 6.0, 3.5)
    assert iv.coverage == pytest.approx(0.96875)  # 1 - 2/64


def test_narrower_pair_chosen_when_it_still_reaches_confidence():
    # n = 10: (x2, x9) covers with 1 - 2 * P(B <= 1) = 1 - 2 * 11/1024 = 0.978515625;
    # (x3, x8) covers with 1 - 2 * 56/1024 = 0.890625 < 0.95.
    iv = median_ci(list(range(1, 11)))
    assert (iv.low, iv.high) == (2.0, 9.0)
    assert iv.coverage == pytest.approx(1 - 22 / 1024)
    iv80 = median_ci(list(range(1, 11)), confidence=0.80)
    assert (iv80.low, iv80.high) == (3.0, 8.0)
    assert iv80.coverage == pytest.approx(1 - 112 / 1024)


@pytest.mark.parametrize("n", [1, 2, 3, 7, 64, 255, 1000, 2560, 20000])
def test_coverages_are_the_binomials_to_the_last_digits(n):
    """The running-sum binomial that spares `show` the import of scipy.stats,
    against scipy.stats itself, as far out as 256 workers times 10 reps and beyond."""
    k = np.arange(1, (n + 1) // 2 + 1)
    assert _coverages(n) == pytest.approx(1.0 - 2.0 * binom.cdf(k - 1, n, 0.5), rel=0, abs=1e-10)


@pytest.mark.parametrize("k,n", [(0, 1), (1, 1), (0, 30), (3, 30), (30, 30), (17, 1000), (999, 1000)])
def test_proportion_interval_is_clopper_pearson(k, n):
    low, high = proportion_interval(k, n, 0.95)
    assert low == (0.0 if k == 0 else pytest.approx(beta.ppf(0.025, k, n - k + 1), rel=1e-12))
    assert high == (1.0 if k == n else pytest.approx(beta.ppf(0.975, k + 1, n - k), rel=1e-12))
    assert low <= k / n <= high


@pytest.mark.parametrize("k,n", [(-1, 3), (4, 3), (0, 0)])
def test_proportion_interval_refuses_impossible_counts(k, n):
    with pytest.raises(ValueError):
        proportion_interval(k, n)


def test_one_value():
    iv = median_ci([7.5])
    assert iv == Interval(median=7.5, low=7.5, high=7.5, n=1, coverage=0.0)


def test_two_values_cover_half():
    iv = median_ci([2.0, 4.0])
    assert (iv.median, iv.low, iv.high) == (3.0, 2.0, 4.0)
    assert iv.coverage == pytest.approx(0.5)


def test_bad_input():
    with pytest.raises(ValueError):
        median_ci([])
    with pytest.raises(ValueError):
        median_ci([1.0, float("nan")])
    with pytest.raises(ValueError):
        median_ci([1.0, 2.0], confidence=1.0)


def test_infinities_take_their_place_in_the_order():
    iv = median_ci([1.0, 2.0, float("inf")])
    assert (iv.median, iv.low, iv.high) == (2.0, 1.0, float("inf"))
    assert math.isinf(relative_spread([1.0, 2.0, float("inf")]))
    assert "unbounded" in trust_warnings([1.0, 2.0, float("inf")])[-1]


def test_interval_is_frozen_and_serialisable():
    iv = median_ci([1, 2, 3, 4, 5, 6, 7])
    with pytest.raises(dataclasses.FrozenInstanceError):
        iv.median = 0  # type: ignore[misc]
    assert iv.to_dict() == {"median": 4.0, "low": iv.low, "high": iv.high, "n": 7, "coverage": iv.coverage}


@pytest.mark.parametrize("n", [1, 2, 5, 6, 7, 20, 51, 200])
def test_interval_contains_median_and_reaches_confidence_when_possible(n):
    rng = np.random.default_rng(n)
    values = rng.lognormal(size=n)
    iv = median_ci(values)
    assert iv.low <= iv.median <= iv.high
    assert iv.low in values and iv.high in values
    if n >= repetitions_needed(0.95):
        assert iv.coverage >= 0.95
    else:
        assert (iv.low, iv.high) == (values.min(), values.max())
        assert iv.coverage == pytest.approx(1 - 2 * 0.5**n)


def test_repetitions_needed_matches_coverage():
    for conf in (0.5, 0.75, 0.9, 0.95, 0.99):
        n = repetitions_needed(conf)
        assert 1 - 2 * 0.5**n >= conf
        assert n == 1 or 1 - 2 * 0.5 ** (n - 1) < conf
    assert repetitions_needed(0.95) == 6


def test_empirical_coverage_on_skewed_data():
    # Exponential(1): skewed like latencies; its true median is ln 2.
    rng = np.random.default_rng(12345)
    true_median = math.log(2)
    for n in (6, 15, 40):
        trials = 4000
        hits = 0
        nominal = median_ci(rng.exponential(size=n)).coverage
        for _ in range(trials):
            iv = median_ci(rng.exponential(size=n))
            hits += iv.low <= true_median <= iv.high
        rate = hits / trials
        assert rate >= 0.93, (n, rate)
        # The stated coverage is exact for continuous data, not just a bound.
        assert abs(rate - nominal) < 0.02, (n, rate, nominal)


def test_relative_spread():
    assert relative_spread([10, 11, 12]) == pytest.approx(2 / 11)
    assert relative_spread([5, 5, 5]) == 0.0
    assert relative_spread([0, 0]) == 0.0
    assert math.isinf(relative_spread([-1, 0, 1]))
    assert relative_spread([-12, -10, -11]) == pytest.approx(2 / 11)


def test_trust_warnings_few_repetitions():
    w = trust_warnings([100.0, 101.0, 102.0])
    assert len(w) == 1
    assert w[0].startswith("only 3 repetitions: the interval covers the median with 75% confidence, not 95%")


def test_trust_warnings_wide_spread():
    values = [100, 123, 110, 105, 108, 104, 101]
    w = trust_warnings(values)
    assert w == [f"spread {round(relative_spread(values) * 100)}% across repetitions exceeds 10%"]
    assert relative_spread(values) > SPREAD_LIMIT


def test_trust_warnings_single_value_and_clean_sample():
    assert trust_warnings([5.0])[0].startswith("only 1 repetition")
    assert trust_warnings([100, 101, 102, 103, 104, 105]) == []


def test_trust_warnings_percent_never_reads_as_equal():
    # Five values cover with 0.9375; asked for 0.9376 the message must not
    # read "94% confidence, not 94%".
    w = trust_warnings([1.0, 1.01, 1.02, 1.03, 1.04], confidence=0.9376)
    assert len(w) == 1 and "93.75% confidence, not 93.76%" in w[0]
