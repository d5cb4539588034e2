"""The scale-out study (Zheng et al., CloudSuite on Linux 2.6.38) re-run on
real server software (`oslens serve`): each finding about a workload this
study runs set beside its profile under load — media streaming stands in
as nginx serving large files at a rate per connection, the search backend
as xapian-tcpsrv answering ranked queries, the Hadoop job (bayes) as a
word count by tr, GNU sort and uniq, HPL and FFT as one run of HPC
Challenge (hpcc), the jobs profiled whole — and every other finding said
to be "cannot tell here", with what it would need: the search frontend,
more cores than this machine has, hardware counters, HPL or FFT profiled
apart, or a definition the paper does not give. The data-analysis job also
runs on 1, 2, 4 … of the CPUs (and the paper's 14 and 24 where there are
more): its speedup, kernel time and lock wait against cores.

A figure is the median of the repetitions with its order-statistic
interval; one repetition gives no interval, and no verdict."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..format import plural, sig
from ..profile.summary import dig
from ..studies import load
from ..studies.verdict import CANNOT_TELL, Measured, Verdict, judge
from .stats import median_ci

STUDY = "zheng-scaleout"
CONFIDENCE = 0.95

# The paper's workloads, as its findings name them (lowercased), and the server of `serve` standing in for each.
STANDS_IN = {
    "media streaming": "streaming",
    "streaming": "streaming",
    "search-backend": "search",
    "hpl": "hpcc",
    "fft": "hpcc",
    "hpl; fft": "hpcc",
    "bayes": "analysis",
    "bayes (hadoop naive bayes)": "analysis",
}
# hpcc runs HPL and FFT among five other tests, profiled together: said beside each figure of it,
# and a row about one of them alone is shown hpcc's figure but not judged by it.
ONE_HPC_TEST = ("hpl", "fft")
TOGETHER = "hpcc's seven tests profiled together, so HPL's and FFT's figures are not told apart"
CPUS = "_cpus"  # a profile's key (not the summary's own): the CPUs the workload had
# Workloads with no stand-in, and why.
FRONTEND = ("the search frontend (Tomcat gathering the backends' answers) has no stand-in here: the clients query "
            "the backend, xapian-tcpsrv, directly")  # fmt: skip
NO_STAND_IN = {
    "search-frontend": FRONTEND,
    "search frontend": FRONTEND,
    "web search (search service)": FRONTEND + " — and the paper's 'search service' is most likely the frontend",
}

# Why a finding cannot be told here, by what it needs (words of its experiment or workload, lowercased).
NEEDS = (
    (("front-end stall", "itlb", "os stall", "l1i"),
     "hardware counters (front-end stalls, L1i and ITLB misses), which `study scaleout` does not read yet"),
    (("scaling",), "the data-analysis job run on two CPU counts or more (`study scaleout` runs it on 1, 2, 4 … "
                   "of the CPUs, each count at least twice)"),
)  # fmt: skip
OPERATING_POINT = "the authors' operating point, not a finding"
UNDEFINED_MEASURES = ("latency", "cost", "total kernel time")  # of the context-switch rows, those it covers
UNDEFINED = (
    "the paper's context-switch latency is not defined in its text (its seconds-long maxima suggest time off the "
    "CPU): oslens's run-queue wait and off-CPU time are in each server's profile, not set beside it"
)

# A finding's id is its measure then its workload ("pf_freq_search_backend"): the measure, as
# its id begins, -> (path in the profile summary, scale to the finding's unit), for a workload run here.
PROFILED = {
    "kernel_share_": (("sections", "time", "total", "kernel_share"), 100.0),
    "pf_freq_": (("sections", "faults", "counts", "all_per_s"), 1.0),
    "pf_avg_": (("sections", "faults", "latency", "all", "avg_ns"), 1e-6),
    "pf_max_": (("sections", "faults", "latency", "all", "max_ns"), 1e-6),
    "pf_min_": (("sections", "faults", "latency", "all", "min_ns"), 1e-3),
    "pf_stddev_": (("sections", "faults", "latency", "all", "std_ns"), 1e-6),
}
# The paper's data-center workloads run here (its four: bayes, media streaming, search frontend and
# backend), set against HPC (hpcc) where it compares them; the timer's share of softirq time is one range
# over them.
DATA_CENTER = ("analysis", "streaming", "search")
PAPER_DATA_CENTER = 4
TIMER_SHARE_SERVERS = DATA_CENTER


def _sum_of(*paths: tuple[str, ...]):
    """A profile's figure: the sum of its values at these paths (None where one is missing)."""

    def figure(profile: dict) -> float | None:
        values = [dig(profile, *p) for p in paths]
        return sum(values) if all(isinstance(v, (int, float)) for v in values) else None

    return figure


