"""The kernel-scalability study (Luo et al., MOSBENCH and PHOENIX on Linux
2.6.32 and 4.10, 1 to 48 cores) re-run as one `appscale` run of several
applications (plan/kernels.py): each finding set beside what they did here.

The paper's findings span 1 to 48 cores; a smaller machine can still tell
some of them. A loss of scaling or a growth already seen at a few CPUs is
seen at 48 too, so it agrees (or, for a claim that something stays flat or
near-linear, differs); a maximum speedup already above the paper's bound
over the CPUs here is above it over 48 as well. What holds up to the CPUs
here — near-linear, flat — is no evidence for 48: "cannot tell here", with
the figure measured and what would tell. A figure is the median of the
repetitions with its order-statistic interval; speedup is measured in
runs per second, so its interval is the rate's."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, replace

from ..studies import load
from ..studies.verdict import AGREES, CANNOT_TELL, DIFFERS, NEAR_LINEAR, NUMBER_BAND, Measured, Verdict, judge
from .stats import median_ci

STUDY = "luo-kernels"
CONFIDENCE = 0.95
PAPER_CORES = 48  # the paper's machines: 48-core Opteron (and a 64-core Xeon, used up to 48)

# the findings' workloads, as this study names its applications
APP_OF = {
    "psearchy_threads_scale_badly": "psearchy-threads",
    "psearchy_speedup_48": "psearchy-processes",  # the paper does not say which mode; MOSBENCH's runs processes
    "gmake_max_speedup": "gmake",
    "gmake_original_claim": "gmake",
    "gmake_user_time_flat": "gmake",
    "gmake_sys_time_grows": "gmake",
    "near_linear_benchmarks": "strmatch",
    "max_speedup_le8_lreg": "linreg",
    "max_speedup_le8_mmult": "matmul",
    "max_speedup_le8_pca": "pca",
}
PHOENIX = ("kmeans", "wordcount", "linreg", "matmul", "pca", "strmatch")
PARSEC = ("dedup", "streamcluster", "ferret", "blackscholes")
# claims that something is present (seen at a few CPUs, it is there at 48) and claims of an absence
PRESENCE = ("grows_with_cores", "decreases_with_cores", "does_not_scale")
ABSENCE = ("flat_with_cores", "near_linear")

EMULATED = "measured in a guest QEMU emulated (TCG): its timings are the emulator's, not the kernel's"
ONE_KERNEL = (
    "one run measures one kernel: `study kernels --kernels IMAGE,IMAGE` runs the study in a guest of each (where "
    "this host's KVM boots them), or run it under each kernel and `oslens compare A B` the runs"
)


def _by_app(records: list[dict]) -> dict[str, dict[int, list[dict]]]:
    """app -> CPU count -> the repetitions that ended ok."""
    out: dict[str, dict[int, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        if r.get("type") == "point" and r.get("status") == "ok":
            out[r.get("app", "")][r["n"]].append(r)
    return out


def _series(reps: dict[int, list[dict]], value) -> list[tuple[int, float, float, float]]:
    """(CPUs, median, low, high) of value(rep) at each count with two repetitions or more."""
    out = []
    for n in sorted(reps):
        xs = [x for r in reps[n] if (x := value(r)) is not None]
        if len(xs) >= 2:
            iv = median_ci(xs, CONFIDENCE)
            out.append((n, iv.median, iv.low, iv.high))
    return out


def _rate(r: dict) -> float | None:
    return 1e9 / r["wall_ns"] if r.get("wall_ns") else None


def _speedups(series: list[tuple[int, float, float, float]]) -> list[tuple[int, float, float, float]]:
    """Runs per second as speedup against the first count: the interval's ends set against the first's opposite ends."""
    _, v0, lo0, hi0 = series[0]
    return [(n, v / v0, lo / hi0, hi / lo0) for n, v, lo, hi in series]


def _efficiency_at_top(series) -> tuple[int, float, float, float]:
    (c0, *_), (cn, v, lo, hi) = series[0], _speedups(series)[-1]
    k = c0 / cn
    return cn, v * k, lo * k, hi * k


def _failed_by_app(records: list[dict]) -> dict[str, list[dict]]:
    """app -> its repetitions that did not end ok (a failed point is run, not left out)."""
    out: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        if r.get("type") == "point" and r.get("status") != "ok":
            out[r.get("app", "")].append(r)
    return out


def _ended(r: dict) -> str:
    if r.get("how") == "prepare":
        return f"its untimed preparation exited with status {r.get('code')}"
    if r.get("signal") is not None:
        return f"was killed by signal {r['signal']}"
    if r.get("how") == "time_limit":
        return "was stopped at the time limit"
    return f"exited with status {r.get('code')}"


def _not_run(app: str, params: dict, failed: dict[str, list[dict]] | None = None) -> str:
    """Why an application has no repetition that ended ok: every one failed, or it was left out."""
    if failed and failed.get(app):
        reps = failed[app]
        return (f"{app} failed: none of its {len(reps)} repetition{'s' if len(reps) > 1 else ''} ended ok (the "
                f"first {_ended(reps[0])}), so nothing was measured")  # fmt: skip
    why = (params.get("skipped") or {}).get(app)
    if why:
        return f"{app} was not run: {why}"
    return f"{app} was not run in this study run (--apps)"


def _few(app: str) -> str:
    return f"{app}: a series needs two repetitions at two CPU counts or more (run the study with --reps 3)"


def _bounded(v: Verdict, relation: str, top: int) -> Verdict:
    """A verdict from CPUs up to `top` < 48 kept only where it carries to 48."""
    if top >= PAPER_CORES:
        return v
    if (relation in PRESENCE and v.verdict == DIFFERS) or (relation in ABSENCE and v.verdict == AGREES):
        v.reason = (
            f"so up to {top} CPUs ({v.reason}); the paper's finding spans 1 to {PAPER_CORES} cores, where more CPUs "
            "than this machine's could tell"
        )
        v.verdict = CANNOT_TELL
    return v


def _trend(f, app: str, reps: dict, params: dict) -> Verdict:
    """A finding on a series against cores: its speedup, or its user or system time."""
    op, _ = f.test
    if f.unit == "s":
        field = "user_ns" if "user" in f.measure else "system_ns"
        series = _series(reps, lambda r: r[field] / 1e9 if r.get(field) is not None else None)
        what = f"{app}: {field[:-3]} time, s, against CPUs"
    else:
        series = _series(reps, _rate)
        what = f"{app}: runs per second against CPUs"
    if len(series) < 2:
        return Verdict(f.id, f.paper_text(), "not measured", CANNOT_TELL, _few(app))
    v = judge(f, Measured(series=series, text=what, n=min(len(reps[n]) for n, *_ in series)))
    if f.unit != "s":  # runs per second, as people read them: speedup against the first count
        v.here = ", ".join(f"{n}: {s:.2f}×" for n, s, _, _ in _speedups(series))
    return _bounded(v, op, series[-1][0])


def _speedup_figure(f, app: str, reps: dict) -> Verdict:
    """A speedup figure or bound of the paper's, at 48 cores or the largest
    over 1..48: with 48 CPUs measured, set beside it; with fewer, a largest
    speedup already above the paper's is above it over 48 as well, and
    anything else needs 48 CPUs to tell."""
    series = _series(reps, _rate)
    if len(series) < 2 or f.number is None:
        return Verdict(f.id, f.paper_text(), "not measured", CANNOT_TELL, _few(app))
    largest = "maximum" in f.measure.lower()
    speedups = _speedups(series)
    n, v, lo, hi = max(speedups, key=lambda s: s[1]) if largest else speedups[-1]
    top = series[-1][0]
    what = f"{app}: the largest speedup, at {n} CPUs of {top}" if largest else f"{app}: speedup at {n} CPUs"
    bare = replace(f, relation="")  # '<=8' in the value says the bound
    v = judge(bare, Measured(v, lo, hi, CONFIDENCE, text=what))
    if top >= PAPER_CORES and (largest or n == PAPER_CORES):
        return v
    q, x = f.number
    bound = x if q in ("<", "<=") else x * NUMBER_BAND
    if largest and lo > bound:
        v.verdict, v.reason = DIFFERS, f"already above {x:g}× over {top} CPUs, so above it over {PAPER_CORES} too"
        return v
    v.verdict = CANNOT_TELL
    figure = "the largest speedup over" if largest else "speedup at"
    v.reason = f"{figure} {PAPER_CORES} cores needs {PAPER_CORES} CPUs; this run went to {top}"
    return v


def _efficiencies(by_app, apps) -> dict[str, tuple[int, float, float, float]]:
    out = {}
    for app in apps:
        series = _series(by_app.get(app, {}), _rate)
        if len(series) >= 2:
            out[app] = _efficiency_at_top(series)
    return out


def _eff_text(app: str, e) -> str:
    return f"{app} {e[1]:.0%} ({e[2]:.0%}–{e[3]:.0%}) at {e[0]} CPUs"


def _most_sublinear(f, by_app) -> Verdict:
    effs = _efficiencies(by_app, PHOENIX)
    if not effs:
        return Verdict(f.id, f.paper_text(), "not measured", CANNOT_TELL, _few("the PHOENIX kernels"))
    below = [a for a, e in effs.items() if e[3] < NEAR_LINEAR]
    here = "; ".join(_eff_text(a, e) for a, e in effs.items())
    top = max(e[0] for e in effs.values())
    why = f"{len(below)} of {len(effs)} PHOENIX kernels below {NEAR_LINEAR:.0%} efficiency, wholly"
    if len(below) * 2 > len(effs):
        return Verdict(f.id, f.paper_text(), here, AGREES, why, CONFIDENCE)
    if top >= PAPER_CORES:
        return Verdict(f.id, f.paper_text(), here, DIFFERS, why, CONFIDENCE)
    return Verdict(f.id, f.paper_text(), here, CANNOT_TELL,
                   f"{why}, up to {top} CPUs; the paper's loss may lie between {top} and {PAPER_CORES} "
                   "cores")  # fmt: skip


def _rr_beats_seq(f, by_app, params, failed) -> Verdict:
    rr, seq = "psearchy-processes-rr", "psearchy-processes"
    effs = _efficiencies(by_app, (rr, seq))
    for app in (rr, seq):
        if app not in by_app:
            return Verdict(f.id, f.paper_text(), "not measured", CANNOT_TELL, _not_run(app, params, failed))
        if app not in effs:
            return Verdict(f.id, f.paper_text(), "not measured", CANNOT_TELL, _few(app))
    a, b = effs[rr], effs[seq]
    here = f"{_eff_text(rr, a)}; {_eff_text(seq, b)}"
    if a[2] > b[3]:
        return Verdict(f.id, f.paper_text(), here, AGREES, "round robin's interval lies wholly above", CONFIDENCE)
    if a[3] < b[2]:
        return Verdict(f.id, f.paper_text(), here, DIFFERS, "round robin's interval lies wholly below", CONFIDENCE)
    return Verdict(f.id, f.paper_text(), here, CANNOT_TELL, "the intervals overlap: more repetitions could tell")


def _obstacles(f, by_app) -> Verdict:
    effs = _efficiencies(by_app, list(by_app))
    lost = {a: e for a, e in effs.items() if e[3] < NEAR_LINEAR}
    if lost:
        return Verdict(f.id, f.paper_text(), "; ".join(_eff_text(a, e) for a, e in lost.items()), AGREES,
                       f"{len(lost)} of {len(effs)} applications lose more than {1 - NEAR_LINEAR:.0%} of "
                       "their efficiency, wholly", CONFIDENCE)  # fmt: skip
    if not effs:
        return Verdict(f.id, f.paper_text(), "not measured", CANNOT_TELL, _few("every application"))
    top = max(e[0] for e in effs.values())
    return Verdict(f.id, f.paper_text(), f"no application lost scaling up to {top} CPUs", CANNOT_TELL,
                   f"the paper's obstacles may lie between {top} and {PAPER_CORES} cores")  # fmt: skip


def beside(summary, run, records) -> list[dict]:
    """The study's entry in the registry of kinds: one verdict per finding."""
    params = run.params or {}
    by_app = _by_app(records)
    failed = _failed_by_app(records)
    emulated = _emulated((getattr(run, "machine", None) or {}).get("environment"))
    rows = []
    for f in load(STUDY):
        app = APP_OF.get(f.id)
        words = f.workload.lower()
        if f.id == "kernels_no_improvement":
            v = Verdict(f.id, f.paper_text(), "not measured", CANNOT_TELL, ONE_KERNEL)
        elif f.id == "most_sublinear":
            v = _most_sublinear(f, by_app)
        elif f.id == "psearchy_rr_beats_seq":
            v = _rr_beats_seq(f, by_app, params, failed)
        elif f.id == "linux_scalability_obstacles":
            v = _obstacles(f, by_app)
        elif app is None and any(p in words for p in PARSEC):
            v = Verdict(f.id, f.paper_text(), "not measured", CANNOT_TELL,
                        "PARSEC (dedup, streamcluster, ferret, blackscholes) is not packaged by Debian: oslens does "
                        "not run it")  # fmt: skip
        elif app is None:
            v = Verdict(f.id, f.paper_text(), "not measured", CANNOT_TELL, "not measured by `study kernels` yet")
        elif app not in by_app:
            v = Verdict(f.id, f.paper_text(), "not measured", CANNOT_TELL, _not_run(app, params, failed))
        elif f.test[0] in PRESENCE + ABSENCE:
            v = _trend(f, app, by_app[app], params)
        else:
            v = _speedup_figure(f, app, by_app[app])
        if emulated and v.verdict != CANNOT_TELL:
            v.reason = f"{EMULATED} (as measured: {v.verdict}, {v.reason})"
            v.verdict = CANNOT_TELL
        rows.append({**v.to_dict(), "part": f.source, "measure": f"{f.measure} ({f.workload})"})
    return rows


