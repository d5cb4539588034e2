"""OSMark re-run: each primitive's verdict on this kernel, next to what the
paper found on a 32-core AMD machine with Linux 2.6.26 (studies/osmark.csv).

A verdict is a finding only where the run's own evidence supports it:
- the workers of the points it rests on (the largest count, and the knee's
  two) ran together: a fixed-work point whose workers started further apart
  than stats.SKEW_LIMIT of their run measured them one after another;
- neither those points nor the knee are much time the workers spent
  waiting for their CPUs, which another task had: that is the machine
  being shared, not the primitive;
- the efficiency's interval lies wholly on one side of KNEE_EFFICIENCY.
Otherwise it is CANNOT_TELL, saying why. Its confidence is the interval's
coverage (3 repetitions: 75 %)."""

from __future__ import annotations

from ..format import ns as fmt_ns
from ..studies import findings
from .explain import EXPLAINED_ENOUGH, KNEE_EFFICIENCY
from .stats import SKEW_LIMIT

# A lock is worth naming in a verdict when it costs this share of the time per op.
LOCK_WORTH = 0.01
# A worker pinned to a CPU of its own waits for it next to never: past this
# share of its time, another task had the CPU and the point is the machine's.
RUNQ_TOLERATED = 0.1
WAITING = "waiting for a CPU"
SCALES, DOES_NOT_SCALE, CANNOT_TELL = "scales", "does not scale", "cannot tell here"


def beside(summary, run, records) -> list[dict]:
    """The study's entry in the registry of kinds: a scale run's summary and
    the paper's findings, one verdict per probe (the records are not needed)."""
    return verdicts(summary.series, run.machine.get("kernel", {}).get("release", "this kernel"))


def verdicts(series: list, kernel: str) -> list[dict]:
    """One row per probe of the paper: what it found, what this run found,
    and a one-line verdict with its confidence."""
    by_probe = {(s.probe, s.variant): s for s in series if s.points}
    rows = []
    for f in findings("osmark"):
        s = by_probe.get((f["probe"], f["variant"]))
        paper = "scaled" if f["paper_scaled"] == "yes" else f"did not scale; the authors blamed {f['paper_cause']}"
        row = {"probe": f"{f['probe']}:{f['variant']}", "paper_benchmark": f["paper_benchmark"], "paper": paper}
        if s is None:
            row.update(
                scaled=None, finding=None, confidence=None, today="not measured",
                verdict=f"{f['probe']}: not measured in this run",
            )  # fmt: skip
            rows.append(row)
            continue
        last = s.points[-1]
        eff = last.efficiency if last.efficiency is not None else 1.0
        finding, confidence, doubts = _finding(s, last)
        today = f"efficiency {eff:.0%} at {last.workers} workers"
        if confidence is not None:
            ci = last.efficiency_ci
            today += f" ({ci.low:.0%}–{ci.high:.0%}, {confidence:.0%} confidence)"
        said = f"{finding}: {today}; {_cause(s, last)}"
        if doubts:
            said += " — " + "; ".join(doubts)
        row.update(
            scaled={SCALES: True, DOES_NOT_SCALE: False}.get(finding),
            finding=finding,
            confidence=confidence,
            cannot_tell=doubts,
            today=said,
        )
        then = "found it scaled" if f["paper_scaled"] == "yes" else f"blamed {f['paper_cause']}"
        row["verdict"] = f"{f['probe']}: the paper {then}; on {kernel} it {said}"
        rows.append(row)
    return rows


