"""`oslens compare RUN_A RUN_B`: every metric both runs measured, side by
side, with whether the difference is more than the runs' own noise.

A metric is one figure per repetition (ops/s per worker at 4 workers, p99 of
getppid, share of CPU 3 lost to noise, wall time on 8 CPUs, ...). The two
runs' repetitions are compared with a two-sided Mann-Whitney U test (no
normality assumed; exact for small samples); with many metrics the p-values
are adjusted for multiplicity (Benjamini-Hochberg) so that two runs of the
same thing are not flagged by chance. A change is a regression when it is
significant and worse than the threshold in the metric's bad direction, an
improvement likewise in the good one. Too few repetitions to ever reach the
confidence is said as such ("not testable"), never read as "no difference".

Run B is compared against run A: changes are B relative to A.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from . import kinds
from .analysis import kstacks
from .analysis.metrics import HIGHER, LOWER, Metric  # noqa: F401  (directions, read by callers of compare)
from .analysis.stats import (
    SPREAD_LIMIT,
    Interval,
    adjust_fdr,
    bootstrap_ratio_ci,
    mann_whitney,
    median_ci,
    min_two_sided_p,
    min_two_sided_p_given,
    relative_spread,
    repetitions_for_test,
    repetitions_needed,
)
from .errors import UsageError
from .format import json_safe, p_is, p_value, plural, seconds, share, si, signed_pct
from .store import Run, Store

DEFAULT_THRESHOLD = 0.05
DEFAULT_CONFIDENCE = 0.95

REGRESSION, IMPROVEMENT = "regression", "improvement"
WITHIN = "within threshold"  # significant, but smaller than the threshold
NOT_SIGNIFICANT = "not significant"
NOT_TESTABLE = "not testable"
VERDICTS = (REGRESSION, IMPROVEMENT, WITHIN, NOT_SIGNIFICANT, NOT_TESTABLE)

TEST_NAME = "Mann-Whitney U"
RUN_LEVEL_NOTE = (
    "repetitions of one run share its conditions (boot, memory layout, other load): a "
    "difference between two runs also holds run-to-run variation that no repetition sees; "
    "compare two runs of the same thing (A/A) on this machine to choose a threshold above it"
)


# ------------------------------------------------------------------ metrics


def dig(d, *keys):
    for k in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def _as_run(store: Store, run) -> Run:
    return run if isinstance(run, Run) else store.run(run)


def metrics(store: Store, run) -> dict[str, Metric]:
    """Every comparable metric of a run (a Run or a reference: id or 'last'),
    keyed by its stable name, in the order the run measured them."""
    run = _as_run(store, run)
    return dict(kinds.get(run.kind, run.id).load("metrics")(run, store.records(run.id)))


# --------------------------------------------------------------- comparison


@dataclass
class MetricComparison:
    metric: Metric  # run A's (name, unit, direction, group, label)
    a: Interval
    b: Interval
    values_a: list[float]
    values_b: list[float]
    change: float | None  # (median B - median A) / |median A|; inf when A is 0 and B is not
    ratio_ci: tuple[float, float] | None  # bootstrap interval of median B / median A
    p: float | None  # two-sided Mann-Whitney U; None when not testable
    q: float | None  # p adjusted over the testable metrics (Benjamini-Hochberg)
    method: str | None  # "exact", "exact with ties", "normal approximation"
    min_p: float  # the smallest p these values allow (in any split between the runs)
    verdict: str
    reason: str  # the verdict in words
    warnings: list[str] = field(default_factory=list)
    untestable_because: str | None = None  # "few repetitions", "identical values", "tied values"

    @property
    def name(self) -> str:
        return self.metric.name

    @property
    def testable(self) -> bool:
        return self.verdict != NOT_TESTABLE

    @property
    def significant(self) -> bool:
        return self.verdict in (REGRESSION, IMPROVEMENT, WITHIN)

    @property
    def worse(self) -> bool | None:
        """Whether B is worse than A by the medians (None when equal)."""
        da = self.b.median - self.a.median
        if da == 0:
            return None
        return (da < 0) if self.metric.direction == HIGHER else (da > 0)

    def to_dict(self) -> dict:
        m = self.metric
        return {
            "name": m.name,
            "group": m.group,
            "label": m.label,
            "unit": m.unit,
            "direction": m.direction,
            "a": {**self.a.to_dict(), "spread": relative_spread(self.values_a), "values": self.values_a},
            "b": {**self.b.to_dict(), "spread": relative_spread(self.values_b), "values": self.values_b},
            "change": self.change,
            "ratio_ci": (
                None
                if self.ratio_ci is None
                else {"low": self.ratio_ci[0], "high": self.ratio_ci[1], "method": "percentile bootstrap"}
            ),
            "p": self.p,
            "p_adjusted": self.q,
            "method": self.method,
            "min_p": self.min_p,
            "testable": self.testable,
            "significant": self.significant,
            "verdict": self.verdict,
            "not_testable_because": self.untestable_because,
            "reason": self.reason,
            "warnings": self.warnings,
        }


FUNCTIONS_NOTE = (
    "kernel functions: self time per op from the sampled stacks, each change tested against the sampling "
    "error alone (an exact binomial test on the two runs' samples, adjusted over the point's functions), "
    "not against run-to-run variation, which only the repetitions' metrics above test"
)


@dataclass
class PointFunctions:
    """One point both runs sampled: the kernel functions that changed most."""

    point: str
    a_samples: int
    b_samples: int
    changes: list[kstacks.FunctionChange]
    per: str = "op"  # each time per operation, or per run (a profile)

    def to_dict(self, alpha: float) -> dict:
        return {
            "point": self.point,
            "per": self.per,
            "a_samples": self.a_samples,
            "b_samples": self.b_samples,
            "functions": [
                {
                    "name": c.name,
                    "a_ns_per_op": c.a_ns,
                    "b_ns_per_op": c.b_ns,
                    "delta_ns_per_op": c.delta_ns,
                    "a_samples": c.a_samples,
                    "b_samples": c.b_samples,
                    "p": c.p,
                    "q": c.q,
                    "beyond_sampling_error": c.beyond_sampling_error(alpha),
                    "callers": c.callers,
                }
                for c in self.changes
            ],
        }


def _functions(store: Store, run_a: Run, run_b: Run) -> list[PointFunctions]:
    """Per point both runs sampled, the kernel functions that changed most."""
    kind = kinds.get(run_a.kind)
    if not kind.stacks:
        return []
    stacks = kind.load("stacks")
    a, b = stacks(run_a, store.records(run_a.id)), stacks(run_b, store.records(run_b.id))
    return [
        PointFunctions(
            point,
            sum(a[point].own.values()),
            sum(b[point].own.values()),
            kstacks.changed(a[point], b[point]),
            a[point].per,
        )  # fmt: skip
        for point in a
        if point in b
    ]


@dataclass
class FindingChange:
    """One finding of a study both runs re-ran: each run's figure and verdict."""

    id: str
    measure: str
    paper: str
    a_here: str
    a_verdict: str
    b_here: str
    b_verdict: str

    @property
    def changed(self) -> bool:
        return self.a_verdict != self.b_verdict

    def to_dict(self) -> dict:
        return {**self.__dict__, "changed": self.changed}


