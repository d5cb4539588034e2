"""The engine's histogram (C) decoded by oslens (Python) against exact
statistics of the raw values."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from oslens.analysis.histogram import Histogram, merge_all

from conftest import engine_bin

QS = [0, 1, 10, 50, 90, 99, 99.9, 99.99, 100]
RELATIVE_ERROR = 0.01  # what the histogram promises


def engine_hist(values) -> Histogram:
    text = "\n".join(str(int(v)) for v in values) + "\n"
    p = subprocess.run([engine_bin(), "histtest"], input=text, capture_output=True, text=True, check=True)
    import json

    return Histogram.from_record(json.loads(p.stdout)["hist"])


def samples() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    return {
        "lognormal-syscall": rng.lognormal(np.log(150), 0.3, 20000),
        "bimodal-with-tail": np.concatenate([rng.normal(400, 20, 15000), rng.exponential(5e4, 300) + 1e4]),
        "wide-1ns-to-20s": np.exp(rng.uniform(0, np.log(2e10), 20000)),
        "small-exact": rng.integers(0, 300, 5000),
    }


@pytest.mark.parametrize("name", list(samples()))
def test_percentiles_within_stated_error(name):
    raw = np.floor(samples()[name]).clip(0).astype(np.int64)
    h = engine_hist(raw)
    assert h.count == raw.size and h.sum == int(raw.sum())
    assert h.min == raw.min() and h.max == raw.max()
    exact = np.percentile(raw, QS, method="inverted_cdf")
    got = h.percentiles(QS)
    assert np.all(np.diff(got) >= 0), "percentiles must be monotone"
    np.testing.assert_allclose(got, exact, rtol=RELATIVE_ERROR, atol=1)
    assert h.mean_ns == pytest.approx(raw.mean(), rel=1e-12)
    assert h.std_ns == pytest.approx(raw.std(ddof=1), rel=RELATIVE_ERROR, abs=1)


def test_merged_histograms_equal_the_histogram_of_all_values():
    raw = np.floor(samples()["bimodal-with-tail"]).astype(np.int64)
    parts = np.array_split(raw, 3)
    merged = merge_all(engine_hist(p) for p in parts)
    whole = engine_hist(raw)
    assert merged.to_record() == whole.to_record()


def test_extremes_of_the_range():
    raw = np.array([0, 1, 255, 256, 10**10, 2**63 - 1], dtype=np.uint64)
    h = engine_hist(raw)
    assert h.count == 6 and h.min == 0 and h.max == 2**63 - 1
    assert h.percentile(100) == pytest.approx(2**63 - 1, rel=RELATIVE_ERROR)


def test_units_must_agree_to_merge():
    a = Histogram.from_record(
        {"unit_ns": 0.4, "sub_bucket_bits": 7, "count": 1, "sum": 5, "min": 5, "max": 5, "buckets": [[5, 1]]}
    )
    b = Histogram.from_record({**a.to_record(), "unit_ns": 1.0})
    with pytest.raises(ValueError):
        a.merge(b)


def test_subtracting_a_subset_gives_the_rest_exactly_per_bucket():
    rng = np.random.default_rng(7)
    minor = rng.integers(200, 5000, 3000)
    major = rng.integers(50_000, 2_000_000, 40)
    everything = engine_hist(np.concatenate([minor, major]))
    rest = everything.subtract(engine_hist(major))
    alone = engine_hist(minor)
    assert rest.count == alone.count and rest.sum == alone.sum
    assert rest.index.tolist() == alone.index.tolist() and rest.counts.tolist() == alone.counts.tolist()
    # min and max are known only to their bucket: never outside the true ones' buckets
    lower, width = alone.bounds()
    assert lower[0] <= rest.min <= alone.min and alone.max <= rest.max <= lower[-1] + width[-1] - 1
    with pytest.raises(ValueError):
        engine_hist(major).subtract(everything)
