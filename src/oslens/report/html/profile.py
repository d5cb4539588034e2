"""`profile` runs: where the workload's time went in the kernel, one report
section per profile section (oslens.profile.sections), drawn from the same
summary the terminal prints (`oslens.profile.summary.summarize`).

Several runs are overlaid as a comparison (two kernels profiling the same
command): charts whose categories are shared (softirq vectors, system calls,
latency decades) put the runs side by side in one colour each; charts whose
categories belong to one run (its threads, its CPUs) get one panel per run.
Whatever a run could not measure is said in a Note with the reason the
summary gives, never drawn as an empty plot."""

from __future__ import annotations

import altair as alt
import pandas as pd

from ...format import si
from ...profile.sections.common import (
    DECADES,
    crosscheck_text,
    fmt_count,
    fmt_ns,
    fmt_rate,
    fmt_share,
    ratio,
    resolution_legend,
)
from ...profile.sections.counters import METRICS, SCOPES
from ...profile.sections.switches import LATENCIES
from ...profile.summary import bpf_line, summarize, target_line
from .page import Figure, Note, Section, Table

TOP_THREADS = 15
TOP_CALLS = 15
TOP_IRQS = 15  # hard IRQs and vectors in the table
TOP_SPREAD = 20  # interrupt sources in the heatmap
CELL_TEXT_CPUS = 16  # beyond this many CPUs the heatmap's cells are too small for their counts

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
DECADE_LABELS = [label for _, label in DECADES]

LATENCY_COLUMNS = ["count", "avg", "min", "p50", "p99", "max", "stddev"]


# ---- shared pieces ---------------------------------------------------------------


def _time_unit(max_ns: float) -> tuple[float, str]:
    """The unit in which the largest value reads best: profiles last from
    milliseconds to hours, so a fixed unit would give 0.0004 s or 3.6e6 ms."""
    for scale, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")):
        if max_ns >= scale:
            return scale, unit
    return 1.0, "ns"


def _in_unit(df: pd.DataFrame, stacked_by: list[str] | None = None) -> str:
    """Adds a "time" column to df (from its "ns") in the unit its longest bar
    reads best in, and returns the unit. Stacked bars are as long as the sum of
    the rows that share `stacked_by`."""
    longest = df.groupby(stacked_by)["ns"].sum().max() if stacked_by else df["ns"].max()
    scale, unit = _time_unit(float(longest or 0))
    df["time"] = df["ns"] / scale
    return unit


def _order(profiles) -> list[str]:
    """The runs in the order asked for (not alphabetical, which puts run 10 before
    run 2): every figure lists and colours them the same way, with or without data of each."""
    return [rd.short for rd, _ in profiles]


def _run_colour(order: list[str]) -> alt.Color:
    return alt.Color("run:N", title="run", scale=alt.Scale(domain=order))


def _run_rows(order: list[str]) -> alt.Row:
    return alt.Row("run:N", sort=order, title=None, header=alt.Header(labelAngle=0, labelAlign="left"))


def _latency_cells(stats: dict | None) -> list[str]:
    if stats is None:
        return ["–"] * len(LATENCY_COLUMNS)
    return [fmt_count(stats["count"])] + [
        fmt_ns(stats[k]) for k in ("avg_ns", "min_ns", "p50_ns", "p99_ns", "max_ns", "std_ns")
    ]


def _caveats(profiles, key: str) -> list[Note]:
    """Why a run lacks a section's main data, and the section's warnings about
    what it did measure: said before the figures they qualify."""
    out = []
    for rd, s in profiles:
        section = s["sections"][key]
        if section.get("missing"):
            out.append(Note(f"{rd.short}: {section['missing']}", warning=True))
        out += [Note(f"{rd.short}: {note}", warning=True) for note in section.get("notes", [])]
    return out


def _crosscheck(rd, check: dict) -> Note:
    text, off = crosscheck_text(check)
    return Note(f"{rd.short}, cross-check of {text}", warning=off)


def _crosschecks(profiles, key: str) -> list[Note]:
    """The same figure from independent sources, side by side: after the figures."""
    return [_crosscheck(rd, check) for rd, s in profiles for check in s["sections"][key].get("crosschecks", [])]


def _title(profiles, key: str) -> str:
    return f"Profile: {profiles[0][1]['sections'][key]['title']}"


def _distribution(profiles, get, names: dict[str, str]) -> pd.DataFrame:
    """Decade shares of latency histograms: one row per run, histogram and decade.
    `get(section_dict)` gives {key: stats}; `names` the label of each key drawn."""
    rows = []
    for rd, s in profiles:
        for key, stats in (get(s) or {}).items():
            if key not in names or not stats or not stats["count"]:
                continue
            rows += [
                {
                    "run": rd.short,
                    "what": names[key],
                    "decade": label,
                    "share": stats["distribution"].get(label, 0.0),
                    "count": stats["count"],
                }
                for label in DECADE_LABELS
            ]
    return pd.DataFrame(rows)