def _study_rows(store: Store, run: Run) -> dict[str, dict]:
    """A study run's verdicts by finding, as its kind's summary gives them
    (OSMark's rows, by probe, named the same way)."""
    summary = kinds.get(run.kind, run.id).load("analyze")(run, store.records(run.id))
    rows = getattr(summary, "study", None) or []
    out = {}
    for r in rows:
        key = r.get("id") or r.get("probe")
        out[key] = {
            "measure": r.get("measure") or r.get("paper_benchmark") or key,
            "paper": str(r.get("paper") or ""),
            "here": str(r.get("here") or r.get("today") or "not measured"),
            "verdict": r.get("verdict") or r.get("finding") or "cannot tell here",
        }
    return out


def _apart(a: Run, b: Run) -> list[str]:
    """What besides their kernel two runs differ in that moves a scaling
    figure: the machine, the environment, the workloads' sizes."""

    def env(run: Run) -> str:
        e = run.machine.get("environment")
        if not e:
            return "the host itself"
        how = [x for x in (e.get("accel"), f"{(e.get('shape') or {}).get('cpus')} vCPUs" if e.get("shape") else None)
               if x]  # fmt: skip
        return f"a {e['name']}" + (f" ({', '.join(how)})" if how else "")

    facts = {
        "host": lambda r: r.host,
        "CPU": lambda r: (r.machine.get("cpu") or {}).get("model_name"),
        "CPUs available": lambda r: (r.machine.get("topology") or {}).get("available"),
        "environment": env,
        "workload sizes": lambda r: ", ".join(
            f"{k} {v:,}" for k, v in sorted(((r.params or {}).get("sizes") or {}).items())
        ),
    }
    return [f"{what} {fact(a)} and {fact(b)}" for what, fact in facts.items() if fact(a) != fact(b)]


