import json
import math

import numpy as np
import pytest

from oslens.analysis.scaling import (
    AMDAHL_MIN_POINTS,
    USL_MIN_POINTS,
    AmdahlFit,
    UslFit,
    amdahl,
    amdahl_unfit_reason,
    fit_amdahl,
    fit_usl,
    usl,
    usl_unfit_reason,
)

LAM, SIGMA, KAPPA = 1000.0, 0.05, 0.001
N = np.arange(1, 65)


def test_usl_formula():
    assert usl(1, LAM, SIGMA, KAPPA) == pytest.approx(LAM)
    assert usl(10, LAM, SIGMA, KAPPA) == pytest.approx(LAM * 10 / (1 + 0.05 * 9 + 0.001 * 90))


def test_usl_recovers_parameters_from_noise_free_data():
    fit = fit_usl(N, usl(N, LAM, SIGMA, KAPPA))
    assert isinstance(fit, UslFit)
    assert fit.lam == pytest.approx(LAM, rel=1e-6)
    assert fit.sigma == pytest.approx(SIGMA, rel=1e-6)
    assert fit.kappa == pytest.approx(KAPPA, rel=1e-6)
    assert fit.r2 == pytest.approx(1.0)
    assert fit.n_points == N.size
    for se in (fit.lam_se, fit.sigma_se, fit.kappa_se):
        assert se is not None and se < 1e-6


def test_usl_peak_matches_formula():
    fit = fit_usl(N, usl(N, LAM, SIGMA, KAPPA))
    expected = math.sqrt((1 - SIGMA) / KAPPA)
    assert fit.peak_n == pytest.approx(expected, rel=1e-6)
    assert fit.peak_x == pytest.approx(usl(expected, LAM, SIGMA, KAPPA), rel=1e-6)
    # It is a maximum: the curve is lower on either side of it.
    assert fit.predict(expected - 1) < fit.peak_x > fit.predict(expected + 1)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_usl_recovers_parameters_from_noisy_data(seed):
    rng = np.random.default_rng(seed)
    x = usl(N, LAM, SIGMA, KAPPA) * (1 + 0.01 * rng.standard_normal(N.size))
    fit = fit_usl(N, x)
    assert fit.lam == pytest.approx(LAM, rel=0.03)
    assert fit.sigma == pytest.approx(SIGMA, rel=0.15)
    assert fit.kappa == pytest.approx(KAPPA, rel=0.10)
    # The standard errors are honest: the truth is within 4 of them.
    assert abs(fit.lam - LAM) < 4 * fit.lam_se
    assert abs(fit.sigma - SIGMA) < 4 * fit.sigma_se
    assert abs(fit.kappa - KAPPA) < 4 * fit.kappa_se
    assert 0.99 < fit.r2 < 1.0


def test_usl_with_repetitions_at_each_count():
    rng = np.random.default_rng(7)
    counts = np.repeat([1, 2, 4, 8, 16, 32, 64], 5)
    x = usl(counts, LAM, SIGMA, KAPPA) * (1 + 0.01 * rng.standard_normal(counts.size))
    fit = fit_usl(counts, x)
    assert fit.n_points == counts.size
    assert fit.kappa == pytest.approx(KAPPA, rel=0.15)


def test_usl_linear_scaling_has_no_meaningful_contention():
    fit = fit_usl([1, 2, 4, 8], [10.0, 20.0, 40.0, 80.0])
    assert fit.lam == pytest.approx(10.0, rel=1e-6)
    assert fit.sigma < 1e-6 and fit.kappa < 1e-6


def test_usl_needs_four_distinct_counts():
    assert USL_MIN_POINTS == 4
    counts = [1, 2, 4, 1, 2, 4]
    assert fit_usl(counts, [1, 2, 3, 1, 2, 3]) is None
    reason = usl_unfit_reason(counts)
    assert reason is not None and "3 distinct" in reason and "at least 4" in reason
    assert usl_unfit_reason([1, 2, 4, 8]) is None
    assert fit_usl([1, 2, 4, 8], usl([1, 2, 4, 8], LAM, SIGMA, KAPPA)) is not None


