"""format.py, the one home for numbers: no figure in exponent form, units
and prefixes chosen after rounding, counts with separators, plurals."""

from __future__ import annotations

import math

import pytest

from oslens import format as f


@pytest.mark.parametrize(
    "fn, x, text",
    [
        (f.seconds, 0.9997, "1 s"),  # printed '1e+03 ms'
        (f.seconds, 0.0009997, "1 ms"),
        (f.seconds, 3600, "3,600 s"),
        (f.ns, 841, "841 ns"),
        (f.ns, 999.6, "1 µs"),
        (f.ns, 0, "0 ns"),
        (f.si, 999_700, "1M"),
        (f.si, 4_351_234, "4.35M"),
        (f.si, 0.5, "0.5"),
        (f.sig, 5840.35, "5,840"),  # printed 'p99/p50 5840.35'
        (f.sig, 0.000123, "0.000123"),
        (f.sig, 9.223372036854776e18, "9,220,000,000,000,000,000"),
        (f.count, 265328, "265,328"),
        (f.ratio, 31817.86, "×31,800"),
        (f.ratio, 0.99996, "×1.00"),
        (f.size, 24793120768, "23.1 GiB"),  # printed 'memory available 24793120768'
        (f.p_value, 1e-5, "< 0.001"),  # printed '1.0e-05'
        (f.value, False, "no"),  # printed 'SMT active False'
        (f.value, None, "–"),
    ],
)
def test_numbers_as_a_person_reads_them(fn, x, text):
    assert fn(x) == text


@pytest.mark.parametrize("fn", [f.si, f.seconds, f.ns, f.pct, f.count, f.ratio, f.size, f.sig, f.p_value])
@pytest.mark.parametrize("x", [None, math.nan, math.inf, -math.inf])
def test_no_figure_is_a_dash_never_nan(fn, x):
    assert fn(x) == "–"


@pytest.mark.parametrize("x", [10.0**k * m for k in range(-12, 22) for m in (1, 1.0005, 9.9996, 0.5)])
def test_no_magnitude_gives_an_exponent(x):
    for fn in (f.si, f.seconds, f.ns, f.sig, f.ratio, f.size, f.count):
        assert "e+" not in fn(x) and "e-" not in fn(x), (fn.__name__, x, fn(x))


def test_a_quotient_is_a_bare_number_or_a_dash():
    got = [f.quotient(5840.35, 1), f.quotient(3, 2), f.quotient(1, 0), f.quotient(math.nan, 1)]
    assert got == ["5,840", "1.5", "–", "–"]


def test_plurals():
    assert [f.plural(n, "CPU") for n in (0, 1, 2, 1000)] == ["0 CPUs", "1 CPU", "2 CPUs", "1,000 CPUs"]
    assert f.plural(1, "repetition") == "1 repetition" and f.plural(2, "host") == "2 hosts"