def _per_cpu(figure):
    """A rate per CPU the workload had: a job has every CPU, a server those its
    generator does not, so their whole rates are not of the same machine."""

    def per_cpu(profile: dict) -> float | None:
        x = figure(profile)
        return x / profile[CPUS] if x is not None and profile.get(CPUS) else None

    return per_cpu


def _kernel_thread_share(profile: dict) -> float | None:
    """Of the workload's preemptions, the share whose next task was a kernel thread, in %."""
    pre = dig(profile, "sections", "switches", "preemptions") or {}
    return 100.0 * pre["kernel_threads"] / pre["total"] if pre.get("total") else None


_PREEMPTIONS = _per_cpu(_sum_of(("sections", "switches", "counts", "involuntary_per_s"),
                                ("sections", "switches", "counts", "migrations_per_s")))  # fmt: skip
_FAULTS = _per_cpu(_sum_of(("sections", "faults", "counts", "all_per_s")))
_HARDIRQ = _sum_of(("sections", "interrupts", "hardirq", "total", "avg_ns"))


@dataclass(frozen=True)
class Comparison:
    """A finding that sets workloads against one of them: `others` (those
    the finding names and this run ran) each above or below `reference`,
    judged by their intervals. `leads`: the finding is that the reference
    leads them (and is said so); otherwise that they lie on one side of it."""

    what: str
    figure: Callable[[dict], float | None]
    reference: str
    others: tuple[str, ...]
    others_above: bool
    leads: bool = False


_PREEMPT = "preemptive switches (involuntary switches and migrations) per second per CPU"
COMPARED = {
    "cs_freq_dc_gt_hpc": Comparison(_PREEMPT, _PREEMPTIONS, "hpcc", DATA_CENTER, others_above=True),
    "pf_freq_hpc_gt_dc": Comparison("page faults per second per CPU", _FAULTS, "hpcc", DATA_CENTER, others_above=False),
    "irq_latency_bayes_gt_hpc": Comparison("mean hard-interrupt handler time", _HARDIRQ, "hpcc", ("analysis",),
                                           others_above=True),
    "pf_freq_bayes_max_dc": Comparison("page faults per second per CPU", _FAULTS, "analysis", DATA_CENTER,
                                       others_above=False, leads=True),
    "cs_freq_max_streaming": Comparison(_PREEMPT, _PREEMPTIONS, "streaming", (*DATA_CENTER, "hpcc"),
                                        others_above=False, leads=True),
    "cs_kdaemon_share_streaming": Comparison("the share of preemptions that handed the CPU to a kernel thread, %",
                                             _kernel_thread_share, "streaming", (*DATA_CENTER, "hpcc"),
                                             others_above=False, leads=True),
}  # fmt: skip


def _profiled(f) -> tuple[tuple[str, ...], float] | None:
    return next((v for prefix, v in PROFILED.items() if f.id.startswith(prefix)), None)


def _profiles(records: list[dict]) -> dict[str, list[dict]]:
    """Each server's repetitions' profile summaries."""
    from ..profile.summary import summarize
    from .serve import repetitions

    out: dict[str, list[dict]] = {}
    for serve, recs in repetitions(records):
        if recs and not serve.get("scaling") and not _failed_job(serve):
            profile = summarize(recs)
            profile[CPUS] = len(serve["server_cpus"])  # what a rate is set against, between workloads
            out.setdefault(serve["server"], []).append(profile)
    return out


def _failed_job(serve: dict) -> bool:
    """A job that failed (its exit status, its own check of its results, counts that do not add up):
    its profile is of a run that did not do its work, and no finding rests on it."""
    load = serve.get("load") or {}
    return bool(serve.get("job")) and (bool(load.get("errors")) or not load.get("requests"))


def _scaling(records: list[dict], job: str) -> dict[int, list[tuple[float, dict]]]:
    """A job's runs by the number of CPUs it had: (its seconds, its profile summary) per repetition."""
    from ..profile.summary import summarize
    from .serve import repetitions

    out: dict[int, list[tuple[float, dict]]] = {}
    for serve, recs in repetitions(records):
        seconds = (serve.get("load") or {}).get("seconds")
        if serve["server"] == job and recs and seconds and not _failed_job(serve):
            out.setdefault(len(serve["server_cpus"]), []).append((seconds, summarize(recs)))
    return dict(sorted(out.items()))


