"""Execution time: user vs kernel time per thread and in total (from the
thread records), and how the CPUs the workload ran on spent their time
(/proc/stat, system-wide)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console

from ..procfs import TIME_FIELDS
from .common import (
    THREADS_PARTIAL,
    add_crosscheck,
    fmt_count,
    fmt_ns,
    fmt_share,
    footer,
    heading,
    new_section,
    plain,
    ratio,
    table,
)

if TYPE_CHECKING:
    from ..records import Records

TITLE = "Execution time: user vs kernel"

# A fork loop has thousands of threads: keep the busiest, total them all.
THREADS_KEPT = 30


def _why_no_threads(recs: Records) -> str:
    if not recs.bpf_loaded:
        return (
            f"no per-thread figures: without BPF ({recs.bpf_why}) only threads alive at the end can be read "
            "from /proc, and none was"
        )
    return "no per-thread figures: the engine wrote no thread record"


def _ticks_split(ticks: dict[str, int], tick_ns: float) -> dict:
    fields = {f: ticks[f] for f in TIME_FIELDS if f in ticks}
    elapsed = sum(fields.values())
    return {
        "ticks": fields,
        "elapsed_ns": elapsed * tick_ns,
        "shares": {f: ratio(n, elapsed) for f, n in fields.items()},
    }


def _cpu_split(recs: Records) -> dict:
    delta = recs.proc_delta.stat
    if delta is None:
        return {"missing": f"not measured: {recs.procfs_missing('/proc/stat')}"}
    cpu_time = recs.last("cpu_time")
    workload_ns = {c["cpu"]: c["ns"] for c in cpu_time["cpus"]} if cpu_time else {}
    ran_on = sorted(cpu for cpu, n in workload_ns.items() if n > 0)
    if ran_on:
        cpus, basis = ran_on, "the CPUs the workload ran on (BPF)"
    elif not recs.bpf_loaded:
        cpus = recs.online_cpus or sorted(delta.cpus)
        basis = f"all online CPUs: which CPUs the workload ran on is unknown without BPF ({recs.bpf_why})"
    else:
        cpus = recs.online_cpus or sorted(delta.cpus)
        basis = "all online CPUs: the BPF cpu_time record is absent or empty"
    tick_ns = 1e9 / recs.clk_tck
    per_cpu = []
    for cpu in cpus:
        if cpu in delta.cpus:
            split = _ticks_split(delta.cpus[cpu], tick_ns)
            per_cpu.append(
                {
                    "cpu": cpu,
                    "workload_ns": workload_ns.get(cpu),
                    "workload_share": ratio(workload_ns.get(cpu), split["elapsed_ns"]),
                    **split,
                }
            )
    summed = {f: sum(c["ticks"].get(f, 0) for c in per_cpu) for f in TIME_FIELDS}
    return {
        "basis": basis,
        "cpus": [c["cpu"] for c in per_cpu],
        "tick_ns": tick_ns,
        # A CPU offline at either snapshot has no difference to show.
        "not_online_throughout": [cpu for cpu in cpus if cpu not in delta.cpus],
        "all": _ticks_split(summed, tick_ns),
        "per_cpu": per_cpu,
    }


def _thread_row(t) -> dict:
    return {**t.to_dict(), "kernel_share": ratio(t.system_ns, t.user_ns + t.system_ns)}


def summarize(recs: Records) -> dict:
    section = new_section(TITLE)
    threads = sorted(recs.threads, key=lambda t: t.runtime_ns, reverse=True)
    section["threads"] = [_thread_row(t) for t in threads[:THREADS_KEPT]]
    section["threads_count"] = len(threads)
    section["threads_omitted"] = max(0, len(threads) - THREADS_KEPT)
    runtime = sum(t.runtime_ns for t in threads) if threads else None
    if threads:
        user, system = sum(t.user_ns for t in threads), sum(t.system_ns for t in threads)
        section["total"] = {
            "user_ns": user,
            "system_ns": system,
            "runtime_ns": runtime,
            "kernel_share": ratio(system, user + system),
            "cpus_busy": ratio(runtime / 1e9, recs.wall_s),
        }
        if not recs.threads_complete:
            section["notes"].append(THREADS_PARTIAL)
    elif ru := (recs.end_target or {}).get("rusage"):
        # the kernel's own sum for the command and every descendant it
        # waited for: the whole tree's time, though not per thread
        user, system = ru["utime_ns"], ru["stime_ns"]
        section["total"] = {
            "user_ns": user,
            "system_ns": system,
            "runtime_ns": None,
            "kernel_share": ratio(system, user + system),
            "cpus_busy": ratio((user + system) / 1e9, recs.wall_s),
        }
        section["notes"].append(
            f"{_why_no_threads(recs)}; the total is the command's rusage (wait4): itself "
            "and the descendants it waited for, scaled from ticks"
        )
    else:
        section["total"] = None
        section["missing"] = _why_no_threads(recs)
    if recs.threads_dropped:
        section["notes"].append(
            f"{recs.threads_dropped:,} threads exited after the kernel's exit map filled: "
            "they are missing from the per-thread figures and the total (task-clock counts "
            "them)"
        )
    add_crosscheck(
        section,
        "the workload's CPU time",
        {"threads' runtime": runtime, "task-clock counter": recs.counter_value("task-clock")},
        unit="ns",
    )
    section["cpu_split"] = _cpu_split(recs)
    return section


def _render_threads(console: Console, section: dict) -> None:
    t = table(
        "per thread (kernel share = system / (user + system))",
        ["thread", "tid", "user", "kernel", "kernel share", "runtime", "switches vol/invol", "faults min/maj", "ended"],
    )
    for th in section["threads"]:
        t.add_row(
            plain(th["comm"]),
            str(th["tid"]),
            fmt_ns(th["user_ns"]),
            fmt_ns(th["system_ns"]),
            fmt_share(th["kernel_share"]),
            fmt_ns(th["runtime_ns"]),
            f"{fmt_count(th['nvcsw'])}/{fmt_count(th['nivcsw'])}",
            f"{fmt_count(th['min_flt'])}/{fmt_count(th['maj_flt'])}",
            "exited" if th["ended"] == "exit" else "alive",
        )
    total = section["total"]
    if section["threads_omitted"]:
        t.add_row(f"… {section['threads_omitted']:,} more threads", *[""] * 8)
    label = f"total ({section['threads_count']:,} threads)" if section["threads_count"] else "total (rusage)"
    t.add_row(
        label,
        "",
        fmt_ns(total["user_ns"]),
        fmt_ns(total["system_ns"]),
        fmt_share(total["kernel_share"]),
        fmt_ns(total["runtime_ns"]),
        "",
        "",
        "",
        style="bold",
        end_section=True,
    )
    console.print(t)
    if total["cpus_busy"] is not None:
        console.print(f"  on average {total['cpus_busy']:.3g} CPUs busy over the wall time")


def _render_cpu_split(console: Console, split: dict) -> None:
    if split.get("missing"):
        console.print(plain(f"  CPU time split: {split['missing']}"))
        return
    fields = list(split["all"]["ticks"])
    t = table("how those CPUs spent their time (/proc/stat)", ["cpu", "workload ran"] + fields)
    for c in split["per_cpu"]:
        t.add_row(str(c["cpu"]), fmt_share(c["workload_share"]), *[fmt_share(c["shares"][f]) for f in fields])
    t.add_row("all", "", *[fmt_share(split["all"]["shares"][f]) for f in fields], style="bold", end_section=True)
    console.print(t)
    console.print(plain(f"  CPUs: {split['basis']}"), style="dim")
    console.print(
        f"  system-wide: anything else on these CPUs counts too; in ticks of {split['tick_ns'] / 1e6:g} ms "
        "(guest time is inside user)",
        style="dim",
    )
    if split["not_online_throughout"]:
        console.print(
            f"  CPUs {', '.join(map(str, split['not_online_throughout']))} were not online at both snapshots: left out",
            style="yellow",
        )


def render(console: Console, section: dict) -> None:
    heading(console, section)
    if section["total"] is not None:
        _render_threads(console, section)
    _render_cpu_split(console, section["cpu_split"])
    footer(console, section)
