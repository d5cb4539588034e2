"""A published finding set beside this machine's measurement: agrees,
differs, or cannot tell here — with the reason, and the confidence the
measurement's interval carries.

A finding is a row of a study's data file (README of ../shared/studies: the
paper's `value` with its qualifier, `unit`, and for a qualitative result a
`relation` to test). A measurement is a point estimate with an interval
(the median of the repetitions and its order-statistic interval, say) or a
series of them against cores, or the reason it could not be made. The
verdict is "agrees" or "differs" only where the interval lies wholly on
one side of what the finding says; straddling it, or lacking what the
finding needs, it is "cannot tell here", with what was missing.

How near is "agrees" for a plain number measured decades and machines
apart is a choice, stated: within a factor of NUMBER_BAND either way of
the paper's figure ("~" the same), a share (%) within SHARE_POINTS
points or that relative width if wider, never past 0 or 100 %; outside it
the verdict says by how much."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..format import sig

AGREES, DIFFERS, CANNOT_TELL = "agrees", "differs", "cannot tell here"
# A plain number agrees when this machine's lies within this factor of the paper's, either way.
NUMBER_BAND = 1.25
# A share (%) agrees within this many points of the paper's, or NUMBER_BAND's relative width if wider.
SHARE_POINTS = 5.0
# A series is flat when every point stays within this share of the first.
FLAT_WITHIN = 0.10
# Near-linear scaling: at the most cores, at least this efficiency (speedup / cores).
NEAR_LINEAR = 0.90

_NUMBER = re.compile(r"^\s*(~|<=|>=|<|>|up to)?\s*(-?[0-9]*\.?[0-9]+)\s*$")
_RANGE = re.compile(r"^\s*(-?[0-9]*\.?[0-9]+)\s*-\s*(-?[0-9]*\.?[0-9]+)\s*$")


@dataclass(frozen=True)
class Finding:
    """One row of a study's findings file."""

    id: str
    experiment: str
    workload: str
    condition: str
    measure: str
    value: str
    unit: str
    relation: str
    source: str
    machine: str
    notes: str

    @classmethod
    def of(cls, row: dict[str, str]) -> Finding:
        return cls(row["id"], row["experiment"], row["workload_or_operation"], row["condition"], row["measure"],
                   row["value"], row["unit"], row["relation"], row["source"], row["machine"], row["notes"])  # fmt: skip

    @property
    def number(self) -> tuple[str, float] | None:
        """(qualifier, figure) of a numeric value: ('', 11.12), ('~', 35), ('<', 1)."""
        m = _NUMBER.match(self.value)
        if not m:
            return None
        q = {"up to": "<="}.get(m.group(1) or "", m.group(1) or "")
        return q, float(m.group(2))

    @property
    def range(self) -> tuple[float, float] | None:
        m = _RANGE.match(self.value)
        return (float(m.group(1)), float(m.group(2))) if m else None

    @property
    def test(self) -> tuple[str, str]:
        """The relation as (op, arg): ('share_gt', '50%'), ('grows_with_cores', '')."""
        op, _, arg = self.relation.partition(":")
        return op, arg

    def paper_text(self) -> str:
        shown = UNIT_SHOWN.get(self.unit, self.unit)
        unit = f" {shown}" if shown and shown not in ("%", "x") else shown
        if self.number is None and self.range is None:
            unit = ""  # a relation in words ("almost linear"), not a figure in a unit
        return f"{self.value}{unit}" + (f" ({self.relation})" if self.relation else "")


@dataclass
class Measured:
    """What this machine gave for a finding: a value with its interval and
    the interval's confidence, or a series against cores, or why not."""

    value: float | None = None
    low: float | None = None
    high: float | None = None
    confidence: float | None = None  # the interval's coverage
    n: int | None = None  # repetitions behind it
    series: list[tuple[int, float, float, float]] = field(default_factory=list)  # (cores, value, low, high)
    text: str = ""  # how it was measured, for people
    missing: str | None = None  # why it could not be measured: the verdict is CANNOT_TELL with this reason

    @classmethod
    def unmeasured(cls, why: str) -> Measured:
        return cls(missing=why)

    @property
    def interval(self) -> tuple[float, float] | None:
        if self.value is None:
            return None
        return (self.low if self.low is not None else self.value, self.high if self.high is not None else self.value)


