"""Number formatting: the bottom of the package, shared by analysis, the
terminal, the HTML report and compare, so that a figure reads the same
everywhere. It imports nothing of oslens."""

from __future__ import annotations

import math

_PREFIXES = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def si(x: float | None, digits: int = 3) -> str:
    """4351234.0 -> '4.35M': rates span nine orders of magnitude across probes."""
    if x is None or not math.isfinite(x):
        return "–"
    for scale, prefix in _PREFIXES:
        if abs(x) >= scale:
            return f"{x / scale:.{digits}g}{prefix}"
    return f"{x:.{digits}g}"


def seconds(x: float | None) -> str:
    if x is None or not math.isfinite(x):
        return "–"
    for scale, unit in ((1, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if abs(x) >= scale:
            return f"{x / scale:.3g} {unit}"
    return f"{x * 1e9:.3g} ns"


def pct(x: float | None) -> str:
    return "–" if x is None or not math.isfinite(x) else f"{x:.0%}"


def ns(x: float) -> str:
    """A duration in nanoseconds, in the unit that gives three digits."""
    if x != x:  # NaN
        return "–"
    for scale, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")):
        if x >= scale:
            return f"{x / scale:.3g} {unit}"
    return f"{x:.3g} ns"
