"""The OS/hardware co-design study (Nellans) re-run: its per-system-call
cost table (Table 2.4, a Pentium 4 traced with LTT) beside this kernel's,
from a scale run of one explained worker per call (studies/codesign-calls.csv
says which probe issues each call). A call's cost here is its own kernel
time per call — the explained charge of `syscall:NAME` over its count, faults
and interrupts inside it charged apart —, in µs as the paper gives it and in
cycles at the CPU's clock, with the repetitions' interval. The study's other
findings are said to be "cannot tell here", with what they need."""

from __future__ import annotations

import csv
import io
import statistics
from dataclasses import replace
from importlib import resources

from ..records import explained_points, scale_series
from ..studies import load
from ..studies.verdict import AGREES, CANNOT_TELL, DIFFERS, Measured, Verdict, judge
from .explain import explain_point
from .stats import median_ci

STUDY = "nellans-codesign"
TABLE = "Table 2.4"
# In a finding's notes: its figure is the tracer's (LTT's) resolution, an upper bound.
RESOLUTION = "at LTT resolution"
CONFIDENCE = 0.95
# What the findings outside the table need, by words of their measure.
NEEDS = (
    (("instruction", "miss", "footprint", "cache"), "hardware counters (a PMU), which this study does not read yet"),
    (("IOPS", "block", "driver"), "the block-layer runs of `oslens io`, which this study does not compose yet"),
)


def calls() -> dict[str, dict[str, str]]:
    """Each finding of the table: the probe that issues its call, the call's name today, and a note."""
    text = resources.files("oslens.studies").joinpath("codesign-calls.csv").read_text()
    return {row["id"]: row for row in csv.DictReader(io.StringIO(text))}


def probes() -> list[str]:
    """probe:variant, each once, that the table's calls and the context switch need."""
    return list(dict.fromkeys([*(c["probe"] for c in calls().values()), ":".join(SWITCH_PROBE)]))


def _per_call(ep, syscall: str) -> list[float]:
    """ns per call of `syscall`, one value per explained repetition."""
    out = []
    for r in ep.reps:
        s = explain_point(replace(ep, reps=[r]))
        # a call the worker's child issues (execve, in fork-exec) is its helpers'
        c = next((c for c in (s.causes + s.helpers) if c.key == f"syscall:{syscall}"), None) if s else None
        if c and c.count_per_op:
            out.append(c.ns_per_op / c.count_per_op)
    return out


def _measured(ep, call: dict[str, str], mhz: float | None) -> Measured:
    if ep is None:
        return Measured.unmeasured(f"{call['probe']} was not run explained")
    ns = _per_call(ep, call["syscall"])
    if not ns:
        return Measured.unmeasured(f"{call['syscall']}() was never charged in {call['probe']}'s explained repetitions")
    iv = median_ci(ns, CONFIDENCE)
    cycles = f", {iv.median * mhz / 1000:,.0f} cycles at {mhz:,.0f} MHz" if mhz else ""
    return Measured(iv.median / 1000, iv.low / 1000, iv.high / 1000, iv.coverage, len(ns),
                    text=f"{iv.median:,.0f} ns{cycles}; {call['syscall']}() via {call['probe']}")  # fmt: skip


def _other(f) -> Verdict:
    needs = next((why for words, why in NEEDS if any(w.lower() in f.measure.lower() for w in words)), None)
    why = f"needs {needs}" if needs else "not measured by `study codesign` yet"
    return Verdict(f.id, f.paper_text(), "not measured", CANNOT_TELL, why)


# The context switch: a round trip of pingpong on one CPU is two switches.
SWITCH_PROBE = ("pingpong", "futex")
SWITCHES_PER_OP = 2