@dataclass
class Verdict:
    id: str
    paper: str
    here: str
    verdict: str
    reason: str
    confidence: float | None = None
    # both figures as numbers, in the finding's unit, where both are numbers:
    # what a report draws side by side (the paper's range, or its figure twice)
    unit: str | None = None
    paper_low: float | None = None
    paper_high: float | None = None
    value: float | None = None
    low: float | None = None
    high: float | None = None

    def to_dict(self) -> dict:
        return dict(self.__dict__)

    def with_figures(self, f: Finding, m: Measured) -> Verdict:
        """The verdict carrying the paper's figure and this machine's, where
        both are numbers: a figure or a range of the paper's, never a bound
        ("< 5 %" is no figure of 5)."""
        paper = f.range or ((f.number[1],) * 2 if f.number and f.number[0] in ("", "~") else None)
        if paper is None or m.value is None or m.series:
            return self
        (self.paper_low, self.paper_high), self.unit = paper, UNIT_SHOWN.get(f.unit, f.unit)
        self.value, (self.low, self.high) = m.value, m.interval
        return self


# Units as the findings files write them, as people read them.
UNIT_SHOWN = {"us": "µs"}


def _fmt(x: float, unit: str) -> str:
    unit = UNIT_SHOWN.get(unit, unit)
    return f"{sig(x, 3)}{'' if unit in ('%', 'x', '') else ' '}{unit}"


def _here(m: Measured, unit: str) -> str:
    if m.missing:
        return "not measured"
    if m.series:
        return ", ".join(f"{c}: {_fmt(v, unit)}" for c, v, _, _ in m.series)
    iv = m.interval
    text = _fmt(m.value, unit)
    if iv and iv[0] != iv[1]:
        text += f" [{_fmt(iv[0], unit)}–{_fmt(iv[1], unit)}"
        text += f", {m.confidence:.0%}]" if m.confidence is not None else "]"
    return text + (f" ({m.text})" if m.text else "")


def _side(iv: tuple[float, float], lo: float | None, hi: float | None) -> str:
    """'in' when the interval lies within [lo, hi], 'out' when wholly outside, 'both' when it straddles an edge."""
    inside_lo = lo is None or iv[0] >= lo
    inside_hi = hi is None or iv[1] <= hi
    if inside_lo and inside_hi:
        return "in"
    if (hi is not None and iv[0] > hi) or (lo is not None and iv[1] < lo):
        return "out"
    return "both"


def _against_bounds(iv: tuple[float, float], lo: float | None, hi: float | None, what: str) -> tuple[str, str]:
    """`what` names the bounds: "the paper's 2–5", "a factor 1.25 of the paper's 11.1 (8.9–13.9)"."""
    side = _side(iv, lo, hi)
    if side == "in":
        return AGREES, f"the interval lies within {what}"
    if side == "out":
        return DIFFERS, f"the interval lies outside {what}"
    return CANNOT_TELL, f"the interval straddles an edge of {what}: more repetitions could tell"


_BOUNDS = {"<": (None, "lt"), "<=": (None, "le"), ">": ("gt", None), ">=": ("ge", None)}


def _number(f: Finding, m: Measured) -> tuple[str, str]:
    iv = m.interval
    if f.range:
        a, b = f.range
        return _against_bounds(iv, a, b, f"the paper's {sig(a)}–{sig(b)}")
    q, x = f.number
    if q in ("<", "<="):
        return _against_bounds(iv, None, x, f"the paper's bound {q} {sig(x)}")
    if q in (">", ">="):
        return _against_bounds(iv, x, None, f"the paper's bound {q} {sig(x)}")
    if x == 0:
        return _against_bounds(iv, None, 0.0, "the paper's 0")
    if f.unit == "%":  # a share: in points, never past 0 or 100
        d = max(SHARE_POINTS, x * (NUMBER_BAND - 1))
        lo, hi = max(0.0, x - d), min(100.0, x + d)
        band = f"{sig(d, 2)} points of the paper's {sig(x)} % ({sig(lo)}–{sig(hi)} %)"
    else:
        lo, hi = sorted((x / NUMBER_BAND, x * NUMBER_BAND))
        band = f"a factor {NUMBER_BAND} of the paper's {sig(x)} ({sig(lo)}–{sig(hi)})"
    verdict, why = _against_bounds(iv, lo, hi, band)
    if verdict == DIFFERS and m.value:
        why += f" ({sig(m.value / x, 2)} times the paper's)"
    return verdict, why


