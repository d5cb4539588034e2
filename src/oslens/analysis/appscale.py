"""What an `appscale` run found: per CPU count the wall time (median and
interval over repetitions), speedup and efficiency against the smallest
count, where the CPU time went (user, system, interrupts), and the Amdahl
and USL fits, whose predictions beyond the CPUs measured are marked as
extrapolations."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from . import DictSummary
from .metrics import LOWER, Metrics
from .scaling import amdahl_unfit_reason, fit_amdahl, fit_usl, usl_unfit_reason
from .stats import median_ci, trust_warnings


def _median(values: list) -> float | None:
    vals = [v for v in values if v is not None]
    return float(np.median(vals)) if vals else None


def _share(part: float | None, whole: float | None) -> float | None:
    return part / whole if part is not None and whole else None


def summarize(records: list[dict], available_cpus: int | None = None) -> dict:
    points = [r for r in records if r.get("type") == "point"]
    by_n: dict[int, list[dict]] = defaultdict(list)
    for p in points:
        by_n[p["n"]].append(p)
    rows = []
    for n in sorted(by_n):
        reps = by_n[n]
        ok = [p for p in reps if p["status"] == "ok"]
        failed = [p for p in reps if p["status"] != "ok"]
        row = {
            "n": n,
            "cpus": reps[0]["cpus"],
            "reps": len(reps),
            "ok": len(ok),
            "failures": [
                {
                    "rep": p["rep"],
                    "how": p["how"],
                    "code": p["code"],
                    "signal": p["signal"],
                    "output_tail": p.get("output_tail", ""),
                }
                for p in failed
            ],
            # a repetition whose --prepare failed never ran confined: the first that did says how
            "confinement": next((p["confinement"] for p in reps if "confinement" in p), None),
            "cpu_source": next((p["cpu_source"] for p in reps if "cpu_source" in p), None),
            "irq_unavailable": next((p["irq_unavailable"] for p in reps if "irq_unavailable" in p), None),
        }
        if ok:
            walls = [p["wall_ns"] / 1e9 for p in ok]
            ci = median_ci(walls)
            user = _median([p["user_ns"] for p in ok])
            system = _median([p["system_ns"] for p in ok])
            irq = _median(
                [(p["irq_ns"] or 0) + (p["softirq_ns"] or 0) if p["irq_ns"] is not None else None for p in ok]
            )
            row.update(
                {
                    "wall_s": ci.to_dict(),
                    "walls_s": walls,
                    "user_s": user / 1e9 if user is not None else None,
                    "system_s": system / 1e9 if system is not None else None,
                    "system_share": _share(system, (user or 0) + (system or 0)),
                    "irq_softirq_s": irq / 1e9 if irq is not None else None,
                    "context_switches": _median([(p["nvcsw"] or 0) + (p["nivcsw"] or 0) for p in ok]),
                    "page_faults": _median([(p["min_flt"] or 0) + (p["maj_flt"] or 0) for p in ok]),
                    "warnings": trust_warnings(walls),
                }
            )
        rows.append(row)

    measured = [r for r in rows if r["ok"]]
    base = measured[0] if measured else None
    for r in measured:
        speedup = base["wall_s"]["median"] / r["wall_s"]["median"]
        r["speedup"] = speedup
        r["efficiency"] = speedup * base["n"] / r["n"]
    return {
        "rows": rows,
        "base_n": base["n"] if base else None,
        "fits": fits(measured, available_cpus),
        "failed_points": [r["n"] for r in rows if r["failures"]],
    }


def fits(measured: list[dict], available_cpus: int | None) -> dict:
    """Amdahl on the speedup (when the smallest count is 1 CPU, where the
    model is anchored) and USL on throughput (runs per second, every
    repetition a point)."""
    out: dict = {}
    n_all = [r["n"] for r in measured for _ in r["walls_s"]]
    x_all = [1.0 / w for r in measured for w in r["walls_s"]]
    top = max((r["n"] for r in measured), default=0)

    reason = usl_unfit_reason(n_all) if n_all else "nothing measured"
    u = fit_usl(n_all, x_all) if reason is None else None
    if u is None:
        out["usl"] = {"fitted": False, "why": reason or "the fit did not converge"}
    else:
        d = u.to_dict()
        one_cpu = u.predict(1.0)
        d["fitted"] = True
        d["peak_speedup"] = (u.peak_x / one_cpu) if u.peak_x is not None else None
        d["peak_is_extrapolated"] = u.peak_is_extrapolated([r["n"] for r in measured])
        beyond = sorted({2 * (available_cpus or top), 4 * (available_cpus or top)})
        d["predicted"] = [
            {"n": n, "speedup": float(u.predict(float(n)) / one_cpu), "extrapolated": n > top} for n in beyond
        ]
        out["usl"] = d

    if not measured or measured[0]["n"] != 1:
        out["amdahl"] = {"fitted": False, "why": "Amdahl's law is anchored at 1 CPU, which was not measured"}
    else:
        base = measured[0]["wall_s"]["median"]
        n_s = [r["n"] for r in measured for _ in r["walls_s"]]
        s_s = [base / w for r in measured for w in r["walls_s"]]
        reason = amdahl_unfit_reason(n_s)
        a = fit_amdahl(n_s, s_s) if reason is None else None
        out["amdahl"] = (
            {"fitted": False, "why": reason or "the fit did not converge"}
            if a is None
            else {"fitted": True, **a.to_dict(), "max_speedup_is_extrapolated": True}
        )
    return out


def applications(records: list[dict]) -> list[tuple[str, list[dict]]]:
    """The run's applications in the order they first ran, each with its
    records: one, named "", in a run of one application."""
    by_app: dict[str, list[dict]] = {}
    for r in records:
        if r.get("type") == "point":
            by_app.setdefault(r.get("app", ""), []).append(r)
    return list(by_app.items()) or [("", [])]


def summarize_run(records: list[dict], available_cpus: int | None = None) -> dict:
    """A run of one application: its summary. A run of several (a study's):
    {"apps": [{"app": name, **its summary}, …], "failed_points": [{"app", "n"}, …]}."""
    apps = applications(records)
    if len(apps) == 1 and not apps[0][0]:
        return summarize(apps[0][1], available_cpus)
    each = [{"app": app, **summarize(recs, available_cpus)} for app, recs in apps]
    return {"apps": each, "failed_points": [{"app": a["app"], "n": n} for a in each for n in a["failed_points"]]}


def per_app(summary: dict) -> list[tuple[str, dict]]:
    """(application, its summary) for each application of a run's summary."""
    if "apps" not in summary:
        return [("", summary)]
    return [(a["app"], a) for a in summary["apps"]]


def analyze(run, records: list[dict]) -> DictSummary:
    summary = DictSummary(summarize_run(records, run.params.get("available_cpus")))
    if (run.params or {}).get("study"):
        from .. import kinds

        summary["study"] = kinds.study(run.params["study"]).load("verdicts")(summary, run, records)
    return summary


def metrics(run, records: list[dict]) -> Metrics:
    p = run.params or {}
    single = f"workload {p['workload']}" if p.get("workload") else " ".join(p.get("command") or []) or "appscale"
    out = Metrics()
    for app, recs in applications(records):
        by_n: dict[int, list[dict]] = defaultdict(list)
        for q in recs:
            if q.get("status") == "ok":
                by_n[q["n"]].append(q)
        _app_metrics(out, f"appscale/{app}/" if app else "appscale/", app or single, by_n)
    return out


def _app_metrics(out: Metrics, prefix: str, group: str, by_n: dict[int, list[dict]]) -> None:
    for n in sorted(by_n):
        ok = by_n[n]
        out.add(
            f"{prefix}{n} CPUs/wall s", [q["wall_ns"] / 1e9 for q in ok], "s", LOWER, group, f"{_cpus(n)} · wall time"
        )
        out.add(
            f"{prefix}{n} CPUs/system share",
            [
                q["system_ns"] / (q["user_ns"] + q["system_ns"])
                for q in ok
                if q.get("user_ns") is not None and q.get("system_ns") is not None and q["user_ns"] + q["system_ns"] > 0
            ],
            "share",
            LOWER,
            group,
            f"{_cpus(n)} · system share of CPU time",
        )


def _cpus(n: int) -> str:
    return "1 CPU" if n == 1 else f"{n} CPUs"
