"""The frames of an `envs` run.

`rounds` (main): one row per operation, environment and round: the
percentiles of that round's operations (all workers) and its throughput.
`summary`: one row per operation and environment: the percentiles of every
round pooled, the median round's throughput, and each figure's ratio to
native with the test of it (what `show --json` reports under "operations").
"""

from __future__ import annotations

from ..analysis.envs import FIGURES, QUANTILES, rounds, summarize, told_per_round
from ..analysis.histogram import TAIL_RULE
from . import describe, table

_KEY = {
    "operation": ("str", "probe:variant"),
    "environment": ("str", "native, container, kvm (or its whole spec when two share a name)"),
}
_FIG = {f"{q}_ns": ("float64", f"{q[1:]}th percentile, ns") for q, _ in QUANTILES} | {
    "ops_per_s": ("float64", "operations per second, all workers")
}


def _col(fig: str) -> str:
    return "ops_per_s" if fig == "ops/s" else f"{fig}_ns"


COLUMNS = {
    "rounds": {**_KEY, "round": ("int64", "round (the environments take turns within it)"), **_FIG},
    "summary": {
        **_KEY,
        "rounds": ("int64", "rounds measured"),
        "count": ("int64", "operations timed, every round"),
        **_FIG,
        **{
            f"{_col(f)}_{k}": (dtype, f"{f}: {meaning}")
            for f in FIGURES
            for k, dtype, meaning in (
                ("ratio", "float64", "ratio to native's"),
                ("p", "float64", "Mann-Whitney p of the rounds against native's"),
                ("q", "float64", "p adjusted for the run's false discovery rate"),
                ("why", "str", "why there is no ratio (empty where there is)"),
            )
        },
    },
}
__doc__ = (
    (__doc__ or "") + f"\nPercentiles (empty where too few operations tell them): {TAIL_RULE}.\n" + describe(COLUMNS)
)


def frames(run, records: list[dict]) -> dict:
    rows = []
    for (op, env), per in rounds(records).items():
        for r, (h, rate) in sorted(per.items()):
            told = {f"{q}_ns": next(iter(told_per_round([h], x)), None) for q, x in QUANTILES}
            rows.append({"operation": op, "environment": env, "round": r, **told, "ops_per_s": rate})
    summary = []
    for op, envs in summarize(run.params, records).operations.items():
        for e in envs:
            row = {"operation": op, "environment": e.env, "rounds": e.rounds, "count": e.count}
            for f in FIGURES:
                row[_col(f)] = e.figures[f]
                c = e.vs_native.get(f)
                row |= {f"{_col(f)}_ratio": c.ratio if c else None, f"{_col(f)}_p": c.p if c else None,
                        f"{_col(f)}_q": c.q if c else None, f"{_col(f)}_why": (c.why or "") if c else ""}  # fmt: skip
            summary.append(row)
    return {"rounds": table(run.id, rows, COLUMNS["rounds"]), "summary": table(run.id, summary, COLUMNS["summary"])}