def _switch(summary, records: list[dict], mhz: float | None) -> dict[str, Measured]:
    """cycles per context switch, and the repetitions' spread of it."""
    s = next((s for s in summary.series if (s.probe, s.variant) == SWITCH_PROBE and s.points), None)
    if s is None:
        why = f"{':'.join(SWITCH_PROBE)} was not run"
        return {"cs_cycles_p4": Measured.unmeasured(why), "cs_run_stdev": Measured.unmeasured(why)}
    iv = s.points[0].per_worker  # round trips per second
    if not mhz:
        cycles = Measured.unmeasured("the CPU's clock rate is not known here")
    else:
        per = mhz * 1e6 / SWITCHES_PER_OP  # cycles per switch at a rate of one round trip per second
        cycles = Measured(per / iv.median, per / iv.high, per / iv.low, iv.coverage, iv.n,
                          text=f"{1e9 / iv.median / SWITCHES_PER_OP:,.0f} ns per switch, "
                               f"{':'.join(SWITCH_PROBE)} on one CPU, {mhz:,.0f} MHz")  # fmt: skip
    pts = next((pts for key, pts in scale_series(records).items() if key[:2] == SWITCH_PROBE), [])
    rates = [sum(w["ops_per_sec"] for w in ws) for ws in pts[0].complete] if pts else []
    spread = (
        Measured(100 * statistics.stdev(rates) / statistics.mean(rates), n=len(rates), text="of the repetitions' rates")
        if len(rates) >= 2
        else Measured.unmeasured("one repetition: no spread")
    )
    return {"cs_cycles_p4": cycles, "cs_run_stdev": spread}


def _kernel(run) -> dict[str, Measured]:
    """What the kernel's build and table say: its timer tick, its system calls."""
    options = (((run.machine or {}).get("kernel") or {}).get("config") or {}).get("options") or {}
    hz = options.get("CONFIG_HZ", "")
    idle = ", idle ticks stopped" if options.get("CONFIG_NO_HZ_IDLE") == "y" else ""
    tick = (
        Measured(1000 / int(hz), text=f"CONFIG_HZ={hz}{idle}")
        if hz.isdigit()
        else Measured.unmeasured("the kernel's build configuration is not readable here")
    )
    n = (run.params or {}).get("kernel_syscalls")
    calls = (
        Measured(n, text="distinct __x64_sys_* entry points in kallsyms")
        if n
        else Measured.unmeasured("kallsyms gave no system call entry points")
    )
    return {"timer_interval_default": tick, "syscall_count_linux_2_6_30": calls}


def beside(summary, run, records) -> list[dict]:
    """The study's entry in the registry of kinds: one verdict per finding."""
    eps = {(ep.probe, ep.variant): ep for ep in explained_points(records).values() if ep.reps}
    mhz = ((run.machine or {}).get("cpu", {}).get("cpuinfo_mhz") or {}).get("median")
    table = calls()
    measured = _switch(summary, records, mhz) | _kernel(run)
    rows = []
    for f in load(STUDY):
        call = table.get(f.id)
        if f.id in measured:
            v = judge(f, measured[f.id])
            if f.id == "syscall_count_linux_2_6_30":  # the count's growth since, not its match
                here = measured[f.id].value
                v.verdict = CANNOT_TELL if here is None else AGREES if here > float(f.value) else DIFFERS
                v.reason = ("grew since Linux 2.6.30, as the paper's series did" if v.verdict == AGREES
                            else v.reason)  # fmt: skip
            rows.append({**v.to_dict(), "part": f.source, "measure": f.measure, "note": ""})
        elif call:
            probe, variant = call["probe"].split(":")
            floor = RESOLUTION in f.notes
            v = judge(replace(f, value=f"<={f.value}") if floor else f, _measured(eps.get((probe, variant)), call, mhz))
            if floor:
                v.reason += f"; the paper's {f.value} µs is its tracer's resolution, read as at most that"
            if "disregard" in f.notes:
                v.reason += "; the paper's author asked to disregard this row (it waited, for I/O or a child)"
            rows.append({**v.to_dict(), "part": TABLE, "measure": f.workload, "note": call["note"]})
        else:
            rows.append({**_other(f).to_dict(), "part": f.source, "measure": f.measure, "note": ""})
    return rows


def context(run) -> list[str]:
    """The CPU's mitigations the kernel applies: today they, not the
    hardware, set much of a system call's cost."""
    mitigations = ((run.machine or {}).get("kernel") or {}).get("mitigations") or {}
    applied = {k: v for k, v in mitigations.items() if isinstance(v, str) and not v.startswith("Not affected")}
    if not applied:
        return ["this CPU's mitigations: none applied (or not readable here)"]
    return ["this CPU's mitigations (they set much of a call's cost today): "
            + "; ".join(f"{k}: {v}" for k, v in sorted(applied.items()))]  # fmt: skip
