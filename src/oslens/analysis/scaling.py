"""Scalability models fitted to throughput (or speedup) against worker count.

Universal Scalability Law (Gunther):
    X(N) = lambda * N / (1 + sigma * (N - 1) + kappa * N * (N - 1))
lambda is the throughput of one worker, sigma the contention (serialised)
share, kappa the coherency (crosstalk) cost that makes throughput fall past
a peak at N* = sqrt((1 - sigma) / kappa).

Amdahl's law:
    S(N) = 1 / (f + (1 - f) / N)
with f the serial fraction; it is USL with kappa = 0 and cannot show a peak.

Fits return None when they cannot be made: `usl_unfit_reason` /
`amdahl_unfit_reason` say why in words when there are too few distinct worker
counts; if they have no reason, the optimiser did not converge.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..format import sig

USL_MIN_POINTS = 4
AMDAHL_MIN_POINTS = 3


def usl(n, lam, sigma, kappa):
    n = np.asarray(n, dtype=float)
    return lam * n / (1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0))


def amdahl(n, f):
    n = np.asarray(n, dtype=float)
    return 1.0 / (f + (1.0 - f) / n)


def _arrays(n: Sequence[float], y: Sequence[float], what: str) -> tuple[np.ndarray, np.ndarray]:
    n = np.asarray(n, dtype=float).ravel()
    y = np.asarray(y, dtype=float).ravel()
    if n.shape != y.shape:
        raise ValueError(f"{n.size} worker counts but {y.size} {what} values")
    if not (np.all(np.isfinite(n)) and np.all(np.isfinite(y))):
        raise ValueError(f"worker counts and {what} must be finite")
    if np.any(n < 1):
        raise ValueError("worker counts must be >= 1")
    if np.any(y < 0):
        raise ValueError(f"{what} must be >= 0")
    return n, y


def _unfit_reason(n: Sequence[float], need: int, model: str) -> str | None:
    distinct = np.unique(np.asarray(n, dtype=float))
    if distinct.size >= need:
        return None
    shown = ", ".join(sig(v, 6) for v in distinct) or "none"
    return (
        f"only {distinct.size} distinct worker count{'s' if distinct.size != 1 else ''} "
        f"({shown}); {'an' if model == 'Amdahl' else 'a'} {model} fit needs at least {need}"
    )


def usl_unfit_reason(n: Sequence[float]) -> str | None:
    """Why a USL fit cannot be made for these worker counts, or None if it can."""
    return _unfit_reason(n, USL_MIN_POINTS, "USL")


def amdahl_unfit_reason(n: Sequence[float]) -> str | None:
    """Why an Amdahl fit cannot be made for these worker counts, or None if it can."""
    return _unfit_reason(n, AMDAHL_MIN_POINTS, "Amdahl")


def _r2(y: np.ndarray, fitted: np.ndarray) -> float | None:
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    if ss_tot == 0.0:
        return None  # all observations equal: no variance to explain
    return 1.0 - float(np.sum((y - fitted) ** 2)) / ss_tot


def _standard_errors(pcov: np.ndarray) -> list[float | None]:
    out: list[float | None] = []
    for v in np.diag(np.atleast_2d(pcov)):
        out.append(float(math.sqrt(v)) if np.isfinite(v) and v >= 0 else None)
    return out


def _curve_fit(f, n, y, p0, bounds):
    """(popt, pcov), or None if the optimiser gives up."""
    # With exactly as many points as parameters, or a parameter pinned at a
    # bound, the covariance is not estimable; that is reported as a None
    # standard error, not as a warning on stderr.
    # Imported where a curve is fitted: scipy.optimize costs half a second,
    # which a `show` of a run with too few points to fit need not pay.
    from scipy.optimize import OptimizeWarning, curve_fit

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OptimizeWarning)
        try:
            # Tight tolerances are cheap at this size and let a parameter that
            # belongs at its bound (kappa = 0 for linear scaling) get close to it.
            return curve_fit(
                f,
                n,
                y,
                p0=p0,
                bounds=bounds,
                method="trf",
                x_scale="jac",
                ftol=1e-12,
                xtol=1e-12,
                gtol=1e-12,
                max_nfev=10000,
            )
        except RuntimeError:
            return None


def _num(x: float | None) -> float | None:
    return None if x is None else float(x)


@dataclass(frozen=True)
class UslFit:
    lam: float
    sigma: float
    kappa: float
    lam_se: float | None
    sigma_se: float | None
    kappa_se: float | None
    r2: float | None
    n_points: int

    @property
    def peak_n(self) -> float | None:
        """Worker count of maximum throughput; None when kappa = 0 (no retrograde
        region). Never below 1: with sigma >= 1 throughput only falls."""
        if self.kappa <= 0.0:
            return None
        return max(math.sqrt(max(1.0 - self.sigma, 0.0) / self.kappa), 1.0)

    @property
    def peak_x(self) -> float | None:
        peak = self.peak_n
        return None if peak is None else float(self.predict(peak))

    def predict(self, n):
        out = usl(n, self.lam, self.sigma, self.kappa)
        return float(out) if np.ndim(out) == 0 else out

    def peak_is_extrapolated(self, measured: Sequence[float]) -> bool:
        return peak_is_extrapolated(self.peak_n, measured)

    def to_dict(self) -> dict:
        return {
            "model": "usl",
            "lambda": self.lam,
            "sigma": self.sigma,
            "kappa": self.kappa,
            "lambda_se": self.lam_se,
            "sigma_se": self.sigma_se,
            "kappa_se": self.kappa_se,
            "r2": self.r2,
            "n_points": self.n_points,
            "peak_n": _num(self.peak_n),
            "peak_x": _num(self.peak_x),
        }


def peak_is_extrapolated(peak_n: float | None, measured: Sequence[float]) -> bool:
    """Whether a USL peak at `peak_n` lies outside the worker counts measured
    (only a peak between the smallest and the largest was seen, not predicted).
    False when there is no peak."""
    if peak_n is None or len(measured) == 0:
        return False
    return not (min(measured) <= peak_n <= max(measured))


def fit_usl(n: Sequence[float], x: Sequence[float]) -> UslFit | None:
    """Least-squares USL fit of throughput `x` at worker counts `n` (repeated
    counts allowed: every repetition is a point). None when usl_unfit_reason(n)
    has a reason or the optimiser does not converge."""
    n_arr, x_arr = _arrays(n, x, "throughput")
    if usl_unfit_reason(n_arr) is not None:
        return None
    smallest = n_arr.min()
    lam0 = float(np.mean(x_arr[n_arr == smallest]) / smallest)
    if lam0 <= 0.0:
        raise ValueError("throughput at the smallest worker count is 0: nothing to scale")
    # The starting sigma/kappa must lie strictly inside the bounds for trf.
    fitted = _curve_fit(usl, n_arr, x_arr, p0=[lam0, 0.01, 1e-4], bounds=([0.0, 0.0, 0.0], [np.inf, np.inf, np.inf]))
    if fitted is None:
        return None
    popt, pcov = fitted
    lam, sigma, kappa = (float(v) for v in popt)
    lam_se, sigma_se, kappa_se = _standard_errors(pcov)
    return UslFit(
        lam=lam,
        sigma=sigma,
        kappa=kappa,
        lam_se=lam_se,
        sigma_se=sigma_se,
        kappa_se=kappa_se,
        r2=_r2(x_arr, usl(n_arr, *popt)),
        n_points=int(n_arr.size),
    )


@dataclass(frozen=True)
class AmdahlFit:
    f: float
    f_se: float | None
    r2: float | None
    n_points: int

    @property
    def max_speedup(self) -> float | None:
        """The speedup approached with unlimited workers, 1/f; None when f = 0."""
        return None if self.f <= 0.0 else 1.0 / self.f

    def predict(self, n):
        out = amdahl(n, self.f)
        return float(out) if np.ndim(out) == 0 else out

    def to_dict(self) -> dict:
        return {
            "model": "amdahl",
            "serial_fraction": self.f,
            "serial_fraction_se": self.f_se,
            "r2": self.r2,
            "n_points": self.n_points,
            "max_speedup": _num(self.max_speedup),
        }


def fit_amdahl(n: Sequence[float], speedup: Sequence[float]) -> AmdahlFit | None:
    """Least-squares fit of the serial fraction f in [0, 1] to `speedup` at
    worker counts `n`. None when amdahl_unfit_reason(n) has a reason or the
    optimiser does not converge."""
    n_arr, s_arr = _arrays(n, speedup, "speedup")
    if amdahl_unfit_reason(n_arr) is not None:
        return None
    # Each point with N > 1 implies f = (N/S - 1) / (N - 1); their median starts
    # the search, kept off the bounds as trf requires.
    multi = (n_arr > 1) & (s_arr > 0)
    guesses = (n_arr[multi] / s_arr[multi] - 1.0) / (n_arr[multi] - 1.0)
    f0 = float(np.clip(np.median(guesses), 1e-6, 1.0 - 1e-6)) if guesses.size else 0.5
    fitted = _curve_fit(amdahl, n_arr, s_arr, p0=[f0], bounds=([0.0], [1.0]))
    if fitted is None:
        return None
    popt, pcov = fitted
    (f_se,) = _standard_errors(pcov)
    return AmdahlFit(f=float(popt[0]), f_se=f_se, r2=_r2(s_arr, amdahl(n_arr, *popt)), n_points=int(n_arr.size))