def _lock_share(p: dict) -> float | None:
    """Kernel lock wait as a share of the job's CPU time, in %."""
    wait, runtime = dig(p, "sections", "locks", "total", "total_ns"), dig(p, "sections", "time", "total", "runtime_ns")
    return 100.0 * wait / runtime if isinstance(wait, (int, float)) and runtime else None


PLATEAU = (14, 24)  # the cores over which the paper's speedup stays near its figure


def _ms(x) -> float | None:
    return x / 1e6 if isinstance(x, (int, float)) else None


# finding id -> (what the series is, its figure of one run (seconds, profile), its unit, the relation tested here)
SERIES = {
    "lock_latency_grows": ("kernel lock wait per run", lambda t, p: _ms(dig(p, "sections", "locks", "total",
                                                                             "total_ns")), "ms", "grows_with_cores"),
    "lock_stall_share_grows": ("kernel lock wait as a share of CPU time", lambda t, p: _lock_share(p), "%",
                               "grows_with_cores"),
    "kernel_time_grows": ("kernel time per run", lambda t, p: _ms(dig(p, "sections", "time", "total", "system_ns")),
                          "ms", "grows_with_cores"),
}  # fmt: skip


def _series(runs: dict[int, list[tuple[float, dict]]], figure) -> list[tuple[int, float, float, float]]:
    """(CPUs, median, low, high) for each count with two repetitions or more."""
    out = []
    for n, reps in runs.items():
        values = [x for t, p in reps if isinstance(x := figure(t, p), (int, float))]
        if len(values) >= 2:
            iv = median_ci(values, CONFIDENCE)
            out.append((n, iv.median, iv.low, iv.high))
    return out


def _speedups(runs: dict[int, list[tuple[float, dict]]]) -> list[tuple[int, float, float, float]]:
    """The job's speedup over its run on the fewest CPUs, with the bounds its intervals give."""
    times = _series(runs, lambda t, p: t)
    if not times:
        return []
    c0, t0, lo0, hi0 = times[0]
    # the first count is the baseline, exactly 1: its spread is in every other point's bounds
    # already, and the shape tests divide by the first point's bounds again
    return [(c0, 1.0, 1.0, 1.0)] + [(n, t0 / t, lo0 / hi, hi0 / lo) for n, t, lo, hi in times[1:]]


def _scaling_verdict(f, runs: dict[int, list[tuple[float, dict]]]) -> Verdict:
    """The job against cores: its series judged for the paper's relation,
    or why it cannot be (the paper's core counts, more than this machine has)."""
    from dataclasses import replace

    most = max(runs) if runs else 0
    op, arg = f.test
    if f.id in SERIES:
        what, figure, unit, relation = SERIES[f.id]
        series = _series(runs, figure)
        m = Measured(series=series, text=what) if len(series) >= 2 else Measured.unmeasured(
            f"{what}: needs two CPU counts with two repetitions each (this run has {len(series)})")  # fmt: skip
        v = judge(replace(f, relation=relation, unit=unit), m)
        if op == "grows_linearly_with_cores":
            v.reason += "; that it grows linearly, as the paper says, is not tested"
        v.paper = f.paper_text()
        return v
    speedups = _speedups(runs)
    if op == "linear_until" and most < int(arg):
        why = f"needs {arg} CPUs or more to see where linear scaling ends; this machine gave the job {most}"
        return Verdict(f.id, f.paper_text(), _speedup_text(speedups), CANNOT_TELL, why)
    if op == "plateau":  # the paper's figure, at the most cores up to its 24
        inside = [x for x in speedups if PLATEAU[0] <= x[0] <= PLATEAU[1]]
        if most < PLATEAU[1] or not inside:
            why = f"the paper's plateau lies at {PLATEAU[0]} to {PLATEAU[1]} cores; this machine gave the job {most}"
            return Verdict(f.id, f.paper_text(), _speedup_text(speedups), CANNOT_TELL, why)
        n, x, lo, hi = inside[-1]
        v = judge(replace(f, relation=""), Measured(x, lo, hi, None, text=f"speedup on {n} CPUs"))
        v.paper = f.paper_text()
        return v
    upto = [x for x in speedups if x[0] <= int(arg)] if op == "linear_until" else speedups
    v = judge(replace(f, relation="near_linear"), Measured(series=upto, text="speedup"))
    v.paper = f.paper_text()
    return v


def _planned_counts(run) -> list[int]:
    """The CPU counts the run planned the data-analysis job on."""
    return list(((getattr(run, "params", None) or {}).get("scaling") or {}).get("analysis") or [])


