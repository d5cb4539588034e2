"""The variability study (Kocoloski) re-run: every CPU issuing the whole
catalogue of operations at once (`latency --mix` on all CPUs), and the share
of operations whose median and 99th percentile fall under 1 µs, 10 µs,
100 µs, 1 ms and 10 ms — the paper's Tables 1 and 2 — beside its native
figures; the KVM and Docker columns where this study ran in them, else
"cannot tell here"; and the tail-at-scale arithmetic.

A share is a proportion of this catalogue's operations (tens of them, where
the paper traced thousands of call sequences): its interval is the
binomial one of that count (Clopper-Pearson), which the verdict reads."""

from __future__ import annotations

import re

from ..studies import load
from ..studies.verdict import AGREES, CANNOT_TELL, DIFFERS, Measured, Verdict, judge
from .latency import ALONE
from .stats import proportion_interval

STUDY = "kocoloski-variability"
CONFIDENCE = 0.95
# The paper's bucket names in finding ids, and the summary's labels for them.
BUCKET_OF = {"lt1us": "≤1µs", "lt10us": "≤10µs", "lt100us": "≤100µs", "lt1ms": "≤1ms", "lt10ms": "≤10ms",
             "gt10ms": ">10ms"}  # fmt: skip
_TABLE_ROW = re.compile(r"^(median|p99)_(lt1us|lt10us|lt100us|lt1ms|lt10ms|gt10ms)_(native|kvm|docker)$")
QUANTILE = {"median": "p50", "p99": "p99"}


def _bucket(variability: dict, quantile: str, bucket: str) -> Measured:
    row = variability.get(quantile) or {}
    n, share = row.get("operations") or 0, row.get(BUCKET_OF[bucket])
    if not n or share is None:
        return Measured.unmeasured(f"no operation's {quantile} could be told")
    k = round(share * n)
    low, high = proportion_interval(k, n, CONFIDENCE)
    return Measured(100 * share, 100 * low, 100 * high, CONFIDENCE, text=f"{k} of {n} operations")


def beside(summary, run, records) -> list[dict]:
    """The study's entry in the registry of kinds: one verdict per finding."""
    env = (run.params or {}).get("environment") or "native"
    phase = ALONE if ALONE in summary.phases else (summary.phases[0] if summary.phases else None)
    variability = summary.variability(phase) if phase else {}
    rows = []
    for f in load(STUDY):
        m = _TABLE_ROW.match(f.id)
        if m:
            q, bucket, where = m.groups()
            measured = (
                _bucket(variability, QUANTILE[q], bucket)
                if where == env
                else Measured.unmeasured(f"this run measured {env}; the {where} column needs the study run there")
            )
            v = judge(f, measured)
            if v.verdict != CANNOT_TELL:
                v.reason += "; this catalogue's operations, not the paper's 3,000 call sequences"
        elif f.id == "tail_at_scale":
            v = _tail_at_scale(f)
        else:
            v = Verdict(f.id, f.paper_text(), "not measured", CANNOT_TELL, "not measured by `study variability` yet")
        rows.append({**v.to_dict(), "part": f.source, "measure": f"{f.measure} ({f.condition.split(':')[0]})"})
    return rows


def _tail_at_scale(f) -> Verdict:
    """1 − 0.99^100: the arithmetic the paper relies on, checked."""
    p = 1 - 0.99**100
    ok = abs(100 * p - 63) < 1
    return Verdict(f.id, f.paper_text(), f"{100 * p:.1f} %", AGREES if ok else DIFFERS,
                   "1 − 0.99^100, computed: with 100 servers each slow 1 % of the time, that share of requests "
                   "waits for a slow one")  # fmt: skip