def _kernel_of(run: Run) -> tuple[str]:
    """The kernel a run measured, as a one-tuple: the one its study named, else its machine's release."""
    return ((run.params or {}).get("kernel") or (run.machine.get("kernel") or {}).get("release") or f"run {run.id}",)


def _findings(store: Store, run_a: Run, run_b: Run) -> list[FindingChange]:
    """Finding by finding, when both runs re-ran the same study: what each
    kernel (machine, environment) gave, changed verdicts first."""
    study = (run_a.params or {}).get("study")
    if not study or study != (run_b.params or {}).get("study"):
        return []
    a, b = _study_rows(store, run_a), _study_rows(store, run_b)
    entry = kinds.study(study)
    if entry.across:
        # the finding one run cannot tell, told by the two together: the same verdict on both sides
        row = entry.load("across")([_kernel_of(r) + (r.machine.get("environment"), store.records(r.id))
                                    for r in (run_a, run_b)], apart=_apart(run_a, run_b))  # fmt: skip
        both = {"measure": row["measure"], "paper": str(row["paper"]), "verdict": row["verdict"]}
        a[row["id"]] = {**both, "here": f"{row['here']} (runs {run_a.id} and {run_b.id} together: {row['reason']})"}
        b[row["id"]] = {**both, "here": a[row["id"]]["here"]}
    changes = [
        FindingChange(k, a[k]["measure"], a[k]["paper"], a[k]["here"], a[k]["verdict"], b[k]["here"], b[k]["verdict"])
        for k in a
        if k in b
    ]
    return sorted(changes, key=lambda f: not f.changed)


@dataclass
class Comparison:
    a: Run
    b: Run
    kind: str
    threshold: float
    confidence: float
    metrics: list[MetricComparison]
    only_a: list[str]
    only_b: list[str]
    machine_diff: list[dict]  # [{key, a, b}], most telling first
    params_diff: list[dict]
    load: dict  # {"a": {...}, "b": {...}}: the machine's state before each run
    notes: list[str]
    functions: list[PointFunctions] = field(default_factory=list)  # sampled kernel functions, where both sampled
    findings: list[FindingChange] = field(default_factory=list)  # a study both runs re-ran, finding by finding

    @property
    def tested(self) -> int:
        return sum(1 for m in self.metrics if m.testable)

    @property
    def regressions(self) -> list[MetricComparison]:
        return [m for m in self.metrics if m.verdict == REGRESSION]

    @property
    def improvements(self) -> list[MetricComparison]:
        return [m for m in self.metrics if m.verdict == IMPROVEMENT]

    def counts(self) -> dict[str, int]:
        return {v: sum(1 for m in self.metrics if m.verdict == v) for v in VERDICTS}

    def test_description(self) -> str:
        methods = sorted({m.method for m in self.metrics if m.method})
        how = f" ({', '.join(methods)})" if methods else ""
        return (
            f"two-sided {TEST_NAME} test over repetitions{how}; significant when the p-value adjusted "
            f"over the {plural(self.tested, 'testable metric')} (Benjamini-Hochberg; those whose values cannot "
            f"reach significance are left out, as Tarone's procedure does) is below "
            f"{p_value(1 - self.confidence)}; regression or improvement when also beyond "
            f"{share(self.threshold)} of run A's median"
        )

    def to_dict(self) -> dict:
        def run_dict(r: Run) -> dict:
            return {
                "run": r.id,
                "kind": r.kind,
                "status": r.status,
                "reason": r.reason,
                "started": r.started,
                "host": r.host,
                "kernel": dig(r.machine, "kernel", "release"),
                "cpu": dig(r.machine, "cpu", "model_name"),
            }

        counts = self.counts()
        doc = {
            "a": run_dict(self.a),
            "b": run_dict(self.b),
            "kind": self.kind,
            "threshold": self.threshold,
            "confidence": self.confidence,
            "test": {
                "name": TEST_NAME,
                "alternative": "two-sided",
                "over": "repetitions",
                "methods": sorted({m.method for m in self.metrics if m.method}),
                "adjustment": "Benjamini-Hochberg",
                "tested": self.tested,
                "min_repetitions": repetitions_for_test(self.confidence),
                "description": self.test_description(),
            },
            "summary": {
                "metrics": len(self.metrics),
                **{v.replace(" ", "_"): n for v, n in counts.items()},
                "regressed": [m.name for m in self.regressions],
                "improved": [m.name for m in self.improvements],
            },
            "metrics": [m.to_dict() for m in self.metrics],
            "only_in_a": self.only_a,
            "only_in_b": self.only_b,
            "machine": {"differences": self.machine_diff, "load": self.load},
            "params": {"differences": self.params_diff},
            "notes": self.notes,
            "functions": [pf.to_dict(1 - self.confidence) for pf in self.functions],
            "findings": [f.to_dict() for f in self.findings],
        }
        return json_safe(doc)