def _emulated(env: dict | None) -> bool:
    """A guest QEMU emulated (TCG): what it times is the emulator."""
    return bool(env) and env.get("name") == "kvm" and env.get("accel") != "kvm"


# Two kernels' scalability differs negligibly when, for every application
# both ran, the ratio of their speedups at the most CPUs both ran lies within
# this share of 1 (the paper's "negligible", made a number: the band of a flat series).
NEGLIGIBLE = 0.10


@dataclass(frozen=True)
class _Ratio:
    """One application's speedup under kernel b over its speedup under kernel a,
    from `base` to `top` CPUs (the smallest and largest counts both ran)."""

    app: str
    base: int
    top: int
    a: str
    b: str
    rates: tuple[list[float], list[float], list[float], list[float]]  # a at base, a at top, b at base, b at top

    def interval(self, confidence: float) -> tuple[float, float, float, float]:
        """(ratio, low, high, coverage): each of the four medians at
        `confidence`, the ends set against the opposite ends; the coverage is
        the product of the four (independent samples)."""
        ab, at, bb, bt = (median_ci(x, confidence) for x in self.rates)
        ratio = (bt.median / bb.median) / (at.median / ab.median)
        low = (bt.low / bb.high) / (at.high / ab.low)
        high = (bt.high / bb.low) / (at.low / ab.high)
        return ratio, low, high, ab.coverage * at.coverage * bb.coverage * bt.coverage


