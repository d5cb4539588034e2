"""The one line that states a USL fit, for `scale` and `appscale`, in the
terminal and in the HTML report alike: contention and coherency with their
standard errors, R², and where the fitted curve peaks — called an
extrapolation only when that peak lies outside the counts measured."""

from __future__ import annotations

from typing import Sequence

from ..analysis.scaling import peak_is_extrapolated
from ..format import sig


def _estimate(x: float, se: float | None) -> str:
    return f"{sig(x)} ± {sig(se, 2)}" if se is not None else f"{sig(x)} (standard error not estimable)"


def _counts(measured: Sequence[float], unit: str) -> str:
    lo, hi = min(measured), max(measured)
    return f"{sig(lo, 6)}–{sig(hi, 6)} {unit}" if lo != hi else f"{sig(lo, 6)} {unit}"


def usl_line(fit: dict | None, measured: Sequence[float], unit: str, peak: str = "", why: str | None = None) -> str:
    """`fit` is UslFit.to_dict() (an `appscale` summary's, with "fitted",
    will do), or None with `why` it was not fitted. `measured`: the worker
    (or CPU) counts measured, in `unit`; `peak`: what the curve reaches at
    its peak, already formatted ("4.5M ops/s total", "speedup 3.2×")."""
    if not fit or not fit.get("fitted", True):
        reason = why or (fit or {}).get("why") or "no data"
        return f"USL: not fitted, {reason}"
    parts = [
        f"contention σ = {_estimate(fit['sigma'], fit.get('sigma_se'))}",
        f"coherency κ = {_estimate(fit['kappa'], fit.get('kappa_se'))}",
    ]
    if fit.get("r2") is not None:
        parts.append(f"R² = {fit['r2']:.3f}")
    line = "USL: " + ", ".join(parts)
    peak_n = fit.get("peak_n")
    if peak_n is None:
        return line + "; no peak (κ = 0: the fitted curve only levels off)"
    at = f" at {peak}" if peak else ""
    if peak_is_extrapolated(peak_n, measured):
        where = f"extrapolated: outside the {_counts(measured, unit)} measured"
    else:
        where = f"within the {_counts(measured, unit)} measured"
    return f"{line}; the fitted curve peaks{at} near {peak_n:.0f} {unit} ({where})"