def _relative_change(a: float, b: float) -> float | None:
    if a == b:
        return 0.0
    if a == 0:
        return math.inf if b > 0 else -math.inf
    return (b - a) / abs(a)


def _compare_metric(ma: Metric, mb: Metric, confidence: float) -> MetricComparison:
    a, b = median_ci(ma.values, confidence), median_ci(mb.values, confidence)
    alpha = 1.0 - confidence
    n_a, n_b = len(ma.values), len(mb.values)
    min_p = min_two_sided_p_given(ma.values, mb.values)
    mc = MetricComparison(
        ma,
        a,
        b,
        list(ma.values),
        list(mb.values),
        _relative_change(a.median, b.median),
        bootstrap_ratio_ci(ma.values, mb.values, confidence) if a.median else None,
        None,
        None,
        None,
        min_p,
        NOT_TESTABLE,
        "",
    )
    if min_two_sided_p(n_a, n_b) > alpha:
        mc.untestable_because = "few repetitions"
        need = repetitions_for_test(confidence)
        mc.reason = (
            f"not testable with n={n_a} and n={n_b}: the smallest two-sided p-value possible is "
            f"{p_value(min_two_sided_p(n_a, n_b))}, above {p_value(alpha)}; at least {need} repetitions in "
            f"each run are needed (more to detect anything short of a complete separation)"
        )
    elif len(set(ma.values) | set(mb.values)) == 1:
        mc.untestable_because = "identical values"
        mc.reason = (
            f"not testable: every repetition of both runs measured exactly "
            f"{fmt_value(a.median, ma.unit)}, so no test can tell the runs apart"
        )
    elif min_p > alpha:
        mc.untestable_because = "tied values"
        mc.reason = (
            f"not testable with n={n_a} and n={n_b}: so many repetitions measured the same value "
            f"(a quantised figure) that the smallest two-sided p-value possible is {p_value(min_p)}, "
            f"above {p_value(alpha)}; more repetitions are needed"
        )
    else:
        t = mann_whitney(ma.values, mb.values)
        mc.p, mc.method = t.p, t.method
    wide = [side for side, m in (("A", ma), ("B", mb)) if relative_spread(m.values) > SPREAD_LIMIT]
    if wide:
        who = "both runs'" if len(wide) == 2 else f"{wide[0]}'s"
        mc.warnings.append(f"{who} repetitions spread more than {share(SPREAD_LIMIT)} (max − min over median)")
    return mc


def _decide(mc: MetricComparison, confidence: float, threshold: float) -> None:
    """The verdict of a testable metric, once its adjusted p-value is known."""
    alpha = 1.0 - confidence
    if mc.q is None:
        return
    change = mc.change
    beyond = change is not None and abs(change) > threshold
    if mc.q >= alpha:
        mc.verdict = NOT_SIGNIFICANT
        mc.reason = (
            f"not significant (p {p_is(mc.p)}, adjusted {p_value(mc.q)} ≥ {p_value(alpha)}): the difference is "
            f"within the repetitions' noise"
        )
    elif not beyond or mc.worse is None:
        mc.verdict = WITHIN
        mc.reason = (
            f"significant (adjusted p {p_is(mc.q)}) but {signed_pct(change)} is within the {share(threshold)} threshold"
        )
    else:
        mc.verdict = REGRESSION if mc.worse else IMPROVEMENT
        better = "higher" if mc.metric.direction == HIGHER else "lower"
        mc.reason = (
            f"{mc.verdict}: {signed_pct(change)} ({better} is better), significant (adjusted "
            f"p {p_is(mc.q)}), beyond the {share(threshold)} threshold"
        )


