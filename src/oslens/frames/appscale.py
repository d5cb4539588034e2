"""The frames of an `appscale` run.

`reps` (main): one row per repetition of the application at a CPU count
(the stored `point` records), failed ones included (their status says so).
`points`: one row per CPU count, the figures `show --json` reports in
"rows": wall time median and interval over the repetitions that ended ok,
user/system split, speedup and efficiency against the smallest count.
`fits`: the Amdahl and USL fits, long: one row per model and figure
(`lambda`, `sigma`, `kappa`, `serial_fraction`, `r2`, `peak_speedup`,
`predicted.0.speedup` …; one row without a figure when the model was not
fitted, with why). A run of several applications (a study's) has every
frame's rows for each, told apart by `app`.

CPU lists are text, comma-separated ("0,1,4").
"""

from __future__ import annotations

from ..records import of_type
from . import describe, joined, table

COLUMNS = {
    "reps": {
        "app": ("str", "the application, in a run of several (a study's); empty in a run of one"),
        "n": ("int64", "CPUs the application was given"),
        "rep": ("int64", "repetition"),
        "cpus": ("str", "those CPUs, comma-separated"),
        "status": ("str", "ok, or how it failed"),
        "how": ("str", "how it ended: exited, signal, time_limit…"),
        "code": ("Int64", "exit code"),
        "signal": ("Int64", "signal that ended it"),
        "wall_s": ("float64", "wall time, s"),
        "user_s": ("float64", "user CPU time, s"),
        "system_s": ("float64", "system CPU time, s"),
        "irq_s": ("float64", "hard interrupt time on its CPUs, s"),
        "softirq_s": ("float64", "soft interrupt time on its CPUs, s"),
        "nvcsw": ("Int64", "voluntary context switches"),
        "nivcsw": ("Int64", "involuntary context switches"),
        "min_flt": ("Int64", "minor page faults"),
        "maj_flt": ("Int64", "major page faults"),
    },
    "points": {
        "app": ("str", "the application, in a run of several; empty in a run of one"),
        "n": ("int64", "CPUs"),
        "cpus": ("str", "which, comma-separated"),
        "reps": ("int64", "repetitions run"),
        "ok": ("int64", "repetitions that ended ok (the figures are over these)"),
        "wall_s_median": ("float64", "wall time, s: median"),
        "wall_s_low": ("float64", "wall time, s: low end of the median's confidence interval"),
        "wall_s_high": ("float64", "wall time, s: high end"),
        "coverage": ("float64", "confidence the interval covers the median"),
        "user_s": ("float64", "user CPU time, s (median)"),
        "system_s": ("float64", "system CPU time, s (median)"),
        "system_share": ("float64", "system / (user + system)"),
        "irq_softirq_s": ("float64", "interrupt time, s (median)"),
        "context_switches": ("float64", "voluntary + involuntary switches (median)"),
        "page_faults": ("float64", "minor + major faults (median)"),
        "speedup": ("float64", "wall time at the smallest count / wall time here"),
        "efficiency": ("float64", "speedup × smallest count / n"),
        "failures": ("int64", "repetitions that failed"),
        "warnings": ("str", "why a figure may not be trusted, '; '-separated"),
    },
    "fits": {
        "app": ("str", "the application, in a run of several; empty in a run of one"),
        "model": ("str", "amdahl or usl"),
        "fitted": ("bool", "the model could be fitted"),
        "why": ("str", "why not, when it was not"),
        "name": ("str", "the figure (dotted path in the summary's fit)"),
        "value": ("float64", "its value (a flag is 0 or 1)"),
    },
}
__doc__ += describe(COLUMNS)


def _s(ns) -> float | None:
    return ns / 1e9 if ns is not None else None


def frames(run, records: list[dict]) -> dict:
    from ..analysis.appscale import analyze, per_app

    reps = [
        {
            "app": p.get("app", ""),
            "n": p["n"],
            "rep": p["rep"],
            "cpus": joined(p["cpus"], ","),
            "status": p["status"],
            "how": p.get("how"),
            "code": p.get("code"),
            "signal": p.get("signal"),
            "wall_s": _s(p.get("wall_ns")),
            "user_s": _s(p.get("user_ns")),
            "system_s": _s(p.get("system_ns")),
            "irq_s": _s(p.get("irq_ns")),
            "softirq_s": _s(p.get("softirq_ns")),
            **{k: p.get(k) for k in ("nvcsw", "nivcsw", "min_flt", "maj_flt")},
        }
        for p in of_type(records, "point")
    ]
    points, fits = [], []
    for app, summary in per_app(analyze(run, records).to_dict()):
        points += _points(app, summary)
        fits += _fits(app, summary)
    return {
        "reps": table(run.id, reps, COLUMNS["reps"]),
        "points": table(run.id, points, COLUMNS["points"]),
        "fits": table(run.id, fits, COLUMNS["fits"]),
    }


def _points(app: str, summary: dict) -> list[dict]:
    points = []
    for r in summary["rows"]:
        wall = r.get("wall_s") or {}
        points.append(
            {
                **{k: r.get(k) for k in COLUMNS["points"]},
                "app": app,
                "cpus": joined(r["cpus"], ","),
                "wall_s_median": wall.get("median"),
                "wall_s_low": wall.get("low"),
                "wall_s_high": wall.get("high"),
                "coverage": wall.get("coverage"),
                "failures": len(r["failures"]),
                "warnings": joined(r.get("warnings") or []),
            }
        )
    return points


def _fits(app: str, summary: dict) -> list[dict]:
    fits = []
    for model, fit in summary.get("fits", {}).items():
        head = {"app": app, "model": model, "fitted": bool(fit.get("fitted")), "why": fit.get("why")}
        figures = _figures({k: v for k, v in fit.items() if k not in ("fitted", "why", "model")})
        fits += [{**head, "name": name, "value": value} for name, value in figures] or [head]
    return fits


def _figures(node, path: str = "") -> list[tuple[str, float]]:
    """The numbers (and flags, as 0/1) of a nested fit, by dotted path."""
    if isinstance(node, dict):
        return [f for k, v in node.items() for f in _figures(v, f"{path}.{k}" if path else str(k))]
    if isinstance(node, list):
        return [f for i, v in enumerate(node) for f in _figures(v, f"{path}.{i}")]
    if isinstance(node, (int, float)):
        return [(path, float(node))]
    return []
