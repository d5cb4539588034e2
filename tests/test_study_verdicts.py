"""A finding beside a measurement (studies/verdict.py): agrees, differs or
cannot tell, from where the measurement's interval lies — on the findings
the package ships, with measurements made up to sit on each side."""

from __future__ import annotations

import pytest

from oslens.studies import load
from oslens.studies.verdict import AGREES, CANNOT_TELL, DIFFERS, NUMBER_BAND, Finding, Measured, judge

STUDIES = ("zheng-scaleout", "kocoloski-variability", "luo-kernels", "nellans-codesign")


def finding(value: str, unit: str = "%", relation: str = "", id: str = "f") -> Finding:
    return Finding(id, "exp", "work", "cond", "measure", value, unit, relation, "Table 1", "machine", "")


@pytest.mark.parametrize("study", STUDIES)
def test_every_shipped_finding_is_read_with_a_unique_id_and_a_source(study):
    rows = load(study)
    assert rows and len({f.id for f in rows}) == len(rows)
    assert all(f.source and f.measure for f in rows)


@pytest.mark.parametrize("study", STUDIES)
def test_every_shipped_finding_gets_a_verdict_and_a_reason_even_unmeasured(study):
    for f in load(study):
        v = judge(f, Measured.unmeasured("needs 64 cores"))
        assert v.verdict == CANNOT_TELL and v.reason == "needs 64 cores" and v.paper


def test_a_plain_number_agrees_within_the_band_and_differs_outside_it():
    f = finding("11.12", "us")
    assert judge(f, Measured(11.5, 10.0, 13.0, 0.9, 6)).verdict == AGREES
    off = judge(f, Measured(40.0, 38.0, 42.0, 0.9, 6))
    assert off.verdict == DIFFERS and "3.6 times" in off.reason
    assert judge(f, Measured(13.0, 10.0, 11.12 * NUMBER_BAND + 1, 0.9, 6)).verdict == CANNOT_TELL


def test_a_share_agrees_within_points_and_never_past_100():
    assert judge(finding("11.12"), Measured(15.0, 13.0, 16.0, 0.95, 6)).verdict == AGREES  # within 5 points
    assert judge(finding("11.12"), Measured(20.0, 18.0, 22.0, 0.95, 6)).verdict == DIFFERS
    near_all = judge(finding("98.81"), Measured(99.5, 97.0, 100.0, 0.95, 6))
    assert near_all.verdict == AGREES and "100 %)" in near_all.reason


@pytest.mark.parametrize(
    ("value", "inside", "outside"),
    [("<1", (0.5, 0.9), (1.5, 2.0)), (">50", (60, 70), (10, 20)), ("2-5", (3, 4), (7, 9)), ("up to 3", (1, 2), (4, 5))],
)
def test_bounds_and_ranges(value, inside, outside):
    f = finding(value, "us")
    assert judge(f, Measured(sum(inside) / 2, *inside, 0.95, 5)).verdict == AGREES
    assert judge(f, Measured(sum(outside) / 2, *outside, 0.95, 5)).verdict == DIFFERS


def test_a_share_relation_is_tested_against_its_threshold():
    f = finding("most", relation="share_gt:50%")
    assert judge(f, Measured(70, 65, 75, 0.9, 6)).verdict == AGREES
    assert judge(f, Measured(30, 25, 35, 0.9, 6)).verdict == DIFFERS
    assert judge(f, Measured(52, 45, 60, 0.9, 6)).verdict == CANNOT_TELL


def series(*points):
    return Measured(series=[(c, v, v * 0.97, v * 1.03) for c, v in points])


@pytest.mark.parametrize(
    ("relation", "points", "verdict"),
    [
        ("grows_with_cores", [(1, 10), (4, 20)], AGREES),
        ("grows_with_cores", [(1, 10), (4, 5)], DIFFERS),
        ("grows_with_cores", [(1, 10), (4, 10.2)], CANNOT_TELL),
        ("flat_with_cores", [(1, 10), (2, 10.2), (4, 9.9)], AGREES),
        ("flat_with_cores", [(1, 10), (4, 15)], DIFFERS),
        ("near_linear", [(1, 1.0), (8, 7.8)], AGREES),
        ("near_linear", [(1, 1.0), (8, 3.0)], DIFFERS),
        ("does_not_scale", [(1, 1.0), (8, 3.0)], AGREES),
    ],
)
def test_scaling_shapes_over_a_series(relation, points, verdict):
    assert judge(finding("x", "x", relation), series(*points)).verdict == verdict


def test_a_shape_needs_two_core_counts_and_an_untested_relation_says_so():
    assert judge(finding("x", "x", "grows_with_cores"), series((1, 10))).verdict == CANNOT_TELL
    v = judge(finding("x", "", "correlates:a,b"), Measured(1.0))
    assert v.verdict == CANNOT_TELL and "correlates:a,b" in v.reason
    assert judge(finding("negligible", ""), Measured(1.0)).verdict == CANNOT_TELL