def compare(
    store: Store, ref_a, ref_b, threshold: float = DEFAULT_THRESHOLD, confidence: float = DEFAULT_CONFIDENCE
) -> Comparison:
    """Run B against run A, metric by metric."""
    if not 0.0 < confidence < 1.0:
        raise UsageError(f"confidence must be between 0 and 1, not {confidence}")
    if not (threshold >= 0.0 and math.isfinite(threshold)):
        raise UsageError(f"threshold must be a finite fraction ≥ 0, not {threshold}")
    run_a, run_b = _as_run(store, ref_a), _as_run(store, ref_b)
    if run_a.kind != run_b.kind:
        raise UsageError(
            f"run {run_a.id} is a {run_a.kind} run and run {run_b.id} a {run_b.kind} run: "
            "only runs of the same kind can be compared"
        )
    ma, mb = metrics(store, run_a), metrics(store, run_b)
    common = [name for name in ma if name in mb]
    findings = _findings(store, run_a, run_b)
    if not common and not findings:
        raise UsageError(
            f"runs {run_a.id} and {run_b.id} have no metric in common "
            f"({few(list(ma)) or 'run ' + str(run_a.id) + ' measured nothing'}; "
            f"{few(list(mb)) or 'run ' + str(run_b.id) + ' measured nothing'})"
        )
    compared = [_compare_metric(ma[n], mb[n], confidence) for n in common]
    testable = [m for m in compared if m.p is not None]
    for m, q in zip(testable, adjust_fdr([m.p for m in testable])):
        m.q = q
        _decide(m, confidence, threshold)

    notes = []
    if run_a.id == run_b.id:
        notes.append(f"run {run_a.id} is compared with itself")
    for r in (run_a, run_b):
        if r.status != "complete":
            notes.append(
                f"run {r.id} is {r.status}"
                + (f" ({r.reason})" if r.reason else "")
                + ": its figures cover only what was measured"
            )
    if not kinds.get(run_a.kind, run_a.id).repeated:
        notes.append(kinds.get(run_a.kind).once)
    elif not testable and any(m.untestable_because == "few repetitions" for m in compared):
        notes.append(
            f"no metric could be tested: at least {repetitions_for_test(confidence)} repetitions in "
            f"each run are needed for the {TEST_NAME} test to reach {confidence:.0%} confidence"
        )
    narrow = [iv for m in compared for iv in (m.a, m.b) if iv.n > 1 and iv.coverage < confidence]
    if narrow:
        worst = min(narrow, key=lambda iv: iv.coverage)
        notes.append(
            f"with {worst.n} repetitions a median's interval is the range of the values and covers the "
            f"median with {worst.coverage:.0%} confidence, not {confidence:.0%} "
            f"({repetitions_needed(confidence)} repetitions are needed)"
        )
    if any(m.significant for m in compared):
        notes.append(RUN_LEVEL_NOTE)
    functions = _functions(store, run_a, run_b)
    if functions:
        notes.append(FUNCTIONS_NOTE)
    studies = {(r.params or {}).get("study") for r in (run_a, run_b)}
    if len(studies) > 1 and None not in studies:
        notes.append(f"runs {run_a.id} and {run_b.id} re-ran different studies ({' and '.join(sorted(studies))}): "
                     "their findings are not set side by side")  # fmt: skip
    return Comparison(
        run_a,
        run_b,
        run_a.kind,
        threshold,
        confidence,
        compared,
        only_a=[n for n in ma if n not in mb],
        only_b=[n for n in mb if n not in ma],
        machine_diff=_machine_diff(run_a, run_b),
        params_diff=_diff(run_a.params, run_b.params),
        load={"a": _load(run_a.machine), "b": _load(run_b.machine)},
        notes=notes,
        functions=functions,
        findings=findings,
    )


def exit_status(comparison: Comparison, fail_on_regression: bool) -> int:
    """1 when asked to fail on a regression and there is a significant one
    beyond the threshold, else 0."""
    return 1 if fail_on_regression and comparison.regressions else 0