def _finding(s, last) -> tuple[str, float | None, list[str]]:
    """(finding, its confidence, why it cannot be told) of a series."""
    doubts = []
    # the efficiency is the last point's rate over the first's; a knee, its two points'
    resting = {s.points[0].workers, last.workers} | ({s.knee.from_workers, s.knee.to_workers} if s.knee else set())
    for p in s.points:
        if p.workers in resting and p.start_skew is not None and p.start_skew > SKEW_LIMIT:
            doubts.append(
                f"the {p.workers} workers did not run together (started up to {p.start_skew:.0%} of the run apart)"
            )
    explained = {e.workers: e for e in s.explained or [] if e}
    for n in sorted(resting & explained.keys()):
        e = explained[n]
        waited = _waited(e) / e.ns_per_op if e.ns_per_op > 0 else 0.0
        if waited > RUNQ_TOLERATED:
            doubts.append(f"at {n} worker{'s' if n > 1 else ''}, {waited:.0%} of the time per op was {WAITING}")
    k = s.knee
    if k and k.rise_ns > 0 and {k.from_workers, k.to_workers} <= explained.keys():
        share = (_waited(explained[k.to_workers]) - _waited(explained[k.from_workers])) / k.rise_ns
        if share >= EXPLAINED_ENOUGH:
            doubts.append(
                f"{share:.0%} of the knee's rise was {WAITING}: another task had the workers' CPUs, "
                "a shared machine rather than the primitive"
            )
    ci = last.efficiency_ci
    if last is s.points[0]:
        doubts.append("one worker count measured: nothing to scale against")
    elif ci is None or ci.n < 2:
        doubts.append("one repetition: no interval for the efficiency (use --reps 3 or more)")
    elif ci.low < KNEE_EFFICIENCY <= ci.high:
        doubts.append(f"the efficiency's interval {ci.low:.0%}–{ci.high:.0%} spans the {KNEE_EFFICIENCY:.0%} line")
    if doubts:
        return CANNOT_TELL, None, doubts
    return (SCALES if ci.low >= KNEE_EFFICIENCY else DOES_NOT_SCALE), ci.coverage, []


def _waited(e) -> float:
    """ns per op an explained point's workers spent runnable, waiting for their CPU."""
    return sum(c.ns_per_op for c in e.causes if c.group == "runq")


def _cause(s, last) -> str:
    k = s.knee
    if k and k.rise_ns <= 0:
        # the knee is the plain curve's; the explained repetitions (their own,
        # attribution running) did not slow down there: no share of a rise to give
        return (
            f"the drop from {k.from_workers} to {k.to_workers} workers is not attributed: the explained "
            f"repetitions' time per op did not rise there (it fell {fmt_ns(-k.rise_ns)})"
        )
    if k and k.ranked:
        label, _, share = k.ranked[0]
        return (
            f"the top cause of the drop from {k.from_workers} to {k.to_workers} workers is {label} "
            f"({share:.0%} of the rise{_beyond_the_rise(k)})"
        )
    if s.explained and s.explained[-1]:
        e = s.explained[-1]
        locks = [c for c in e.causes if c.group == "lock" and c.ns_per_op >= LOCK_WORTH * e.ns_per_op]
        return (
            f"the costliest lock at {last.workers} workers is {locks[0].label} "
            f"({locks[0].ns_per_op / e.ns_per_op:.0%} of the time per op)"
            if locks
            else f"no lock costs {LOCK_WORTH:.0%} of the time per op up to {last.workers} workers"
        )
    return s.explanation or "not explained (run with --explain)"


def _beyond_the_rise(k) -> str:
    """Why a cause's share of the rise can pass 100 %: it is its growth over
    the growth of the time per op, and other causes shrank meanwhile (or the
    causes charged grew by more than the time measured: unexplained < 0)."""
    if not k.ranked or k.ranked[0][2] <= 1:
        return ""
    fell = sum(d for _, d, _ in k.ranked) - (k.rise_ns - k.unexplained_ns)
    parts = [f"other causes fell {fmt_ns(fell)}"] if fell > 0 else []
    if k.unexplained_ns < 0:
        parts.append(f"the causes grew {fmt_ns(-k.unexplained_ns)} more than the time measured")
    return ": " + " and ".join(parts) if parts else ""
