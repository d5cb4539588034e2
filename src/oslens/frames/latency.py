"""The frames of a `latency` run.

`hists` (main): one row per histogram record, i.e. per operation, phase,
repetition and worker, with the percentiles of that worker's histogram.
`histogram`: the same histograms in long form, one row per non-empty
bucket. `summary`: one row per operation and phase, merged over workers
and repetitions: what `show --json` reports under "operations" and, for
the null probe (`timing_overhead` true), under "timing_overhead".

An operation is named `probe:variant`; a phase is "alone" or "with
<competitor> on CPUs …". Percentiles are nearest-rank, read from the
engine's log-linear histogram (within half a bucket of the exact value;
min, max and mean exact), and NaN where the histogram's sample cannot
tell them (the rule is below).
"""

from __future__ import annotations

from ..analysis.histogram import TAIL_RULE, Histogram
from ..analysis.latency import QUANTILES, phase_of
from ..records import invocations
from . import describe, joined, table

_OP = {
    "operation": ("str", "probe:variant"),
    "probe": ("str", "the probe"),
    "variant": ("str", "its variant"),
    "phase": ("str", "alone, or with <competitor> on CPUs …"),
}
_STATS = {
    "count": ("int64", "operations timed"),
    "min_ns": ("float64", "fastest operation, ns"),
    **{f"{q}_ns": ("float64", f"{q[1:]}th percentile, ns") for q in QUANTILES},
    "max_ns": ("float64", "slowest operation, ns"),
    "mean_ns": ("float64", "mean, ns"),
}

COLUMNS = {
    "hists": {
        **_OP,
        "rep": ("int64", "repetition"),
        "worker": ("int64", "worker index"),
        "cpu": ("Int64", "CPU the worker was pinned to"),
        **_STATS,
    },
    "histogram": {
        **_OP,
        "rep": ("int64", "repetition"),
        "worker": ("int64", "worker index"),
        "lower_ns": ("float64", "bucket's lower bound, ns (inclusive)"),
        "upper_ns": ("float64", "bucket's upper bound, ns (exclusive)"),
        "count": ("int64", "operations in the bucket"),
    },
    "summary": {
        **_OP,
        "timing_overhead": ("bool", "the null probe: what timing one operation costs"),
        "reps": ("int64", "repetitions"),
        "workers": ("int64", "workers"),
        **_STATS,
        "std_ns": ("float64", "standard deviation (from bucket midpoints), ns"),
        **{f"{q}_cycles": ("float64", f"{q} in TSC cycles (NaN when the clock was not the TSC)") for q in QUANTILES},
        "mean_cycles": ("float64", "mean in TSC cycles"),
        "warnings": ("str", "why a figure may not be trusted, '; '-separated"),
        "absent_percentiles": ("str", "the percentiles the sample cannot tell, each with why, '; '-separated"),
    },
}
__doc__ += f"\nPercentiles: {TAIL_RULE}.\n" + describe(COLUMNS)


def _stats(h: Histogram) -> dict:
    values = h.told_percentiles(list(QUANTILES.values()))
    return {
        "count": h.count,
        "min_ns": h.min_ns if h.count else None,
        **{f"{q}_ns": float(v) for q, v in zip(QUANTILES, values)},
        "max_ns": h.max_ns if h.count else None,
        "mean_ns": h.mean_ns if h.count else None,
    }


def frames(run, records: list[dict]) -> dict:
    from ..analysis.latency import summarize

    hists, buckets = [], []
    for inv in invocations(records):
        phase = phase_of(inv.context)
        for r in inv.of("hist"):
            h = Histogram.from_record(r["hist"])
            key = {
                "operation": f"{r['probe']}:{r['variant']}",
                "probe": r["probe"],
                "variant": r["variant"],
                "phase": phase,
                "rep": r["rep"],
                "worker": r["worker"],
            }
            hists.append({**key, "cpu": r.get("cpu"), **_stats(h)})
            lower, width = h.bounds()
            for lo, w, n in zip(lower, width, h.counts):
                buckets.append(
                    {**key, "lower_ns": float(lo) * h.unit_ns, "upper_ns": float(lo + w) * h.unit_ns, "count": int(n)}
                )
    summary = []
    s = summarize(records)
    for op, overhead in [(o, False) for o in s.ops] + [(o, True) for o in s.floor.values()]:
        d = op.to_dict()
        d.update(
            operation=f"{op.probe}:{op.variant}",
            timing_overhead=overhead,
            warnings=joined(d["warnings"]),
            absent_percentiles=joined(d["absent_percentiles"].values()),
        )
        summary.append(d)
    return {
        "hists": table(run.id, hists, COLUMNS["hists"]),
        "histogram": table(run.id, buckets, COLUMNS["histogram"]),
        "summary": table(run.id, summary, COLUMNS["summary"]),
    }