_THRESHOLD_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(%?)\s*$")


def parse_threshold(text: str) -> float:
    """'5%', '5 %' or '0.05' -> 0.05. A bare number must be a fraction below
    1 ('5' could mean 5 % or 500 %)."""
    m = _THRESHOLD_RE.match(str(text))
    if not m:
        raise UsageError(f"bad threshold {text!r}: expected a percentage like 5% or a fraction like 0.05")
    value = float(m.group(1))
    if m.group(2):
        value /= 100.0
    elif value >= 1.0:
        raise UsageError(
            f"ambiguous threshold {text!r}: write {m.group(1)}% for a percentage, or a fraction below 1 like 0.05"
        )
    if not math.isfinite(value):
        raise UsageError(f"bad threshold {text!r}: not a finite number")
    return value


def parse_percent(text: str) -> float:
    """--threshold-pct: '5' or '5%' -> 0.05 (the unit is in the option's name)."""
    m = _THRESHOLD_RE.match(str(text))
    value = float(m.group(1)) / 100.0 if m else float("nan")
    if not (math.isfinite(value) and 0 <= value):
        raise UsageError(f"--threshold-pct: {text!r} is not a percentage like 5")
    return value


# ---------------------------------------------------------- machine and params

# Volatile state rather than configuration: shown apart (load), or not at all.
_VOLATILE = ("load.", "cpu.cpuinfo_mhz.")
# What most often explains a difference, first.
_FIRST = (
    "host",
    "kernel.release",
    "kernel.version",
    "cpu.model_name",
    "cpu.frequency.",
    "cpu.turbo",
    "cpu.smt",
    "kernel.cmdline",
    "kernel.mitigations.",
    "kernel.preemption.",
    "kernel.clocksource.",
    "kernel.thp.",
    "virt.vm",
    "virt.container",
    "cpu.online_cpus",
    "topology.",
    "cpu.topology.",
    "software.",
    "cpu.cpuidle.",
)


def _flatten(d, prefix: str = "") -> dict[str, object]:
    out = {}
    if isinstance(d, dict) and d:
        for k, v in d.items():
            out.update(_flatten(v, f"{prefix}{k}."))
    else:
        out[prefix[:-1]] = d
    return out


def _rank(key: str) -> tuple[int, str]:
    for i, p in enumerate(_FIRST):
        if key == p or (p.endswith(".") and key.startswith(p)):
            return i, key
    return len(_FIRST), key


def _diff(a: dict | None, b: dict | None, ignore: tuple[str, ...] = ()) -> list[dict]:
    fa, fb = _flatten(a or {}), _flatten(b or {})
    keys = [k for k in {**fa, **fb} if not any(k.startswith(p) for p in ignore)]
    missing = "(absent)"
    return [
        {"key": k, "a": fa.get(k, missing), "b": fb.get(k, missing)}
        for k in sorted(keys, key=_rank)
        if fa.get(k, missing) != fb.get(k, missing)
    ]


def _machine_diff(a: Run, b: Run) -> list[dict]:
    return _diff({"host": a.host, **(a.machine or {})}, {"host": b.host, **(b.machine or {})}, _VOLATILE)


def _load(machine: dict | None) -> dict:
    load = (machine or {}).get("load") or {}
    return {
        "busy_share": load.get("busy_share"),
        "steal_share": load.get("steal_share"),
        "loadavg_1min": dig(load, "loadavg", "1min"),
        "tasks_running": load.get("tasks_running"),
    }


# ------------------------------------------------------------------- render


def few(names: list[str], k: int = 3) -> str:
    return ", ".join(names[:k]) + (f" and {len(names) - k} more" if len(names) > k else "")


def fmt_value(x: float | None, unit: str) -> str:
    if x is None or not math.isfinite(x):
        return "–"
    if unit == "ns":
        return seconds(x / 1e9)
    if unit == "s":
        return seconds(x)
    if unit == "share":
        return share(x)
    if unit in ("ops/s", "/s"):
        return f"{si(x)}/s"
    return si(x)


# ------------------------------------------------------------ many runs


