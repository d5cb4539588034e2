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

from collections import defaultdict
from dataclasses import replace

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
    "one run measures one kernel: run the study under each kernel (boot it, or a guest that KVM accelerates) "
    "and set the runs side by side with `oslens compare A B`, finding by finding"
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


def _not_run(app: str, params: dict) -> str:
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


def _rr_beats_seq(f, by_app, params) -> Verdict:
    rr, seq = "psearchy-processes-rr", "psearchy-processes"
    effs = _efficiencies(by_app, (rr, seq))
    for app in (rr, seq):
        if app not in by_app:
            return Verdict(f.id, f.paper_text(), "not measured", CANNOT_TELL, _not_run(app, params))
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
            v = _rr_beats_seq(f, by_app, params)
        elif f.id == "linux_scalability_obstacles":
            v = _obstacles(f, by_app)
        elif app is None and any(p in words for p in PARSEC):
            v = Verdict(f.id, f.paper_text(), "not measured", CANNOT_TELL,
                        "PARSEC (dedup, streamcluster, ferret, blackscholes) is not packaged by Debian: oslens does "
                        "not run it")  # fmt: skip
        elif app is None:
            v = Verdict(f.id, f.paper_text(), "not measured", CANNOT_TELL, "not measured by `study kernels` yet")
        elif app not in by_app:
            v = Verdict(f.id, f.paper_text(), "not measured", CANNOT_TELL, _not_run(app, params))
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


# Two kernels' scalability differs negligibly when, at every CPU count of
# every application both ran, the ratio of their speedups lies within this
# share of 1 (the paper's "negligible", made a number: the band of a flat series).
NEGLIGIBLE = 0.10


def _speedup_at(reps: dict[int, list[dict]]) -> dict[int, tuple[float, float, float, float]]:
    """CPU count -> (speedup, low, high, the intervals' lower coverage) against the smallest count."""
    rates = {n: [x for r in rs if (x := _rate(r)) is not None] for n, rs in reps.items()}
    rates = {n: xs for n, xs in rates.items() if len(xs) >= 2}
    if len(rates) < 2:
        return {}
    ivs = {n: median_ci(xs, CONFIDENCE) for n, xs in rates.items()}
    base = ivs[min(ivs)]
    return {
        n: (iv.median / base.median, iv.low / base.high, iv.high / base.low, min(iv.coverage, base.coverage))
        for n, iv in ivs.items()
        if n != min(ivs)
    }


def _largest(ratios: list[tuple]) -> str:
    """The speedup ratio furthest from 1, in words."""
    app, n, ratio, low, high, _, a, b = max(ratios, key=lambda r: abs(r[2] - 1))
    here = f"{app} on {n} CPUs: speedup under {b} is {ratio:.2f}× that under {a} [{low:.2f}–{high:.2f}]"
    return here + (f"; the largest of {len(ratios)} ratios" if len(ratios) > 1 else "")


def across_kernels(runs: list[tuple[str, dict | None, list[dict]]], not_run: list[str] = ()) -> dict:
    """The finding that needs several kernels ("kernel versions barely change
    scalability") judged from study runs, one per kernel: (its kernel's
    name, the environment it ran in or None, its records). At every count of
    every application all of them ran, the ratio of two kernels' speedups,
    with the interval its two intervals give; agrees when every ratio lies
    within NEGLIGIBLE of 1, differs when one lies wholly outside. A guest
    emulated by QEMU times QEMU, not the kernel: cannot tell. not_run: why
    the kernels that were given and not run were not ("NAME: …")."""
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
    emulated = [name for name, env, _ in runs if _emulated(env)]
    per_run = [{app: _speedup_at(reps) for app, reps in _by_app(records).items()} for _, _, records in runs]
    ratios = []  # (app, n, ratio, low, high, coverage, kernel a, kernel b)
    (name0, _, _), first = runs[0], per_run[0]
    for (name, _, _), other in zip(runs[1:], per_run[1:]):
        for app in sorted(set(first) & set(other)):
            for n in sorted(set(first[app]) & set(other[app])):
                (s0, lo0, hi0, c0), (s1, lo1, hi1, c1) = first[app][n], other[app][n]
                ratios.append((app, n, s1 / s0, lo1 / hi0, hi1 / lo0, min(c0, c1), name0, name))
    if emulated:
        return verdict(_largest(ratios) if ratios else "not measured", CANNOT_TELL, f"{', '.join(emulated)} "
                       f"{EMULATED}; a host whose KVM boots these kernels can tell")  # fmt: skip
    if not ratios:
        return verdict("not measured", CANNOT_TELL, "no application ran at two CPU counts with two repetitions "
                       "each under two kernels (run with --reps 3)")  # fmt: skip
    here = _largest(ratios)
    lo_band, hi_band = 1 - NEGLIGIBLE, 1 / (1 - NEGLIGIBLE)
    outside = [r for r in ratios if r[4] < lo_band or r[3] > hi_band]
    straddling = [r for r in ratios if not (lo_band <= r[3] and r[4] <= hi_band) and r not in outside]
    least = min(r[5] for r in ratios)
    if outside:
        app, n, ratio, _, _, _, a, b = max(outside, key=lambda r: abs(r[2] - 1))
        return verdict(here, DIFFERS, f"{len(outside)} of {len(ratios)} speedup ratios lie wholly outside "
                       f"{lo_band:.2f}–{hi_band:.2f} (the band of a negligible difference), most {app} on {n} CPUs "
                       f"({ratio:.2f}×, {b} against {a})", least)  # fmt: skip
    if straddling:
        return verdict(here, CANNOT_TELL, f"{len(straddling)} of {len(ratios)} speedup ratios straddle an edge of "
                       f"{lo_band:.2f}–{hi_band:.2f}: more repetitions could tell", least)  # fmt: skip
    return verdict(here, AGREES, f"every speedup ratio's interval lies within {lo_band:.2f}–{hi_band:.2f} (the band "
                   "of a negligible difference)", least)  # fmt: skip