def _distribution_chart(df: pd.DataFrame, panels: list[str], order: list[str]) -> alt.TopLevelMixin:
    """Share of values per decade, the runs side by side, one panel per histogram."""
    return (
        alt.Chart(df)
        .mark_bar()
        .encode(
            alt.X("decade:O", sort=DECADE_LABELS, title=None, axis=alt.Axis(labelAngle=0)),
            alt.Y("share:Q", axis=alt.Axis(format="%"), title="share of values"),
            _run_colour(order),
            alt.XOffset("run:N", scale=alt.Scale(domain=order)),
            tooltip=["run", "what", "decade", alt.Tooltip("share:Q", format=".2%"), "count"],
        )
        .properties(width=440, height=170)
        .facet(facet=alt.Facet("what:N", sort=panels, title=None), columns=2)
    )


# ---- overview --------------------------------------------------------------------


def _overview(profiles) -> Section:
    """What each run profiled, how it ended, and how much of the kernel side was seen."""
    blocks = []
    for rd, s in profiles:
        target, bpf = s["target"], s["bpf"]
        blocks.append(Note(f"{rd.short}: {target_line(target)}"))
        line, style = bpf_line(bpf)
        blocks.append(Note(f"{rd.short}: {line}", warning=style != "dim"))
        if target.get("error"):
            blocks.append(Note(f"{rd.short}: engine error: {target['error']}", warning=True))
        if target.get("status") not in (None, "ok"):
            blocks.append(
                Note(
                    f"{rd.short}: the run ended {target['status']}: figures cover only what was measured", warning=True
                )
            )
        if bpf.get("lost_events"):
            blocks.append(
                Note(
                    f"{rd.short}: {bpf['lost_events']:,} kernel events were dropped (a BPF map was "
                    "full): BPF counts are lower bounds",
                    warning=True,
                )
            )
    return Section("Profile", blocks)


# ---- execution time ----------------------------------------------------------------


def _thread_rows(rd, section: dict) -> list[dict]:
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
        rows += [{**info, "part": "user", "ns": th["user_ns"]}, {**info, "part": "kernel", "ns": th["system_ns"]}]
    rest = section["threads_count"] - len(shown)
    total = section["total"]
    if rest > 0 and total is not None:
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


def _thread_figure(profiles) -> Figure | None:
    rows = [r for rd, s in profiles for r in _thread_rows(rd, s["sections"]["time"])]
    if not rows:
        return None
    df = pd.DataFrame(rows)
    unit = _in_unit(df, stacked_by=["run", "thread"])
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
        .facet(row=_run_rows(_order(profiles)))
        .resolve_scale(y="independent")
    )
    return Figure(
        "profile-thread-time",
        f"user and kernel time per thread (the {TOP_THREADS} busiest)",
        chart,
        "kernel = system time; tick-sampled utime/stime scaled to each thread's precise runtime, as "
        "the kernel does for /proc; the last bar of a panel adds up the threads not shown",
    )


