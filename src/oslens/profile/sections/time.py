"""Execution time: user vs kernel time per thread and in total (from the
thread records), and how the CPUs the workload ran on spent their time
(/proc/stat, system-wide)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console

from ... import format as fmt
from ...format import ns, plural, sig
from ...procfs import TIME_FIELDS
from .common import (
    THREADS_PARTIAL,
    add_crosscheck,
    footer,
    heading,
    new_section,
    plain,
    ratio,
    table,
)

if TYPE_CHECKING:
    from ...report.html.page import Figure, Note, Section, Table
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
    """A CPU's /proc/stat time by field; its shares only when a few units
    elapsed: each field is truncated to whole units, so a share of one or two
    says which field a unit fell in, not where the time went."""
    fields = {f: ticks[f] for f in TIME_FIELDS if f in ticks}
    elapsed = sum(fields.values())
    split = elapsed >= MIN_TICKS_FOR_A_SPLIT
    return {
        "ticks": fields,
        "elapsed_ns": elapsed * tick_ns,
        "split": split,
        "shares": {f: ratio(n, elapsed) if split else None for f, n in fields.items()},
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
                    "workload_share": ratio(workload_ns.get(cpu), split["elapsed_ns"]) if split["split"] else None,
                    **split,
                }
            )
    summed = {f: sum(c["ticks"].get(f, 0) for c in per_cpu) for f in TIME_FIELDS}
    config = recs.last("kernel_config") or {}
    return {
        "irq_unavailable": config.get("irq_time"),  # None: the irq column is real (or not known to be 0)
        "basis": basis,
        "cpus": [c["cpu"] for c in per_cpu],
        "tick_ns": tick_ns,
        # A CPU offline at either snapshot has no difference to show.
        "not_online_throughout": [cpu for cpu in cpus if cpu not in delta.cpus],
        "all": _ticks_split(summed, tick_ns),
        "per_cpu": per_cpu,
    }


# utime/stime are sampled at the tick: a thread that ran fewer ticks than this
# has a user/kernel split that says which tick it happened to be caught in,
# not where its time went (`cat` shows "100.0 % kernel" from one sample).
MIN_TICKS_FOR_A_SPLIT = 3


def _split_known(runtime_ns: float | None, tick_ns: float) -> bool:
    return runtime_ns is not None and runtime_ns >= MIN_TICKS_FOR_A_SPLIT * tick_ns


def _thread_row(t, tick_ns: float) -> dict:
    """A thread's figures; `split` False when it ran too few ticks for its user/kernel
    split to be shown (the values stay, for sums over many threads, which are sound)."""
    split = _split_known(t.runtime_ns, tick_ns)
    return {
        **t.to_dict(),
        "split": split,
        "kernel_share": ratio(t.system_ns, t.user_ns + t.system_ns) if split else None,
    }


def _total(user: int, system: int, runtime: int, tick_ns: float, few_ticks: str, wall_s: float | None) -> dict:
    """The workload's total; its user/kernel split only when it ran a few ticks
    (else `split_why` says why there is none)."""
    split = _split_known(runtime, tick_ns)
    return {
        "user_ns": user if split else None,
        "system_ns": system if split else None,
        "runtime_ns": runtime,
        "kernel_share": ratio(system, user + system) if split else None,
        "split_why": None
        if split
        else f"the workload ran {fmt.ns(runtime)} of CPU time, less than {few_ticks}: "
        "user and kernel time are sampled at the tick, so they cannot be told apart",
        "cpus_busy": ratio(runtime / 1e9, wall_s),
    }


def summarize(recs: Records) -> dict:
    section = new_section(TITLE)
    threads = sorted(recs.threads, key=lambda t: t.runtime_ns, reverse=True)
    tick_ns, tick_what = recs.tick
    few_ticks = f"{MIN_TICKS_FOR_A_SPLIT} ticks ({fmt.ns(MIN_TICKS_FOR_A_SPLIT * tick_ns)}, {tick_what})"
    section["tick_ns"] = tick_ns
    section["threads"] = [_thread_row(t, tick_ns) for t in threads[:THREADS_KEPT]]
    short = sum(1 for t in threads if not _split_known(t.runtime_ns, tick_ns))
    if short:
        section["notes"].append(
            f"{plural(short, 'thread')} ran less than {few_ticks}: user and kernel time are tick-sampled, "
            "so their split is not shown (their runtime is precise and counts in the total)"
        )
    section["threads_count"] = len(threads)
    section["threads_omitted"] = max(0, len(threads) - THREADS_KEPT)
    runtime = sum(t.runtime_ns for t in threads) if threads else None
    if threads:
        user, system = sum(t.user_ns for t in threads), sum(t.system_ns for t in threads)
        section["total"] = _total(user, system, runtime, tick_ns, few_ticks, recs.wall_s)
        if not recs.threads_complete:
            section["notes"].append(THREADS_PARTIAL)
    elif ru := recs.rusage:
        # the kernel's own sum for the command and every descendant it
        # waited for: the whole tree's time, though not per thread; its user
        # and system are tick samples scaled to the precise runtime, their sum
        user, system = ru["utime_ns"], ru["stime_ns"]
        section["total"] = _total(user, system, user + system, tick_ns, few_ticks, recs.wall_s)
        section["notes"].append(
            f"{_why_no_threads(recs)}; the total is the command's rusage (wait4): itself "
            "and the descendants it waited for (user and kernel scaled from ticks, their sum precise)"
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
        {
            "threads' runtime": runtime,
            # the command's and its waited-for descendants' runtime, summed by the kernel
            "rusage (wait4)": recs.rusage["utime_ns"] + recs.rusage["stime_ns"] if recs.rusage else None,
            "task-clock counter": recs.counter_value("task-clock"),
        },
        unit="ns",
    )
    section["cpu_split"] = _cpu_split(recs)
    return section


def _render_threads(console: Console, section: dict) -> None:
    t = table(
        "per thread (kernel share = system / (user + system); user and kernel tick-sampled, runtime precise)",
        ["thread", "tid", "user", "kernel", "kernel share", "runtime", "switches vol/invol", "faults min/maj", "ended"],
    )
    for th in section["threads"]:
        t.add_row(
            plain(th["comm"]),
            str(th["tid"]),
            fmt.ns(th["user_ns"]) if th.get("split", True) else "–",
            fmt.ns(th["system_ns"]) if th.get("split", True) else "–",
            fmt.share(th["kernel_share"]) if th.get("split", True) else "< 3 ticks",
            fmt.ns(th["runtime_ns"]),
            f"{fmt.count(th['nvcsw'])}/{fmt.count(th['nivcsw'])}",
            f"{fmt.count(th['min_flt'])}/{fmt.count(th['maj_flt'])}",
            "exited" if th["ended"] == "exit" else "alive",
        )
    total = section["total"]
    if section["threads_omitted"]:
        t.add_row(f"… {section['threads_omitted']:,} more threads", *[""] * 8)
    n = section["threads_count"]
    label = f"total ({n:,} thread{'s' if n > 1 else ''})" if n else "total (rusage)"
    t.add_row(
        label,
        "",
        fmt.ns(total["user_ns"]),
        fmt.ns(total["system_ns"]),
        fmt.share(total["kernel_share"]),
        fmt.ns(total["runtime_ns"]),
        "",
        "",
        "",
        style="bold",
        end_section=True,
    )
    console.print(t)
    if total.get("split_why"):
        console.print(plain(f"  total: no user/kernel split: {total['split_why']}"), style="yellow")
    if total["cpus_busy"] is not None:
        console.print(f"  on average {sig(total['cpus_busy'])} CPUs busy over the wall time")


def _render_cpu_split(console: Console, split: dict) -> None:
    if split.get("missing"):
        console.print(plain(f"  CPU time split: {split['missing']}"))
        return
    fields = list(split["all"]["ticks"])
    t = table("how those CPUs spent their time (/proc/stat)", ["cpu", "workload ran"] + fields)
    no_irq = split.get("irq_unavailable")

    def cell(shares: dict, f: str) -> str:
        return "n/a" if f == "irq" and no_irq else fmt.share(shares[f])

    for c in split["per_cpu"]:
        t.add_row(str(c["cpu"]), fmt.share(c["workload_share"]), *[cell(c["shares"], f) for f in fields])
    t.add_row("all", "", *[cell(split["all"]["shares"], f) for f in fields], style="bold", end_section=True)
    console.print(t)
    unsplit = [str(c["cpu"]) for c in split["per_cpu"] if not c.get("split", True)]
    if unsplit:
        console.print(
            plain(
                f"  CPU{'s' if len(unsplit) > 1 else ''} {', '.join(unsplit)}: no split, less than "
                f"{MIN_TICKS_FOR_A_SPLIT} units of {fmt.ns(split['tick_ns'])} elapsed there between the snapshots "
                "(/proc/stat counts in whole units)"
            ),
            style="yellow",
        )
    if no_irq:
        console.print(plain(f"  irq: {no_irq}"), style="yellow")
    console.print(plain(f"  CPUs: {split['basis']}"), style="dim")
    console.print(
        f"  system-wide: anything else on these CPUs counts too; in units of {fmt.ns(split['tick_ns'])} "
        "(USER_HZ; guest time is inside user)",
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


# ---- the HTML report ------------------------------------------------------
# altair, pandas and the page are imported by the functions that draw (see html_common).

TOP_THREADS = 15

# Fixed colours so that "kernel" is the same red in every figure and run.
PARTS = {"user": "#4c78a8", "kernel": "#e45756"}
# /proc/stat fields in stacking order, idle last so the busy parts line up at the left.
CPU_FIELDS = {
    "user": "#4c78a8",
    "nice": "#9ecae9",
    "system": "#e45756",
    "irq": "#f58518",
    "softirq": "#eeca3b",
    "iowait": "#b279a2",
    "steal": "#9d755d",
    "idle": "#dddddd",
}


def _html_thread_rows(rd, section: dict) -> list[dict]:
    """User and kernel time of the busiest threads, then the rest of the
    threads as one bar, so that the bars add up to the total."""
    rows, seen = [], {}
    shown = section["threads"][:TOP_THREADS]
    for rank, th in enumerate(shown):
        label = f"{th['comm']} {th['tid']}"
        # a tid reused within the profile is two threads: keep their bars apart
        seen[label] = seen.get(label, 0) + 1
        if seen[label] > 1:
            label += f" ({seen[label]})"
        info = {
            "run": rd.short,
            "thread": label,
            "rank": rank,
            "kernel_share": th["kernel_share"],
            "switches": f"{th['nvcsw']:,} voluntary / {th['nivcsw']:,} involuntary",
            "faults": f"{th['min_flt']:,} minor / {th['maj_flt']:,} major",
            "ended": "exited" if th["ended"] == "exit" else "alive at the end",
        }
        if th.get("split", True):
            rows += [{**info, "part": "user", "ns": th["user_ns"]}, {**info, "part": "kernel", "ns": th["system_ns"]}]
        else:
            rows.append({**info, "part": "not split (< 3 ticks)", "ns": th["runtime_ns"]})
    rest = section["threads_count"] - len(shown)
    total = section["total"]
    if rest > 0 and total is not None and total["user_ns"] is not None:
        user = total["user_ns"] - sum(th["user_ns"] for th in shown)
        system = total["system_ns"] - sum(th["system_ns"] for th in shown)
        info = {
            "run": rd.short,
            "thread": f"{rest:,} other threads",
            "rank": len(shown),
            "kernel_share": ratio(system, user + system),
            "switches": None,
            "faults": None,
            "ended": None,
        }
        rows += [{**info, "part": "user", "ns": user}, {**info, "part": "kernel", "ns": system}]
    return rows


def _html_threads(profiles) -> Figure | None:
    import altair as alt
    import pandas as pd

    from ...report.html.page import Figure
    from .html_common import in_unit, run_order, run_rows

    rows = [r for rd, s in profiles for r in _html_thread_rows(rd, s["sections"]["time"])]
    if not rows:
        return None
    df = pd.DataFrame(rows)
    unit = in_unit(df, stacked_by=["run", "thread"])
    chart = (
        alt.Chart(df)
        .mark_bar()
        .encode(
            alt.X("time:Q", title=f"CPU time ({unit})"),
            alt.Y("thread:N", sort=alt.EncodingSortField("rank", op="min"), title=None, axis=alt.Axis(labelLimit=220)),
            alt.Color("part:N", title="", scale=alt.Scale(domain=list(PARTS), range=list(PARTS.values()))),
            alt.Order("part:N", sort="descending"),
            tooltip=[
                "run",
                "thread",
                "part",
                alt.Tooltip("time:Q", title=unit, format=".4g"),
                alt.Tooltip("kernel_share:Q", format=".1%", title="kernel share"),
                "switches",
                "faults",
                "ended",
            ],
        )
        .properties(width=700, height=alt.Step(16))
        .facet(row=run_rows(run_order(profiles)))
        .resolve_scale(y="independent")
    )
    return Figure(
        "profile-thread-time",
        f"user and kernel time per thread (the {TOP_THREADS} busiest)",
        chart,
        "kernel = system time; tick-sampled utime/stime scaled to each thread's precise runtime, as "
        "the kernel does for /proc; the last bar of a panel adds up the threads not shown",
    )


def _html_total(profiles) -> tuple[Figure, Table] | None:
    import altair as alt
    import pandas as pd

    from ...report.html.page import Figure, Table
    from .html_common import in_unit, run_order

    rows, table = [], []
    for rd, s in profiles:
        section = s["sections"]["time"]
        total = section["total"]
        if total is None:
            continue
        n = section["threads_count"]
        source = f"{n:,} thread{'s' if n > 1 else ''}" if n else "rusage (wait4)"
        if total["user_ns"] is None:  # too short for a tick-sampled split: the runtime alone
            rows.append(
                {
                    "run": rd.short,
                    "part": "not split (< 3 ticks)",
                    "ns": total["runtime_ns"],
                    "source": source,
                    "kernel_share": None,
                }
            )
        else:
            rows += [
                {
                    "run": rd.short,
                    "part": part,
                    "ns": total[key],
                    "source": source,
                    "kernel_share": total["kernel_share"],
                }
                for part, key in (("user", "user_ns"), ("kernel", "system_ns"))
            ]
        table.append(
            [
                rd.short,
                source,
                fmt.ns(total["user_ns"]),
                fmt.ns(total["system_ns"]),
                fmt.share(total["kernel_share"]),
                fmt.ns(total["runtime_ns"]),
                sig(total["cpus_busy"]),
            ]
        )
    if not rows:
        return None
    df = pd.DataFrame(rows)
    unit = in_unit(df, stacked_by=["run"])
    chart = (
        alt.Chart(df)
        .mark_bar()
        .encode(
            alt.X("time:Q", title=f"CPU time ({unit})"),
            alt.Y("run:N", sort=run_order(profiles), title=None),
            alt.Color("part:N", title="", scale=alt.Scale(domain=list(PARTS), range=list(PARTS.values()))),
            alt.Order("part:N", sort="descending"),
            tooltip=[
                "run",
                "part",
                alt.Tooltip("time:Q", title=unit, format=".4g"),
                "source",
                alt.Tooltip("kernel_share:Q", format=".1%", title="kernel share"),
            ],
        )
        .properties(width=700, height=alt.Step(28))
    )
    return (
        Figure(
            "profile-total-time",
            "user and kernel time of the whole workload",
            chart,
            "every thread of the process tree; without per-thread figures, the command's rusage",
        ),
        Table(
            "the whole workload",
            ["run", "summed over", "user", "kernel", "kernel share", "runtime", "CPUs busy on average"],
            table,
        ),
    )


def _html_cpu_split(profiles) -> tuple[list, list[Note]]:
    """How the CPUs the workload ran on spent their time (/proc/stat, system-wide),
    with a tick where the workload's own share of each CPU ends."""
    import altair as alt
    import pandas as pd

    from ...report.html.page import Figure, Note
    from .html_common import run_order

    rows, notes = [], []
    for rd, s in profiles:
        split = s["sections"]["time"]["cpu_split"]
        if split.get("missing"):
            notes.append(Note(f"{rd.short}: CPU time split {split['missing']}", warning=True))
            continue
        if not split["all"].get("split", split["all"]["elapsed_ns"]):
            # /proc/stat counts in whole units: a profile of a few units has no split to draw
            notes.append(
                Note(
                    f"{rd.short}: no CPU time split: less than {MIN_TICKS_FOR_A_SPLIT} units of "
                    f"{fmt.ns(split['tick_ns'])} (USER_HZ) elapsed between the /proc/stat snapshots",
                    warning=True,
                )
            )
            continue
        notes.append(Note(f"{rd.short}: CPUs shown: {split['basis']}; ticks of {ns(split['tick_ns'])}"))
        if split["not_online_throughout"]:
            notes.append(
                Note(
                    f"{rd.short}: CPUs {', '.join(map(str, split['not_online_throughout']))} were not "
                    "online at both snapshots: left out",
                    warning=True,
                )
            )
        unsplit = [c["cpu"] for c in split["per_cpu"] if not c.get("split", c["elapsed_ns"])]
        if unsplit:
            notes.append(
                Note(
                    f"{rd.short}: less than {MIN_TICKS_FOR_A_SPLIT} units elapsed on CPUs "
                    f"{', '.join(map(str, unsplit))} between the snapshots: left out"
                )
            )
        cpus = [(f"cpu {c['cpu']}", c) for c in split["per_cpu"] if c.get("split", c["elapsed_ns"])]
        cpus.append(("all", {**split["all"], "workload_share": None}))
        for rank, (label, c) in enumerate(cpus):
            # the workload's share goes on one row of each CPU only, so that one tick is drawn
            rows += [
                {
                    "run": rd.short,
                    "cpu": label,
                    "rank": rank,
                    "field": f,
                    "order": i,
                    "share": c["shares"].get(f) or 0.0,
                    "ticks": c["ticks"].get(f, 0),
                    "workload_share": c.get("workload_share") if i == 0 else None,
                }
                for i, f in enumerate(CPU_FIELDS)
                if f in c["ticks"]
            ]
    if not rows:
        return [], notes
    df = pd.DataFrame(rows)
    y = alt.Y("cpu:N", sort=alt.EncodingSortField("rank", op="min"), title=None)
    bars = (
        alt.Chart()
        .mark_bar()
        .encode(
            alt.X(
                "share:Q", axis=alt.Axis(format="%"), title="share of the CPU's time", scale=alt.Scale(domain=[0, 1])
            ),
            y,
            alt.Color("field:N", title="", scale=alt.Scale(domain=list(CPU_FIELDS), range=list(CPU_FIELDS.values()))),
            alt.Order("order:Q"),
            tooltip=["run", "cpu", "field", alt.Tooltip("share:Q", format=".1%"), "ticks"],
        )
    )
    # only one row per CPU has a share (see above): the others are left out as invalid values
    ticks = (
        alt.Chart()
        .mark_tick(color="black", thickness=2, size=14, clip=True)
        .encode(
            alt.X("workload_share:Q"),
            y,
            tooltip=["run", "cpu", alt.Tooltip("workload_share:Q", format=".1%", title="the workload ran")],
        )
    )
    # one panel per run stacked by hand rather than faceted: stacked bars layered with ticks in a facet
    # with independent rows make Vega-Lite warn that it unions domains from different sources
    step = 18 if df.cpu.nunique() <= 32 else 10  # a 128-CPU machine would be 2,300 px tall per run
    panels = [
        alt.layer(bars, ticks, data=df[df.run == run]).properties(title=run, width=700, height=alt.Step(step))
        for run in run_order(profiles)
        if run in set(df.run)
    ]
    chart = alt.vconcat(*panels).resolve_scale(y="independent")
    fig = Figure(
        "profile-cpu-split",
        "how the CPUs spent their time (/proc/stat)",
        chart,
        "system-wide: anything else on these CPUs counts too (guest time is inside user); black tick: "
        "the share of the CPU's time the workload ran (BPF)",
    )
    return [fig], notes


def html(profiles) -> Section:
    from ...report.html.page import Section
    from .html_common import caveats, crosschecks, section_title

    blocks = caveats(profiles, "time")
    threads = _html_threads(profiles)
    if threads:
        blocks.append(threads)
    total = _html_total(profiles)
    if total:
        blocks += total
    figs, notes = _html_cpu_split(profiles)
    blocks += figs + notes + crosschecks(profiles, "time")
    return Section(section_title(profiles, "time"), blocks)