def _threshold(op: str, arg: str) -> float | None:
    try:
        return float(arg.rstrip("%"))
    except ValueError:
        return None


def _relation(f: Finding, m: Measured) -> tuple[str, str] | None:
    """The verdict of a qualitative finding this module can test, or None."""
    op, arg = f.test
    if op in ("share_gt", "share_ge", "share_lt", "gt", "ge", "lt", "le") and m.interval:
        x = _threshold(op, arg)
        if x is None:
            return None  # a comparison with another workload: the study's own code sets it up
        if op.endswith(("gt", "ge")):
            return _against_bounds(m.interval, x, None, f"the bound > {arg}")
        return _against_bounds(m.interval, None, x, f"the bound < {arg}")
    if op in ("grows_with_cores", "decreases_with_cores", "flat_with_cores", "near_linear", "does_not_scale"):
        if len(m.series) < 2:
            return CANNOT_TELL, f"{op.replace('_', ' ')} needs a series of at least two core counts"
        return _shape(op, m.series)
    return None


def _shape(op: str, series: list[tuple[int, float, float, float]]) -> tuple[str, str]:
    (c0, v0, lo0, hi0), (cn, vn, lon, hin) = series[0], series[-1]
    span = f"from {c0} to {cn} cores"
    if op in ("grows_with_cores", "decreases_with_cores"):
        rose, fell = lon > hi0, hin < lo0
        if not (rose or fell):
            return CANNOT_TELL, f"{span} the intervals overlap: more repetitions could tell"
        agrees = rose == (op == "grows_with_cores")
        return (AGREES if agrees else DIFFERS), f"{span} it {'rose' if rose else 'fell'} beyond its intervals"
    if op == "flat_with_cores":
        band = (v0 * (1 - FLAT_WITHIN), v0 * (1 + FLAT_WITHIN))
        sides = [_side((lo, hi), *band) for _, _, lo, hi in series[1:]]
        if all(s == "in" for s in sides):
            return AGREES, f"{span} every point stayed within {FLAT_WITHIN:.0%} of the first"
        if any(s == "out" for s in sides):
            return DIFFERS, f"{span} a point left the {FLAT_WITHIN:.0%} band around the first"
        return CANNOT_TELL, "a point's interval straddles the band"
    # speedup against the first count: efficiency = speedup × c0 / c
    eff = (vn / v0 * c0 / cn, lon / hi0 * c0 / cn, hin / lo0 * c0 / cn)
    near = _side((eff[1], eff[2]), NEAR_LINEAR, None)
    what = f"{span} efficiency {eff[0]:.0%} ({eff[1]:.0%}–{eff[2]:.0%})"
    if op == "near_linear":
        return {"in": (AGREES, what), "out": (DIFFERS, what)}.get(near, (CANNOT_TELL, what + " straddles 90%"))
    return {"in": (DIFFERS, what), "out": (AGREES, what)}.get(near, (CANNOT_TELL, what + " straddles 90%"))


def judge(f: Finding, m: Measured) -> Verdict:
    """The verdict on finding f given measurement m."""
    here = _here(m, f.unit)
    if m.missing:
        return Verdict(f.id, f.paper_text(), here, CANNOT_TELL, m.missing)
    tested = _relation(f, m) if f.relation else None
    if tested is None and f.relation:
        return Verdict(f.id, f.paper_text(), here, CANNOT_TELL, f"no test of '{f.relation}' here yet")
    if tested is None:
        if (f.number is None and f.range is None) or m.interval is None:
            return Verdict(f.id, f.paper_text(), here, CANNOT_TELL, "the paper's value is not a number to set beside")
        tested = _number(f, m)
    verdict, reason = tested
    if m.n is not None:
        reason += f"; {m.n} repetitions"
    return Verdict(f.id, f.paper_text(), here, verdict, reason, m.confidence).with_figures(f, m)