def test_fits_give_none_when_the_optimiser_gives_up(monkeypatch):
    import scipy.optimize

    def no_convergence(*args, **kwargs):
        raise RuntimeError("Optimal parameters not found: max_nfev exceeded")

    monkeypatch.setattr(scipy.optimize, "curve_fit", no_convergence)
    counts = [1, 2, 4, 8]
    assert usl_unfit_reason(counts) is None and fit_usl(counts, [1, 2, 3, 4]) is None
    assert amdahl_unfit_reason(counts) is None and fit_amdahl(counts, [1, 2, 3, 4]) is None


def test_usl_rejects_malformed_input():
    with pytest.raises(ValueError):
        fit_usl([1, 2, 3, 4], [1, 2, 3])
    with pytest.raises(ValueError):
        fit_usl([0, 1, 2, 3], [1, 2, 3, 4])
    with pytest.raises(ValueError):
        fit_usl([1, 2, 3, 4], [1, 2, float("nan"), 4])


def test_usl_to_dict_is_json():
    fit = fit_usl(N, usl(N, LAM, SIGMA, KAPPA))
    d = json.loads(json.dumps(fit.to_dict(), allow_nan=False))
    assert d["model"] == "usl"
    assert d["lambda"] == pytest.approx(LAM) and d["peak_n"] == pytest.approx(fit.peak_n)
    assert set(d) >= {"sigma", "kappa", "lambda_se", "sigma_se", "kappa_se", "r2", "n_points", "peak_x"}


def test_usl_without_coherency_has_no_peak():
    fit = UslFit(lam=1.0, sigma=0.1, kappa=0.0, lam_se=None, sigma_se=None, kappa_se=None, r2=None, n_points=4)
    assert fit.peak_n is None and fit.peak_x is None
    assert json.loads(json.dumps(fit.to_dict()))["peak_n"] is None


def test_amdahl_recovers_serial_fraction():
    fit = fit_amdahl(N, amdahl(N, 0.1))
    assert isinstance(fit, AmdahlFit)
    assert fit.f == pytest.approx(0.1, rel=1e-6)
    assert fit.max_speedup == pytest.approx(10.0, rel=1e-6)
    assert fit.r2 == pytest.approx(1.0)

    rng = np.random.default_rng(11)
    noisy = amdahl(N, 0.1) * (1 + 0.01 * rng.standard_normal(N.size))
    fit = fit_amdahl(N, noisy)
    assert fit.f == pytest.approx(0.1, rel=0.05)
    assert fit.f_se is not None and abs(fit.f - 0.1) < 4 * fit.f_se
    assert json.loads(json.dumps(fit.to_dict()))["serial_fraction"] == pytest.approx(fit.f)


def test_amdahl_stays_in_bounds():
    # Better than linear (cache effects) would need f < 0: the fit stops at 0.
    fit = fit_amdahl([1, 2, 4, 8], [1.0, 2.2, 4.5, 9.5])
    assert fit.f == pytest.approx(0.0, abs=1e-6)
    assert fit.max_speedup is None or fit.max_speedup > 1e5
    # No speedup at all: everything is serial.
    fit = fit_amdahl([1, 2, 4, 8], [1.0, 1.0, 1.0, 1.0])
    assert fit.f == pytest.approx(1.0, abs=1e-6)


def test_amdahl_needs_three_distinct_counts():
    assert AMDAHL_MIN_POINTS == 3
    assert fit_amdahl([1, 2, 1, 2], [1, 1.8, 1, 1.8]) is None
    assert "at least 3" in amdahl_unfit_reason([1, 2])
    assert amdahl_unfit_reason([1, 2, 4]) is None