def _rates(records: list[dict]) -> dict[str, dict[int, list[float]]]:
    """app -> CPU count -> runs per second of the repetitions that ended ok."""
    return {app: {n: [x for r in rs if (x := _rate(r)) is not None] for n, rs in reps.items()}
            for app, reps in _by_app(records).items()}  # fmt: skip


def _ratios(runs: list[tuple[str, dict | None, list[dict]]]) -> list[_Ratio]:
    """Each kernel against the first, for every application both ran at two
    counts or more with two repetitions each."""
    (a, _, first), out = runs[0], []
    rates_a = _rates(first)
    for b, _, records in runs[1:]:
        rates_b = _rates(records)
        for app in sorted(set(rates_a) & set(rates_b)):
            ra, rb = rates_a[app], rates_b[app]
            counts = sorted(n for n in set(ra) & set(rb) if len(ra[n]) >= 2 and len(rb[n]) >= 2)
            if len(counts) >= 2:
                lo, hi = counts[0], counts[-1]
                out.append(_Ratio(app, lo, hi, a, b, (ra[lo], ra[hi], rb[lo], rb[hi])))
    return out


def _largest(told: list[tuple[_Ratio, tuple[float, float, float, float]]]) -> str:
    """The speedup ratio furthest from 1, in words."""
    r, (ratio, low, high, _) = max(told, key=lambda t: abs(t[1][0] - 1))
    here = (f"{r.app}, {r.base} to {r.top} CPUs: speedup under {r.b} is {ratio:.2f}× that under {r.a} "
            f"[{low:.2f}–{high:.2f}]")  # fmt: skip
    return here + (f"; the largest of {len(told)} ratios" if len(told) > 1 else "")