def _total_figure(profiles) -> tuple[Figure, Table] | None:
    rows, table = [], []
    for rd, s in profiles:
        section = s["sections"]["time"]
        total = section["total"]
        if total is None:
            continue
        n = section["threads_count"]
        source = f"{n:,} thread{'s' if n > 1 else ''}" if n else "rusage (wait4)"
        rows += [
            {"run": rd.short, "part": part, "ns": total[key], "source": source, "kernel_share": total["kernel_share"]}
            for part, key in (("user", "user_ns"), ("kernel", "system_ns"))
        ]
        table.append(
            [
                rd.short,
                source,
                fmt_ns(total["user_ns"]),
                fmt_ns(total["system_ns"]),
                fmt_share(total["kernel_share"]),
                fmt_ns(total["runtime_ns"]),
                "–" if total["cpus_busy"] is None else f"{total['cpus_busy']:.3g}",
            ]
        )
    if not rows:
        return None
    df = pd.DataFrame(rows)
    unit = _in_unit(df, stacked_by=["run"])
    chart = (
        alt.Chart(df)
        .mark_bar()
        .encode(
            alt.X("time:Q", title=f"CPU time ({unit})"),
            alt.Y("run:N", sort=_order(profiles), title=None),
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


def _cpu_split_figure(profiles) -> tuple[list, list[Note]]:
    """How the CPUs the workload ran on spent their time (/proc/stat, system-wide),
    with a tick where the workload's own share of each CPU ends."""
    rows, notes = [], []
    for rd, s in profiles:
        split = s["sections"]["time"]["cpu_split"]
        if split.get("missing"):
            notes.append(Note(f"{rd.short}: CPU time split {split['missing']}", warning=True))
            continue
        if not split["all"]["elapsed_ns"]:
            # /proc/stat counts in ticks: a profile shorter than one tick has no split to draw
            notes.append(
                Note(
                    f"{rd.short}: no CPU time split: no tick ({split['tick_ns'] / 1e6:g} ms) elapsed "
                    "between the /proc/stat snapshots",
                    warning=True,
                )
            )
            continue
        notes.append(Note(f"{rd.short}: CPUs shown: {split['basis']}; ticks of {split['tick_ns'] / 1e6:g} ms"))
        if split["not_online_throughout"]:
            notes.append(
                Note(
                    f"{rd.short}: CPUs {', '.join(map(str, split['not_online_throughout']))} were not "
                    "online at both snapshots: left out",
                    warning=True,
                )
            )
        idle = [c["cpu"] for c in split["per_cpu"] if not c["elapsed_ns"]]
        if idle:
            notes.append(
                Note(f"{rd.short}: no tick elapsed on CPUs {', '.join(map(str, idle))} between the snapshots: left out")
            )
        cpus = [(f"cpu {c['cpu']}", c) for c in split["per_cpu"] if c["elapsed_ns"]]
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
        for run in _order(profiles)
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


def _time(profiles) -> Section:
    blocks = _caveats(profiles, "time")
    threads = _thread_figure(profiles)
    if threads:
        blocks.append(threads)
    total = _total_figure(profiles)
    if total:
        blocks += total
    figs, notes = _cpu_split_figure(profiles)
    blocks += figs + notes + _crosschecks(profiles, "time")
    return Section(_title(profiles, "time"), blocks)


# ---- context switches --------------------------------------------------------------


def _rate_or_total(c: dict) -> str:
    if c.get("voluntary_per_s") is not None and c.get("involuntary_per_s") is not None:
        return fmt_rate(c["voluntary_per_s"] + c["involuntary_per_s"])
    return fmt_rate(c.get("total_per_s"))


def _switch_counts(profiles) -> Table:
    rows = []
    for rd, s in profiles:
        c = s["sections"]["switches"]["counts"]
        migrated = f"{fmt_share(c['migrated_share'])} of {c['switch_ins']:,}" if c.get("switch_ins") else "–"
        rows.append(
            [
                rd.short,
                fmt_count(c.get("voluntary")),
                fmt_rate(c.get("voluntary_per_s")),
                fmt_count(c.get("involuntary")),
                fmt_rate(c.get("involuntary_per_s")),
                _rate_or_total(c),
                fmt_rate(c.get("wakeups_per_s")),
                fmt_rate(c.get("migrations_per_s")),
                migrated,
                c.get("source") or "no source had a count",
            ]
        )
    return Table(
        "switches of the workload's threads",
        [
            "run",
            "voluntary",
            "per s",
            "involuntary (preempted)",
            "per s",
            "all per s",
            "wake-ups per s",
            "migrations per s",
            "switch-ins on another CPU",
            "from",
        ],
        rows,
        "voluntary: the thread blocked, slept or yielded; involuntary: it was preempted",
    )


def _members(members: list[dict], limit: int = 6) -> str:
    shown = ", ".join(f"{m['comm']} {m['count']:,}" for m in members[:limit])
    return shown + (f", … {len(members) - limit} more" if len(members) > limit else "")


def _preemptions(profiles) -> list:
    """Who ran next after a preemption: table by group and kernel-thread
    family with the names, and a bar per run of the three groups' shares."""
    rows, bars = [], []
    for rd, s in profiles:
        p = s["sections"]["switches"]["preemptions"]
        if not p or not p["total"]:
            continue
        groups = (
            ("kernel threads", p["kernel_threads"], ""),
            ("other applications", p["other_applications"], _members(p["other_applications_top"])),
            ("the workload's own threads", p["workload"], _members(p["workload_top"])),
        )
        for i, (group, n, which) in enumerate(groups):
            rows.append([rd.short, group, fmt_count(n), fmt_share(ratio(n, p["total"])), which])
            bars.append({"run": rd.short, "group": group, "order": i, "count": n, "share": ratio(n, p["total"])})
            if i == 0:
                rows += [
                    [
                        rd.short,
                        f"kernel threads: {fam['family']}",
                        fmt_count(fam["count"]),
                        fmt_share(ratio(fam["count"], p["total"])),
                        _members(fam["members"]),
                    ]
                    for fam in p["kernel_thread_families"]
                ]
    if not rows:
        return []
    groups = ["kernel threads", "other applications", "the workload's own threads"]
    chart = (
        alt.Chart(pd.DataFrame(bars))
        .mark_bar()
        .encode(
            alt.X(
                "share:Q", axis=alt.Axis(format="%"), title="share of the preemptions", scale=alt.Scale(domain=[0, 1])
            ),
            alt.Y("run:N", sort=_order(profiles), title=None),
            alt.Color(
                "group:N", title="ran next", scale=alt.Scale(domain=groups, range=["#e45756", "#f58518", "#4c78a8"])
            ),
            alt.Order("order:Q"),
            tooltip=["run", "group", "count", alt.Tooltip("share:Q", format=".1%")],
        )
        .properties(width=700, height=alt.Step(28))
    )
    return [
        Figure("profile-preemptions", "who ran next after a preemption", chart),
        Table(
            "who ran next after a preemption",
            ["run", "ran next", "count", "share", "which"],
            rows,
            "kernel threads grouped by family (kworker/1:2 is kworker/*)",
        ),
    ]


def _switch_latency(profiles) -> list:
    table = [
        [rd.short, LATENCIES[key], *_latency_cells(stats)]
        for rd, s in profiles
        for key, stats in s["sections"]["switches"]["latency"].items()
    ]
    if not table:
        return []
    df = _distribution(profiles, lambda s: s["sections"]["switches"]["latency"], LATENCIES)
    stats = [st for _, s in profiles for st in s["sections"]["switches"]["latency"].values()]
    blocks = [Table("time between switches", ["run", "", *LATENCY_COLUMNS], table, resolution_legend(*stats))]
    if not df.empty:
        blocks.insert(
            0,
            Figure(
                "profile-switch-latency",
                "off-CPU time and run-queue wait",
                _distribution_chart(df, list(LATENCIES.values()), _order(profiles)),
                "share of switches per decade of duration; off-CPU: switch-out to the next "
                "switch-in, run-queue wait: wake-up or preemption to switch-in",
            ),
        )
    return blocks


def _switches(profiles) -> Section:
    blocks = _caveats(profiles, "switches")
    blocks.append(_switch_counts(profiles))
    blocks += _preemptions(profiles) + _switch_latency(profiles) + _crosschecks(profiles, "switches")
    return Section(_title(profiles, "switches"), blocks)


# ---- page faults -------------------------------------------------------------------


def _faults(profiles) -> Section:
    blocks = _caveats(profiles, "faults")
    rows = []
    for rd, s in profiles:
        section = s["sections"]["faults"]
        c, latency = section["counts"], section["latency"] or {}
        if c["source"] is None:
            blocks.append(Note(f"{rd.short}: no page-fault count from any source", warning=True))
            continue
        source = c["source"] + ("; latency from BPF" if latency else "")
        # the minor faults' latency is not separable from the all-faults
        # histogram (only major faults have their own): counts only
        rows.append(
            [
                rd.short,
                "minor",
                fmt_rate(c["minor_per_s"]),
                fmt_count(c["minor"]),
                *["–"] * (len(LATENCY_COLUMNS) - 1),
                source,
            ]
        )
        rows.append(
            [
                rd.short,
                "major",
                fmt_rate(c["major_per_s"]),
                fmt_count(c["major"]),
                *_latency_cells(latency.get("major"))[1:],
                source,
            ]
        )
        rows.append(
            [
                rd.short,
                "all",
                fmt_rate(c["all_per_s"]),
                fmt_count(c["all"]),
                *_latency_cells(latency.get("all"))[1:],
                source,
            ]
        )
    if rows:
        stats = [st for _, s in profiles for st in (s["sections"]["faults"]["latency"] or {}).values()]
        caption = "; ".join(
            filter(
                None,
                [
                    "minor faults have no latency of their own: the histogram covers all faults, and major ones apart",
                    resolution_legend(*stats),
                ],
            )
        )
        blocks.append(
            Table(
                "faults of the workload and their latency",
                ["run", "", "per s", *LATENCY_COLUMNS, "from"],
                rows,
                caption,
            )
        )
    df = _distribution(
        profiles, lambda s: s["sections"]["faults"]["latency"], {"all": "all faults", "major": "major faults"}
    )
    if not df.empty:
        blocks.append(
            Figure(
                "profile-fault-latency",
                "page-fault latency",
                _distribution_chart(df, ["all faults", "major faults"], _order(profiles)),
                "share of faults per decade of time spent handling them (BPF)",
            )
        )
    for rd, s in profiles:
        sw = s["sections"]["faults"]["system_wide"]
        if sw:
            blocks.append(
                Note(
                    f"{rd.short}: whole machine meanwhile (/proc/vmstat): {fmt_count(sw['minor'])} minor, "
                    f"{fmt_count(sw['major'])} major"
                )
            )
    blocks += _crosschecks(profiles, "faults")
    return Section(_title(profiles, "faults"), blocks)


# ---- interrupts --------------------------------------------------------------------


def _event_table(profiles) -> Table | None:
    """Hard IRQs and system vectors (BPF, all CPUs), the costliest first."""
    rows = []
    for rd, s in profiles:
        section = s["sections"]["interrupts"]
        for kind, key in (("hard IRQ", "hardirq"), ("vector", "vectors")):
            for r in (section[key] or {}).get("rows", [])[:TOP_IRQS]:
                rows.append(
                    [
                        rd.short,
                        kind,
                        r.get("irq", "–") if kind == "hard IRQ" else "–",
                        r["name"],
                        fmt_count(r["count"]),
                        fmt_rate(r["per_s"]),
                        fmt_ns(r["avg_ns"]),
                        fmt_ns(r["ns"]),
                        fmt_count(r["workload_count"]),
                        fmt_ns(r["workload_ns"]),
                    ]
                )
    if not rows:
        return None
    return Table(
        f"hard IRQs and system vectors (the {TOP_IRQS} costliest of each)",
        ["run", "kind", "irq", "name", "count", "per s", "avg", "total time", "while workload ran", "its time"],
        rows,
        'on every CPU, not only the workload\'s; "while workload ran": those that '
        "hit while a workload thread was on the CPU",
    )


def _irq_totals(profiles) -> list[Note]:
    out = []
    for rd, s in profiles:
        hard = s["sections"]["interrupts"]["hardirq"]
        if hard:
            t = hard["total"]
            out.append(
                Note(
                    f"{rd.short}: hard IRQs {fmt_rate(t['per_s'])} on all CPUs "
                    f"({fmt_rate(t['workload_per_s'])} while the workload ran), average handler time "
                    f"{fmt_ns(t['avg_ns'])}"
                )
            )
    return out


def _softirqs(profiles) -> list:
    """Softirq time by vector (BPF) as a chart; the counts of every run,
    /proc/softirqs included, as a table."""
    bars, rows = [], []
    for rd, s in profiles:
        for r in s["sections"]["interrupts"]["softirq"]["rows"]:
            if r["count"] is not None:
                bars.append(
                    {
                        "run": rd.short,
                        "vector": r["name"],
                        "ns": r["ns"],
                        "count": r["count"],
                        "avg": fmt_ns(r["avg_ns"]),
                        "while_workload": fmt_ns(r["workload_ns"]),
                    }
                )
                rows.append(
                    [
                        rd.short,
                        r["name"],
                        fmt_count(r["count"]),
                        fmt_rate(r["per_s"]),
                        fmt_ns(r["avg_ns"]),
                        fmt_ns(r["ns"]),
                        fmt_count(r["workload_count"]),
                        fmt_ns(r["workload_ns"]),
                        fmt_count(r["procfs_count"]),
                    ]
                )
            elif r["procfs_count"]:  # a vector that never ran says nothing
                rows.append(
                    [
                        rd.short,
                        r["name"],
                        "–",
                        fmt_rate(r["procfs_per_s"]),
                        "–",
                        "–",
                        "–",
                        "–",
                        fmt_count(r["procfs_count"]),
                    ]
                )
    blocks = []
    if bars:
        df = pd.DataFrame(bars)
        unit = _in_unit(df)
        chart = (
            alt.Chart(df)
            .mark_bar()
            .encode(
                alt.X("time:Q", title=f"time in the handlers ({unit})"),
                alt.Y("vector:N", sort=alt.EncodingSortField("ns", op="max", order="descending"), title=None),
                _run_colour(_order(profiles)),
                alt.YOffset("run:N", scale=alt.Scale(domain=_order(profiles))),
                tooltip=[
                    "run",
                    "vector",
                    alt.Tooltip("time:Q", title=unit, format=".4g"),
                    "count",
                    "avg",
                    alt.Tooltip("while_workload:N", title="while workload ran"),
                ],
            )
            .properties(width=700, height=alt.Step(12))
        )
        blocks.append(
            Figure(
                "profile-softirq-time", "softirq time by vector", chart, "all CPUs (BPF, softirq_entry to softirq_exit)"
            )
        )
    for rd, s in profiles:
        if s["sections"]["interrupts"]["softirq"]["total"] is None:
            blocks.append(
                Note(
                    f"{rd.short}: no softirq time without the BPF interrupt record; its counts from "
                    "/proc/softirqs are in the table"
                )
            )
    if rows:
        blocks.append(
            Table(
                "softirqs by vector",
                [
                    "run",
                    "vector",
                    "run (BPF)",
                    "per s",
                    "avg",
                    "total time",
                    "while workload ran",
                    "its time",
                    "run (/proc/softirqs)",
                ],
                rows,
                "vectors that never ran are left out",
            )
        )
    return blocks


def _spread_rows(rd, spread: dict) -> tuple[list[dict], int]:
    """Every interrupt source × CPU count of one run (the summary's
    /proc/interrupts difference), the busiest sources first, and how many
    sources were left out."""
    sources = spread["rows"]
    rows = []
    for row in sources[:TOP_SPREAD]:
        words = row["description"].split()
        # a device IRQ's description is "chip hwirq-type device" ("PCI-MSIX-0000:00:02.0 1-edge virtio1-req.0"):
        # its device names it; an architecture row's ("Local timer interrupts") is its meaning
        label = f"{row['irq']} · {words[-1] if row['device_irq'] else row['description']}" if words else row["irq"]
        rows += [
            {
                "run": rd.short,
                "source": label,
                "description": row["description"],
                "cpu": cpu,
                "count": n,
                "share": ratio(n, row["count"]),
                "total": row["count"],
            }
            for cpu, n in row["per_cpu"]
        ]
    return rows, max(0, len(sources) - TOP_SPREAD)


def _spread(profiles) -> list:
    rows, blocks = [], []
    for rd, s in profiles:
        spread = s["sections"]["interrupts"]["spread"]
        if spread.get("missing"):
            blocks.append(Note(f"{rd.short}: spread over CPUs {spread['missing']}", warning=True))
            continue
        run_rows, left_out = _spread_rows(rd, spread)
        rows += run_rows
        if left_out:
            blocks.append(
                Note(f"{rd.short}: {left_out} more interrupt sources took fewer interrupts and are not drawn")
            )
        share = ", ".join(f"cpu {c['cpu']} {fmt_share(c['share'])}" for c in spread["per_cpu"])
        blocks.append(Note(f"{rd.short}: all interrupts per CPU: {share}"))
        blocks += [
            Note(f"{rd.short}: CPU {c['cpu']} took {fmt_share(c['share'])} of all interrupts", warning=True)
            for c in spread["per_cpu"]
            if c["concentrated"]
        ]
    if not rows:
        return blocks
    df = pd.DataFrame(rows)
    cpus = sorted(df.cpu.unique().tolist())
    x = alt.X("cpu:O", title="CPU", sort=cpus, axis=alt.Axis(labelAngle=0))
    y = alt.Y(
        "source:N",
        sort=alt.EncodingSortField("total", op="max", order="descending"),
        title=None,
        axis=alt.Axis(labelLimit=260),
    )
    cells = (
        alt.Chart()
        .mark_rect()
        .encode(
            x,
            y,
            alt.Color("count:Q", scale=alt.Scale(type="log", scheme="oranges"), title="interrupts"),
            tooltip=[
                "run",
                "source",
                "description",
                "cpu",
                "count",
                alt.Tooltip("share:Q", format=".1%", title="share of this source"),
            ],
        )
    )
    layers = [cells]
    if len(cpus) <= CELL_TEXT_CPUS:
        # white on the darker half of the log colour scale, black on the lighter
        dark = float(df["count"].max()) ** 0.5
        layers.append(
            alt.Chart()
            .mark_text(fontSize=10)
            .encode(
                x,
                y,
                alt.Text("count:Q", format=".3~s"),
                color=alt.condition(f"datum.count > {dark}", alt.value("white"), alt.value("black")),
            )
        )
    # The runs share the rows (a source in one run and not the other shows as a blank row), which lines
    # them up for comparison; independent rows with these layers trip Vega-Lite ("child_height").
    chart = (
        alt.layer(*layers, data=df)
        .properties(width=alt.Step(max(6, min(60, 700 // len(cpus)))), height=alt.Step(16))
        .facet(row=_run_rows(_order(profiles)))
    )
    fig = Figure(
        "profile-irq-spread",
        "interrupts per source and CPU (/proc/interrupts)",
        chart,
        f"the {TOP_SPREAD} busiest sources of each run; a blank cell: that CPU took none; colour on a log "
        "scale. System-wide, not only while the workload ran",
    )
    return [fig, *blocks]


def _interrupts(profiles) -> Section:
    blocks = _caveats(profiles, "interrupts") + _irq_totals(profiles)
    table = _event_table(profiles)
    if table:
        blocks.append(table)
    blocks += _softirqs(profiles) + _spread(profiles) + _crosschecks(profiles, "interrupts")
    return Section(_title(profiles, "interrupts"), blocks)


# ---- system calls ------------------------------------------------------------------

SYSCALL_COLUMNS = ["run", "call", "count", "per s", "errors", "total time", "avg", "p50", "p99", "max"]


def _syscall_cells(rd, r: dict) -> list:
    return [
        rd.short,
        r["name"],
        fmt_count(r["count"]),
        fmt_rate(r["per_s"]),
        fmt_count(r["errors"]),
        fmt_ns(r["total_ns"]),
        fmt_ns(r["avg_ns"]),
        fmt_ns(r["p50_ns"]),
        fmt_ns(r["p99_ns"]),
        fmt_ns(r["max_ns"]),
    ]


def _syscall_chart(profiles) -> Figure | None:
    """Total time per call, the calls that took longest in any run, runs side by side."""
    longest: dict[str, float] = {}
    for _, s in profiles:
        for r in s["sections"]["syscalls"]["rows"]:
            longest[r["name"]] = max(longest.get(r["name"], 0.0), r["total_ns"])
    calls = set(sorted(longest, key=lambda n: -longest[n])[:TOP_CALLS])
    bars = [
        {
            "run": rd.short,
            "call": r["name"],
            "ns": r["total_ns"],
            "count": r["count"],
            "avg": fmt_ns(r["avg_ns"]),
            "p99": fmt_ns(r["p99_ns"]),
            "longest": longest[r["name"]],
        }
        for rd, s in profiles
        for r in s["sections"]["syscalls"]["rows"]
        if r["name"] in calls
    ]
    if not bars:
        return None
    df = pd.DataFrame(bars)
    unit = _in_unit(df)
    chart = (
        alt.Chart(df)
        .mark_bar()
        .encode(
            alt.X("time:Q", title=f"total time inside the call ({unit})"),
            alt.Y("call:N", sort=alt.EncodingSortField("longest", op="max", order="descending"), title=None),
            _run_colour(_order(profiles)),
            alt.YOffset("run:N", scale=alt.Scale(domain=_order(profiles))),
            tooltip=["run", "call", alt.Tooltip("time:Q", title=unit, format=".4g"), "count", "avg", "p99"],
        )
        .properties(width=700, height=alt.Step(12))
    )
    return Figure(
        "profile-syscall-time",
        f"time inside system calls (the {TOP_CALLS} longest)",
        chart,
        "entry to return, so time blocked or asleep in a call counts (futex, read, poll …); calls that "
        "never return (exit, a successful execve) have no time",
    )


def _syscalls(profiles) -> Section:
    blocks = _caveats(profiles, "syscalls")
    by_count, by_time = [], []
    for rd, s in profiles:
        section = s["sections"]["syscalls"]
        total, rows = section["total"], section["rows"]
        if total is not None:
            blocks.append(
                Note(
                    f"{rd.short}: {fmt_count(total['count'])} calls ({fmt_rate(total['per_s'])}) of "
                    f"{total['distinct']} kinds, {fmt_count(total['errors'])} returned an error; "
                    f"{fmt_ns(total['total_ns'])} inside them"
                )
            )
        by_count += [_syscall_cells(rd, r) for r in rows[:TOP_CALLS]]
        by_time += [_syscall_cells(rd, r) for r in sorted(rows, key=lambda r: -r["total_ns"])[:TOP_CALLS]]
    chart = _syscall_chart(profiles)
    if chart:
        blocks.append(chart)
    if by_count:
        legend = resolution_legend(
            *({"resolution": r["resolution"]} for _, s in profiles for r in s["sections"]["syscalls"]["rows"])
        )
        blocks += [
            Table(f"top {TOP_CALLS} by count", SYSCALL_COLUMNS, by_count),
            Table(f"top {TOP_CALLS} by total time", SYSCALL_COLUMNS, by_time, legend),
        ]
    blocks += _crosschecks(profiles, "syscalls")
    return Section(_title(profiles, "syscalls"), blocks)


# ---- locks -------------------------------------------------------------------------


def _locks(profiles) -> Section:
    blocks = _caveats(profiles, "locks")
    rows = []
    for rd, s in profiles:
        section = s["sections"]["locks"]
        total = section["total"]
        if section["rows"]:
            blocks.append(
                Note(
                    f"{rd.short}: {total['locks']:,} contended locks, {fmt_count(total['count'])} waits, "
                    f"{fmt_ns(total['total_ns'])} waited in all"
                )
            )
        rows += [
            [
                rd.short,
                r["lock"],
                r["kind"] or "–",
                r["caller"],
                fmt_count(r["count"]),
                fmt_ns(r["total_ns"]),
                fmt_ns(r["avg_ns"]),
                fmt_ns(r["max_ns"]),
            ]
            for r in section["rows"]
        ]
    if rows:
        blocks.append(
            Table(
                "top contended locks by total wait",
                ["run", "lock", "kind", "waited in", "waits", "total wait", "avg", "max"],
                rows,
                "wait = contention_begin to contention_end: spinning and sleeping both count; a lock "
                "without a symbol is shown by its address",
            )
        )
    blocks += _crosschecks(profiles, "locks")
    return Section(_title(profiles, "locks"), blocks)


# ---- counters ----------------------------------------------------------------------


def _fmt_metric(value: float | None, kind: str) -> str:
    if value is None:
        return "n/a"
    return si(value) if kind == "count" else f"{value:.2f}"


def _counters_figure(profiles) -> Figure | None:
    """The per-instruction and per-cycle rates, user against kernel: where
    the kernel runs worse than user code (lower IPC, more i-cache and iTLB misses)."""
    bars = [
        {"run": rd.short, "metric": m["label"], "scope": scope, "value": m[scope]}
        for rd, s in profiles
        for m in (s["sections"]["counters"]["hardware"] or {}).get("metrics", [])
        if METRICS[m["metric"]][1] == "ratio"
        for scope in ("user", "kernel")
        if m[scope] is not None
    ]
    if not bars:
        return None
    order = _order(profiles)
    chart = (
        alt.Chart(pd.DataFrame(bars))
        .mark_bar()
        .encode(
            alt.X("scope:N", title=None, sort=["user", "kernel"], axis=alt.Axis(labelAngle=0)),
            alt.Y("value:Q", title=None),
            _run_colour(order),
            alt.XOffset("run:N", scale=alt.Scale(domain=order)),
            tooltip=["run", "metric", "scope", alt.Tooltip("value:Q", format=".3g")],
        )
        .properties(width=200, height=160)
        .facet(
            facet=alt.Facet(
                "metric:N", title=None, sort=[label for label, kind in METRICS.values() if kind == "ratio"]
            ),
            columns=4,
        )
        .resolve_scale(y="independent")
    )
    return Figure(
        "profile-counters",
        "hardware counter rates, user vs kernel",
        chart,
        "each event counted twice, once excluding the kernel and once excluding user mode",
    )


def _counters(profiles) -> Section:
    blocks = _caveats(profiles, "counters")
    figure = _counters_figure(profiles)
    if figure:
        blocks.append(figure)
    hw_rows, sw_rows = [], []
    for rd, s in profiles:
        section = s["sections"]["counters"]
        hw = section["hardware"]
        if hw and any(m[scope] is not None for m in hw["metrics"] for scope in SCOPES):
            hw_rows += [
                [rd.short, m["label"], *[_fmt_metric(m[scope], METRICS[m["metric"]][1]) for scope in SCOPES]]
                for m in hw["metrics"]
            ]
            blocks.append(
                Note(
                    f"{rd.short}: share of instructions run in the kernel "
                    f"{fmt_share(hw['kernel_instruction_share'])}; of cycles "
                    f"{fmt_share(hw['kernel_cycle_share'])}"
                )
            )
        for c in section["software"]:
            if c["value"] is None:
                sw_rows.append([rd.short, c["name"], "n/a", c["error"] or "no value"])
            elif c["name"] == "task-clock":
                sw_rows.append(
                    [rd.short, c["name"], fmt_ns(c["value"]), f"{c['per_s'] / 1e9:.2f} CPUs" if c["per_s"] else "–"]
                )
            else:
                sw_rows.append([rd.short, c["name"], fmt_count(c["value"]), fmt_rate(c["per_s"])])
    if hw_rows:
        blocks.append(Table("hardware counters by privilege", ["run", "", "user", "kernel", "user + kernel"], hw_rows))
    if sw_rows:
        blocks.append(
            Table(
                "software counters", ["run", "counter", "value", "per s"], sw_rows, "the whole process tree (inherited)"
            )
        )
    blocks += _crosschecks(profiles, "counters")
    return Section(_title(profiles, "counters"), blocks)


# ---- the report --------------------------------------------------------------------


def sections(runs) -> list[Section]:
    profiles = [(rd, summarize(rd.records)) for rd in runs]
    return [
        _overview(profiles),
        _time(profiles),
        _switches(profiles),
        _faults(profiles),
        _interrupts(profiles),
        _syscalls(profiles),
        _locks(profiles),
        _counters(profiles),
    ]