def _speedup_text(speedups) -> str:
    return ", ".join(f"{n}: {sig(x, 3)}×" for n, x, _, _ in speedups) or "not measured"


def _measured(values: list[float], what: str) -> Measured:
    if not values:
        return Measured.unmeasured(f"{what}: not measured in any repetition (the profile says why)")
    if len(values) < 2:
        return Measured.unmeasured(f"{what}: one repetition gives no interval (run the study with --reps 3 or more)")
    iv = median_ci(values, CONFIDENCE)
    return Measured(iv.median, iv.low, iv.high, iv.coverage, len(values), text=what)


def _timer_share(profile: dict) -> float | None:
    """The TIMER softirq's share of all softirq time, in %."""
    rows = dig(profile, "sections", "interrupts", "softirq", "rows") or []
    total = sum(r.get("ns") or 0 for r in rows)
    timer = sum(r.get("ns") or 0 for r in rows if r.get("name") == "TIMER")
    return 100.0 * timer / total if total else None


def _softirq_over_hardirq(f, profiles: dict[str, list[dict]]) -> Verdict:
    """Softirq time far above hard-irq time: each profile's mean softirq
    time over its mean hard-irq handler time, above 1 in every one."""
    from ..studies.verdict import AGREES, DIFFERS

    ratios = []
    for reps in profiles.values():
        for p in reps:
            soft = dig(p, "sections", "interrupts", "softirq", "total", "avg_ns")
            hard = dig(p, "sections", "interrupts", "hardirq", "total", "avg_ns")
            if soft and hard:
                ratios.append(soft / hard)
    if not ratios:
        return Verdict(f.id, f.paper_text(), "not measured", CANNOT_TELL,
                       "no profile timed both softirqs and hard interrupts (the profiles say why)")  # fmt: skip
    here = f"{min(ratios):.2g}–{max(ratios):.2g}× over {len(ratios)} server profiles"
    verdict = AGREES if min(ratios) > 1 else DIFFERS
    why = "mean softirq time over mean hard-irq handler time, per profile"
    return Verdict(f.id, f.paper_text(), here, verdict, why)


def _timer_share_verdict(f, profiles: dict[str, list[dict]]) -> Verdict:
    """The paper's one range over its data-center workloads, judged for each
    of those run here: agrees where all agree, differs where one differs."""
    from ..studies.verdict import AGREES, DIFFERS

    run = [s for s in TIMER_SHARE_SERVERS if s in profiles]
    each = {s: judge(f, _measured([x for p in profiles[s] if (x := _timer_share(p)) is not None],
                                  f"{s}: TIMER's share of softirq time")) for s in run}  # fmt: skip
    verdicts = {v.verdict for v in each.values()}
    verdict = DIFFERS if DIFFERS in verdicts else AGREES if verdicts == {AGREES} else CANNOT_TELL
    here = "; ".join(v.here for v in each.values())
    reason = "; ".join(f"{s}: {v.reason}" for s, v in each.items())
    missing = [s for s in TIMER_SHARE_SERVERS if s not in profiles]
    reason += f"; of the paper's four data-center workloads, {' and '.join(run)} only"
    if missing:
        reason += f" ({', '.join(missing)} not run in this study run)"
    confidence = min((v.confidence for v in each.values() if v.confidence is not None), default=None)
    return Verdict(f.id, f.paper_text(), here, verdict, reason, confidence)