def across_kernels(
    runs: list[tuple[str, dict | None, list[dict]]], not_run: list[str] = (), apart: list[str] = ()
) -> dict:
    """The finding that needs several kernels ("kernel versions barely change
    scalability") judged from study runs, one per kernel: (its kernel's
    name, the environment it ran in or None, its records). For every
    application, each kernel's speedup from the smallest to the largest
    count it shares with the first kernel's run, as a ratio with its
    interval; agrees when every ratio lies within NEGLIGIBLE of 1, differs
    when one lies wholly outside. The intervals are Bonferroni's: all of
    them together cover with CONFIDENCE, or the verdict cannot tell and
    says how many repetitions would. Cannot tell either from runs of one
    kernel, runs that differ in more than their kernel (`apart`: what else,
    as `compare` finds it), or a guest emulated by QEMU, which times QEMU.
    not_run: why the kernels given and not run were not ("NAME: …")."""
    (f,) = [x for x in load(STUDY) if x.id == "kernels_no_improvement"]
    out = {"part": f.source, "measure": f"{f.measure} ({f.workload})", "kernels": [name for name, _, _ in runs]}

    def verdict(here: str, v: str, reason: str, confidence: float | None = None) -> dict:
        return {**Verdict(f.id, f.paper_text(), here, v, reason, confidence).to_dict(), **out}

    if len(runs) < 2:
        return verdict("not measured", CANNOT_TELL, "; ".join(not_run) if not_run else ONE_KERNEL)
    names = [name for name, _, _ in runs]
    # a kernel given twice (an A/A check) is told apart by its place
    runs = [(f"{name} (#{i + 1})" if names.count(name) > 1 else name, env, recs) for i, (name, env, recs) in
            enumerate(runs)]  # fmt: skip
    ratios = _ratios(runs)
    m = len(ratios)
    each = 1 - (1 - CONFIDENCE) / (4 * m) if m else CONFIDENCE  # Bonferroni: four medians per ratio
    told = [(r, r.interval(each)) for r in ratios]
    here = _largest(told) if told else "not measured"
    emulated = [name for name, env, _ in runs if _emulated(env)]
    if len(set(names)) < len(names):
        return verdict(here, CANNOT_TELL, f"the same kernel ran more than once ({', '.join(sorted(set(names)))}): "
                       "an A/A check of the method, not a comparison of kernels")  # fmt: skip
    if apart:
        return verdict(here, CANNOT_TELL, f"the runs differ in more than their kernel: {'; '.join(apart)}")
    if emulated:
        return verdict(here, CANNOT_TELL, f"{', '.join(emulated)} {EMULATED}; a host whose KVM boots these "
                       "kernels can tell")  # fmt: skip
    if not told:
        return verdict(here, CANNOT_TELL, "no application ran at two CPU counts with two repetitions each under "
                       "two kernels (run with --reps 3)")  # fmt: skip
    together = 1 - sum(1 - c for _, (_, _, _, c) in told)
    if together < CONFIDENCE:
        # the (min, max) of n values covers a median with 1 - 2^(1-n)
        reps = math.ceil(1 + math.log2(4 * m / (1 - CONFIDENCE)))
        return verdict(here, CANNOT_TELL, f"{m} speedup ratio{'s' if m > 1 else ''} of four medians each cover "
                       f"together with {max(together, 0):.0%} confidence, not {CONFIDENCE:.0%}: {reps} repetitions "
                       "would tell")  # fmt: skip
    lo_band, hi_band = 1 - NEGLIGIBLE, 1 / (1 - NEGLIGIBLE)
    band = f"{lo_band:.2f}–{hi_band:.2f} (the band of a negligible difference)"
    outside = [(r, iv) for r, iv in told if iv[2] < lo_band or iv[1] > hi_band]
    inside = [(r, iv) for r, iv in told if lo_band <= iv[1] and iv[2] <= hi_band]
    if outside:
        r, iv = max(outside, key=lambda t: abs(t[1][0] - 1))
        return verdict(here, DIFFERS, f"{len(outside)} of {m} speedup ratios lie wholly outside {band}, most "
                       f"{r.app} ({iv[0]:.2f}×, {r.b} against {r.a})", together)  # fmt: skip
    if len(inside) < m:
        return verdict(here, CANNOT_TELL, f"{m - len(inside)} of {m} speedup ratios straddle an edge of {band}: "
                       "more repetitions could tell", together)  # fmt: skip
    return verdict(here, AGREES, f"every speedup ratio's interval lies within {band}", together)
