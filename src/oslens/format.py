"""Number formatting: the bottom of the package, shared by analysis, the
terminal, the HTML report and compare, so that a figure reads the same
everywhere and as a person reads it — never in exponent form, never as a
Python literal (`True`, `nan`), counts with thousands separators, units
chosen after rounding (999.7 ms is `1 s`, not `1e+03 ms`), and `–` where
there is no figure. It imports nothing of oslens."""

from __future__ import annotations

import math

MISSING = "–"

_PREFIXES = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))
_TIME_UNITS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))
_BYTE_UNITS = ((1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"))


def json_safe(x):
    """The document with non-finite floats as None and numpy scalars as
    plain Python: it passes json.dumps(allow_nan=False), strict JSON."""
    if isinstance(x, dict):
        return {str(k): json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    if hasattr(x, "dtype") and hasattr(x, "item"):  # a numpy scalar
        x = x.item()
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    return x


def _finite(x) -> bool:
    return x is not None and not isinstance(x, bool) and math.isfinite(x)


def _round_sig(x: float, digits: int) -> float:
    if x == 0:
        return 0.0
    return round(x, digits - 1 - math.floor(math.log10(abs(x))))


def sig(x: float | None, digits: int = 3, keep_zeros: bool = False) -> str:
    """`digits` significant digits, in positional notation: 0.000123, 1230,
    1,230,000 (a figure this large or small usually wants a unit: si);
    trailing zeros dropped (1.5, not 1.50) unless keep_zeros."""
    if not _finite(x):
        return MISSING
    r = _round_sig(float(x), digits)
    if r == 0:
        return "0"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(r))))
    text = f"{r:,.{decimals}f}"
    if "." in text and not keep_zeros:
        text = text.rstrip("0").rstrip(".")
    return text


def _scaled(x: float, units, digits: int, sep: str) -> str:
    """x in the largest unit that leaves it ≥ 1 once rounded to `digits`."""
    for scale, unit in units:
        v = _round_sig(x / scale, digits)
        if abs(v) >= 1:
            return f"{sig(v, digits)}{sep}{unit}".rstrip()
    scale, unit = units[-1]
    return f"{sig(x / scale, digits)}{sep}{unit}".rstrip()


def si(x: float | None, digits: int = 3) -> str:
    """4351234.0 -> '4.35M': rates span nine orders of magnitude across probes."""
    if not _finite(x):
        return MISSING
    if abs(x) < 1:
        return sig(x, digits)
    return _scaled(float(x), _PREFIXES, digits, "")


def seconds(x: float | None, digits: int = 3) -> str:
    """A duration in seconds, in the unit that gives `digits` digits."""
    if not _finite(x):
        return MISSING
    if x == 0:
        return "0 s"
    return _scaled(float(x), _TIME_UNITS, digits, " ")


def ns(x: float | None, digits: int = 3) -> str:
    """A duration in nanoseconds, in the unit that gives `digits` digits."""
    if not _finite(x):
        return MISSING
    return "0 ns" if x == 0 else seconds(x / 1e9, digits)


def pct(x: float | None, decimals: int = 0) -> str:
    """A fraction as a percentage: 0.973 -> '97%'."""
    return MISSING if not _finite(x) else f"{x:.{decimals}%}"


def share(x: float | None, digits: int = 3) -> str:
    """A fraction as a percentage to significant digits: 0.00312 -> '0.312%',
    0.973 -> '97.3%' (a share of 0.3% is a finding, not 0%)."""
    return MISSING if not _finite(x) else f"{sig(x * 100, digits)}%"


def signed_pct(x: float | None, decimals: int = 1) -> str:
    """A relative change: '+1.2%', '−0.4%'; an infinite one as ±∞."""
    if x is None or x != x:
        return MISSING
    if math.isinf(x):
        return "+∞" if x > 0 else "−∞"
    return f"{x * 100:+.{decimals}f}%"


def rate(x: float | None, digits: int = 3) -> str:
    """Events per second: '1.23 k/s'."""
    return MISSING if not _finite(x) else f"{si(x, digits)}/s"


def chance(x: float | None) -> str:
    """A probability, with digits where it is near 0 or 1: '0.4%', '37%',
    '<0.1%', '>99.9%'."""
    if not _finite(x):
        return MISSING
    if x == 0 or x == 1:
        return f"{x:.0%}"
    if x < 0.001:
        return "<0.1%"
    if x > 0.999:
        return ">99.9%"
    return f"{x:.1%}" if x < 0.1 or x > 0.9 else f"{x:.0%}"


def duration(x: float | None) -> str:
    """A long span of time in the unit people plan in: '40 s', '3.5 min',
    '2.1 h', '12 days' (two digits: it is an estimate)."""
    if not _finite(x):
        return MISSING
    for scale, unit in ((86400, "days"), (3600, "h"), (60, "min")):
        if x >= scale:
            return f"{sig(x / scale, 2)} {unit}"
    return f"{sig(x, 2)} s"


def count(n: float | None) -> str:
    """A count, with thousands separators: 1,658,598."""
    return MISSING if not _finite(n) else f"{n:,.0f}"


def ratio(x: float | None, digits: int = 3) -> str:
    """A ratio of two figures: '×1.23', '×1.00', '×31,800'; '–' where it has none."""
    return MISSING if not _finite(x) else f"×{sig(x, digits, keep_zeros=True)}"


def quotient(a: float | None, b: float | None, digits: int = 3) -> str:
    """a / b as a bare number (a column titled 'p99/p50'): '5,840', '1.2'."""
    if not (_finite(a) and _finite(b)) or b <= 0:
        return MISSING
    return sig(a / b, digits)


def size(n_bytes: float | None) -> str:
    """Bytes in binary units: 24793120768 -> '23.1 GiB'."""
    if not _finite(n_bytes):
        return MISSING
    for scale, unit in _BYTE_UNITS:
        if abs(n_bytes) >= scale:
            return f"{sig(n_bytes / scale)} {unit}"
    return f"{n_bytes:,.0f} B"


def p_value(p: float | None) -> str:
    """A test's p-value, to two digits; below 0.001 only that it is."""
    if not _finite(p):
        return MISSING
    return "< 0.001" if p < 1e-3 else sig(p, 2)


def p_is(p: float | None) -> str:
    """A p-value as said after its name: '= 0.043', '< 0.001'."""
    text = p_value(p)
    return text if text.startswith("<") or text == MISSING else f"= {text}"


def plural(n: int, word: str, words: str | None = None) -> str:
    """'1 CPU', '2 CPUs', '1 repetition', '3 repetitions'."""
    return f"{count(n)} {word if n == 1 else (words or word + 's')}"


def value(x: object) -> str:
    """Any figure of a record (metadata, a table cell), as text: booleans
    as yes/no, None as '–', floats as sig(), integers with separators."""
    if x is None:
        return MISSING
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return count(x)
    if isinstance(x, float):
        return sig(x)
    return str(x)
