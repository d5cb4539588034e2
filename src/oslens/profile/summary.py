"""A profile's records, indexed, and the summary every section draws from them.

`summarize(records)` turns the engine's JSON-line records into one
JSON-serialisable dict; `render(console, summary)` prints it. Each section
(oslens.profile.sections) reads the records through `Records` and says what it
could not measure and why rather than showing zeros."""

from __future__ import annotations

import shlex
import signal

from rich.console import Console
from rich.text import Text

from ..analysis import DictSummary
from ..analysis.metrics import LOWER, Metrics
from ..format import seconds
from .records import Records, ThreadTime, thread_times, user_system_ns  # noqa: F401  (public here)
from .sections import SECTIONS, section_name


def _target(recs: Records) -> dict:
    header, end = recs.header, recs.end_target or {}
    target = recs.last("target") or {}
    return {
        "mode": header.get("mode"),
        "argv": header.get("argv"),
        "pid": target.get("pid", header.get("pid")),
        "how": end.get("how"),
        "time_limit_s": end.get("time_limit_s"),
        "code": end.get("code"),
        "signal": end.get("signal"),
        "wall_s": recs.wall_s,
        "status": recs.status,
        "error": recs.error,
    }


def summarize(records: list[dict]) -> dict:
    recs = Records(records)
    bpf = {
        "loaded": recs.bpf_loaded,
        "why": recs.bpf.get("why"),
        "missing": recs.bpf_missing,
        "lost_events": recs.lost_events,
        "threads_dropped": recs.threads_dropped,
    }
    return {"target": _target(recs), "bpf": bpf, "sections": {section_name(m): m.summarize(recs) for m in SECTIONS}}


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def target_line(target: dict) -> str:
    pid = f"pid {target['pid']}" if target.get("pid") is not None else "no pid: the target never started"
    line = f"profile of {shlex.join(target['argv'])} ({pid})" if target.get("argv") else f"profile of {pid}"
    how, wall = target.get("how"), seconds(target.get("wall_s"))
    if how == "exited":
        line += f": exited with code {target.get('code')} after {wall}"
    elif how == "signal":
        line += f": killed by {_signal_name(target.get('signal'))} after {wall}"
    elif how == "duration":
        line += f": profiled for {wall}"
    elif how == "time_limit":
        line += f": stopped at its time limit{_limit(target.get('time_limit_s'))} after {wall}, {_stopped_how(target)}"
    elif how:
        line += f": ended ({how}) after {wall}"
    else:
        line += ": did not finish (no end_target record; per-second rates unavailable)"
    return line


def _limit(s: float | None) -> str:
    return f" of {seconds(s)} (--time-limit)" if s else ""  # runs stored before the limit was recorded lack it


def _stopped_how(target: dict) -> str:
    """How a command sent SIGTERM at its time limit ended: by the signal, by
    SIGKILL after the grace period, or by exiting on its own terms."""
    if target.get("signal") is not None:
        return f"killed by {_signal_name(target['signal'])}; the figures cover its run until then"
    return f"it exited with code {target.get('code')} on SIGTERM; the figures cover its run until then"


def bpf_line(bpf: dict) -> tuple[str, str]:
    if not bpf["loaded"]:
        return (
            f"BPF not loaded: {bpf.get('why') or 'no reason given'}; only procfs, /proc threads and "
            "software counters were measured",
            "yellow",
        )
    if bpf["missing"]:
        return f"BPF: loaded, except what this kernel lacks: {', '.join(bpf['missing'])}", "yellow"
    return "BPF: loaded", "dim"


def render(console: Console, summary: dict) -> None:
    target, bpf = summary["target"], summary["bpf"]
    console.print(Text(target_line(target), style="bold"))
    console.print(Text(*bpf_line(bpf)))
    if target.get("error"):
        console.print(Text(f"engine error: {target['error']}", style="red"))
    if target.get("status") not in (None, "ok"):
        console.print(Text(f"the run ended {target['status']}: figures cover only what was measured", style="yellow"))
    if bpf.get("lost_events"):
        console.print(
            Text(
                f"{bpf['lost_events']:,} kernel events were dropped (a BPF map was full): BPF counts are lower bounds",
                style="yellow",
            )
        )
    for module in SECTIONS:
        section = summary["sections"].get(section_name(module))
        if section is not None:
            console.print()
            module.render(console, section)


def analyze(run, records: list[dict]) -> DictSummary:
    return DictSummary(summarize(records))


def show(console: Console, run, summary: dict) -> None:
    render(console, summary)


def dig(d, *keys):
    for k in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def metrics(run, records: list[dict]) -> Metrics:
    s = summarize(records)
    sec = s["sections"]
    counts = dig(sec, "switches", "counts") or {}
    if counts.get("voluntary_per_s") is not None and counts.get("involuntary_per_s") is not None:
        switches = counts["voluntary_per_s"] + counts["involuntary_per_s"]
    else:
        switches = counts.get("total_per_s")
    group = "headline figures (one run each)"
    out = Metrics()
    for key, value, unit, label in (
        ("wall s", dig(s, "target", "wall_s"), "s", "wall time"),
        ("kernel share", dig(sec, "time", "total", "kernel_share"), "share", "kernel share of CPU time"),
        ("syscalls per s", dig(sec, "syscalls", "total", "per_s"), "/s", "system calls per second"),
        ("page faults per s", dig(sec, "faults", "counts", "all_per_s"), "/s", "page faults per second"),
        ("context switches per s", switches, "/s", "context switches per second"),
        ("lock wait ns", dig(sec, "locks", "total", "total_ns"), "ns", "kernel lock wait, in all"),
        ("kernel entry mean ns", dig(sec, "run_lengths", "all", "mean_ns"), "ns", "mean kernel entry run length"),
        (
            "kernel cycle share",
            dig(sec, "counters", "hardware", "kernel_cycle_share"),
            "share",
            "kernel share of cycles",
        ),
    ):
        out.add(f"profile/{key}", [value] if isinstance(value, (int, float)) else [], unit, LOWER, group, label)
    return out


def stacks(run, records: list[dict]) -> dict:
    """The profile's sampled kernel functions, which `compare` sets side by side."""
    from .sections import kernel_functions

    return kernel_functions.stacks(Records(records))