@dataclass
class ManyComparison:
    """Runs B, C, … each against baseline A, metric by metric: every test of
    every run adjusted together (Benjamini-Hochberg over all of them), so
    that comparing more runs does not find more changes by chance."""

    baseline: Run
    others: list[Run]
    kind: str
    threshold: float
    confidence: float
    # metric name -> the comparison of each other run (None: that run did not measure it)
    rows: dict[str, list[MetricComparison | None]]
    notes: list[str] = field(default_factory=list)

    @property
    def regressions(self) -> list[MetricComparison]:
        return [m for row in self.rows.values() for m in row if m is not None and m.verdict == REGRESSION]

    def to_dict(self) -> dict:
        def run_dict(r: Run) -> dict:
            return {"run": r.id, "status": r.status, "started": r.started, "host": r.host, "tags": r.tags,
                    "kernel": dig(r.machine, "kernel", "release")}  # fmt: skip

        metrics = []
        for name, row in self.rows.items():
            first = next(m for m in row if m is not None)
            metrics.append(
                {
                    "metric": name,
                    "unit": first.metric.unit,
                    "direction": first.metric.direction,
                    "baseline": first.a.to_dict(),
                    "vs": [
                        None if m is None else {
                            "run": r.id, **m.b.to_dict(), "change": m.change, "p": m.p, "q": m.q,
                            "verdict": m.verdict, "reason": m.reason,
                        }
                        for r, m in zip(self.others, row)
                    ],
                }
            )  # fmt: skip
        return json_safe(
            {
                "kind": self.kind,
                "baseline": run_dict(self.baseline),
                "runs": [run_dict(r) for r in self.others],
                "threshold": self.threshold,
                "confidence": self.confidence,
                "test": f"{TEST_NAME}, two-sided; Benjamini-Hochberg over every metric of every run",
                "metrics": metrics,
                "counts": {
                    v: sum(1 for row in self.rows.values() for m in row if m and m.verdict == v) for v in VERDICTS
                },  # fmt: skip
                "notes": self.notes,
            }
        )


def compare_many(
    store: Store, refs: list, threshold: float = DEFAULT_THRESHOLD, confidence: float = DEFAULT_CONFIDENCE
) -> ManyComparison:
    """Each run after the first against the first, metric by metric."""
    if not 0.0 < confidence < 1.0:
        raise UsageError(f"confidence must be between 0 and 1, not {confidence}")
    runs = [_as_run(store, r) for r in refs]
    base, others = runs[0], runs[1:]
    odd = [r for r in others if r.kind != base.kind]
    if odd:
        raise UsageError(
            f"run {base.id} is a {base.kind} run and run {odd[0].id} a {odd[0].kind} run: "
            "only runs of the same kind can be compared"
        )
    if len({r.id for r in runs}) != len(runs):
        raise UsageError("a run is named twice")
    mbase = metrics(store, base)
    mothers = [metrics(store, r) for r in others]
    names = [n for n in mbase if any(n in m for m in mothers)]
    if not names:
        raise UsageError(f"run {base.id} has no metric in common with any of runs "
                         f"{', '.join(str(r.id) for r in others)}")  # fmt: skip
    rows = {n: [_compare_metric(mbase[n], m[n], confidence) if n in m else None for m in mothers] for n in names}
    testable = [m for row in rows.values() for m in row if m is not None and m.p is not None]
    for m, q in zip(testable, adjust_fdr([m.p for m in testable])):
        m.q = q
        _decide(m, confidence, threshold)
    notes = [f"run {r.id} is {r.status}: its figures cover only what was measured" for r in runs
             if r.status != "complete"]  # fmt: skip
    if not kinds.get(base.kind, base.id).repeated:
        notes.append(kinds.get(base.kind).once)
    elif not testable:
        notes.append(f"no metric could be tested: at least {repetitions_for_test(confidence)} repetitions in "
                     f"each run are needed for the {TEST_NAME} test to reach {confidence:.0%} confidence")  # fmt: skip
    missing = [(r.id, n) for n, row in rows.items() for r, m in zip(others, row) if m is None]
    if missing:
        notes.append(f"{plural(len(missing), 'figure')} of a metric the baseline measured are missing from a run "
                     "that did not measure it (shown as –)")  # fmt: skip
    if any(m.significant for row in rows.values() for m in row if m is not None):
        notes.append(RUN_LEVEL_NOTE)
    return ManyComparison(base, others, base.kind, threshold, confidence, rows, notes)


def exit_status_many(comparison: ManyComparison, fail_on_regression: bool) -> int:
    return 1 if fail_on_regression and comparison.regressions else 0