def _compared(f, profiles: dict[str, list[dict]]) -> Verdict:
    """A Comparison judged: agrees where every other workload lies wholly
    on the finding's side of the reference, differs where one lies wholly
    on the other, and cannot tell where an interval overlaps."""
    from ..studies.verdict import AGREES, DIFFERS

    c = COMPARED[f.id]
    run = [s for s in c.others if s in profiles and s != c.reference]
    if c.reference not in profiles or not run:
        missing = f"{c.reference} not run" if c.reference not in profiles else "no other workload it names run"
        return Verdict(f.id, f.paper_text(), "not measured", CANNOT_TELL, f"{missing} in this study run")
    m = {s: _measured([x for p in profiles[s] if (x := c.figure(p)) is not None], s) for s in (c.reference, *run)}
    if unmeasured := [x.missing for x in m.values() if x.missing]:
        return Verdict(f.id, f.paper_text(), "not measured", CANNOT_TELL, unmeasured[0])
    ref = m[c.reference].interval
    sides = {s: "above" if m[s].interval[0] > ref[1] else "below" if m[s].interval[1] < ref[0] else "overlaps"
             for s in run}  # fmt: skip
    wanted = "above" if c.others_above else "below"
    if all(v == wanted for v in sides.values()):
        verdict = AGREES
    elif any(v not in (wanted, "overlaps") for v in sides.values()):
        verdict = DIFFERS
    else:
        verdict = CANNOT_TELL
    here = "; ".join(f"{s} {sig(x.value, 3)} [{sig(x.low, 3)}–{sig(x.high, 3)}]" for s, x in m.items())
    flipped = {"above": "below", "below": "above", "overlaps": "overlaps"}
    if c.leads:  # the reference's side of each other workload
        reason = f"{c.reference} " + ", ".join(f"{flipped[v]} {s}" for s, v in sides.items())
        counted = f"of the workloads the paper names, {', '.join((c.reference, *run))} run here"
    else:
        reason = ", ".join(f"{s} {v} {c.reference}'s" for s, v in sides.items())
        counted = (f"{len(run)} of the paper's {PAPER_DATA_CENTER} data-center workloads run here ({', '.join(run)})"
                   if len(c.others) > 1 else "")  # fmt: skip
    reason = "; ".join(filter(None, (f"{c.what}, median [interval] of the repetitions: {reason}", counted,
                                     TOGETHER if "hpcc" in m else "")))  # fmt: skip
    return Verdict(f.id, f.paper_text(), here, verdict, reason, min(x.confidence or 0 for x in m.values()) or None)


def beside(summary, run, records) -> list[dict]:
    """The study's entry in the registry of kinds: one verdict per finding."""
    profiles = _profiles(records)
    scaling = _scaling(records, "analysis")
    rows = []
    for f in load(STUDY):
        workload = f.workload.lower()
        server = STANDS_IN.get(workload)
        if f.experiment == "setup":
            v = Verdict(f.id, f.paper_text(), "not measured", CANNOT_TELL, OPERATING_POINT)
        elif workload in NO_STAND_IN:
            v = Verdict(f.id, f.paper_text(), "not measured", CANNOT_TELL, NO_STAND_IN[workload])
        elif f.id in COMPARED:
            v = _compared(f, profiles)
        elif (profiled := _profiled(f)) and server in profiles:
            path, scale = profiled
            values = [x * scale for p in profiles[server] if isinstance(x := dig(p, *path), (int, float))]
            v = judge(f, _measured(values, f"{server}: {f.measure}"))
            if server == "hpcc" and workload in ONE_HPC_TEST:  # shown beside the row, not judged against it
                v = Verdict(f.id, f.paper_text(), v.here, CANNOT_TELL, f"{TOGETHER}: the figure shown is of all of "
                            f"hpcc, not of {f.workload} alone")  # fmt: skip
            elif server == "hpcc":
                v.reason += f"; {TOGETHER}"
        elif f.experiment.startswith("scaling") and len(scaling) >= 2:
            v = _scaling_verdict(f, scaling)
        elif f.experiment.startswith("scaling") and len(planned := _planned_counts(run)) == 1:
            why = f"this machine has {plural(planned[0], 'CPU')}: the job cannot run on two CPU counts"
            v = Verdict(f.id, f.paper_text(), "not measured", CANNOT_TELL, why)
        elif f.id == "softirq_timer_share" and any(s in profiles for s in TIMER_SHARE_SERVERS):
            v = _timer_share_verdict(f, profiles)
        elif f.id == "softirq_gt_hardirq" and profiles:
            v = _softirq_over_hardirq(f, profiles)
        elif f.id == "irq_cpu0":
            v = Verdict(f.id, f.paper_text(), "not measured", CANNOT_TELL,
                        "over loopback no network interrupt is raised (the paper's clients were other nodes): "
                        "where network interrupts land cannot be seen here")  # fmt: skip
        elif f.id.startswith("cs_") and server and any(w in f.measure.lower() for w in UNDEFINED_MEASURES):
            v = Verdict(f.id, f.paper_text(), "not measured", CANNOT_TELL, UNDEFINED)
        else:
            v = Verdict(f.id, f.paper_text(), "not measured", CANNOT_TELL, _needs(f, server, profiles))
        rows.append({**v.to_dict(), "part": f.source, "measure": f"{f.measure} ({f.workload})"})
    return rows


def _needs(f, server: str | None, profiles: dict) -> str:
    if server and server not in profiles:
        return f"the {server} server was not run in this study run"
    if server == "hpcc":
        return f"a profile of {f.workload} alone: {TOGETHER}"
    words = f"{f.experiment} {f.workload}".lower()
    needs = next((why for keys, why in NEEDS if any(k in words for k in keys)), None)
    return f"needs {needs}" if needs else "not measured by `study scaleout` yet"
