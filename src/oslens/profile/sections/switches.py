"""Context switches of the workload's threads: voluntary and involuntary per
second, who preempted them (kernel threads, other applications, the workload
itself), how long they stayed off the CPU, run-queue wait, and migrations."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from rich.console import Console

from ... import format as fmt
from ..records import RUSAGE_SOURCE
from .common import (
    FALLBACK,
    LATENCY_COLUMNS,
    THREADS_PARTIAL,
    add_crosscheck,
    bpf_record,
    distribution_table,
    footer,
    heading,
    hist_stats,
    latency_cells,
    new_section,
    per_second,
    plain,
    ratio,
    resolution_legend,
    table,
    thread_sum,
)

if TYPE_CHECKING:
    from ...report.html.page import Section, Table
    from ..records import Records

TITLE = "Context switches"
BPF_PARTS = ("sched_switch", "switches")

# Histograms of the switches record, with what each measures.
LATENCIES = {
    "offcpu": "off-CPU, every switch",
    "offcpu_voluntary": "off-CPU after a voluntary switch",
    "offcpu_involuntary": "off-CPU after a preemption",
    "runq": "run-queue wait (wake-up or preemption to switch-in)",
}
TOP_NAMES = 10


def kthread_family(comm: str) -> str:
    """ "kworker/1:2" -> "kworker/*": per-CPU (and per-queue) kernel threads
    are one kind of work whatever CPU they are bound to."""
    head, slash, _ = comm.partition("/")
    return f"{head}/*" if slash and head else comm


def _ranked(counts: dict[str, int], limit: int | None = None) -> list[dict]:
    rows = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return [{"comm": comm, "count": n} for comm, n in rows[:limit]]


def _preemptions(preempted_by: list[dict]) -> dict:
    """Who ran next after an involuntary switch, in three groups; kernel
    threads by family, each with its members and their counts."""
    families: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    others: dict[str, int] = defaultdict(int)
    workload: dict[str, int] = defaultdict(int)
    for row in preempted_by:
        if row.get("workload"):
            workload[row["comm"]] += row["count"]
        elif row.get("kthread"):
            families[kthread_family(row["comm"])][row["comm"]] += row["count"]
        else:
            others[row["comm"]] += row["count"]
    kthreads = sorted(
        (
            {"family": fam, "count": sum(members.values()), "members": _ranked(members)}
            for fam, members in families.items()
        ),
        key=lambda f: (-f["count"], f["family"]),
    )
    return {
        "total": sum(row["count"] for row in preempted_by),
        "kernel_threads": sum(f["count"] for f in kthreads),
        "other_applications": sum(others.values()),
        "workload": sum(workload.values()),
        "kernel_thread_families": kthreads,
        "other_applications_top": _ranked(others, TOP_NAMES),
        "workload_top": _ranked(workload, TOP_NAMES),
    }


def _from_bpf(rec: dict, wall_s: float | None) -> dict:
    return {
        "source": "BPF (sched_switch)",
        "voluntary": rec["voluntary"],
        "involuntary": rec["involuntary"],
        "voluntary_per_s": per_second(rec["voluntary"], wall_s),
        "involuntary_per_s": per_second(rec["involuntary"], wall_s),
        "wakeups": rec["wakeups"],
        "wakeups_per_s": per_second(rec["wakeups"], wall_s),
        "migrations": rec["migrations"],
        "migrations_per_s": per_second(rec["migrations"], wall_s),
        "switch_ins": rec["switch_ins"],
        "migrated_switch_ins": rec["migrated_switch_ins"],
        "migrated_share": ratio(rec["migrated_switch_ins"], rec["switch_ins"]),
    }


def _without_bpf(recs: Records) -> dict:
    """What /proc's per-thread counts and the software counters still tell,
    else the command's rusage. A context-switches counter limited to user
    mode counts none (the scheduler counts in kernel mode): not a source."""
    wall = recs.wall_s
    voluntary, involuntary = thread_sum(recs, "nvcsw"), thread_sum(recs, "nivcsw")
    migrations = recs.counter_value("cpu-migrations")
    counts = {
        "source": "threads' nvcsw/nivcsw (/proc)" if recs.threads else None,
        "voluntary": voluntary,
        "involuntary": involuntary,
        "voluntary_per_s": per_second(voluntary, wall),
        "involuntary_per_s": per_second(involuntary, wall),
        "migrations": migrations,
        "migrations_per_s": per_second(migrations, wall),
    }
    if voluntary is None:
        total = recs.counter_value("context-switches")
        counts.update(
            source="context-switches counter (no voluntary/involuntary split)" if total is not None else None,
            total=total,
            total_per_s=per_second(total, wall),
        )
    ru = recs.rusage
    if counts["source"] is None and ru and ru.get("nvcsw") is not None and ru.get("nivcsw") is not None:
        counts.update(
            source=RUSAGE_SOURCE,
            voluntary=ru["nvcsw"],
            involuntary=ru["nivcsw"],
            voluntary_per_s=per_second(ru["nvcsw"], wall),
            involuntary_per_s=per_second(ru["nivcsw"], wall),
        )
    return counts


def summarize(recs: Records) -> dict:
    section = new_section(TITLE)
    rec = bpf_record(recs, section, "switches", BPF_PARTS)
    if rec is None:
        section["missing"] += FALLBACK
        section["counts"] = _without_bpf(recs)
        if recs.threads and not recs.threads_complete:
            section["notes"].append(THREADS_PARTIAL)
        section["preemptions"] = None
        section["latency"] = {}
    else:
        section["counts"] = _from_bpf(rec, recs.wall_s)
        section["preemptions"] = _preemptions(rec.get("preempted_by") or [])
        section["latency"] = {key: hist_stats(rec[key]) for key in LATENCIES if key in rec}
    bpf_total = rec["voluntary"] + rec["involuntary"] if rec else None
    threads_total = (thread_sum(recs, "nvcsw") + thread_sum(recs, "nivcsw")) if recs.threads else None
    add_crosscheck(
        section,
        "context switches",
        {
            "BPF": bpf_total,
            "threads' nvcsw+nivcsw": threads_total,
            "context-switches counter": recs.counter_value("context-switches"),
        },
    )
    add_crosscheck(
        section,
        "migrations",
        {"BPF": rec["migrations"] if rec else None, "cpu-migrations counter": recs.counter_value("cpu-migrations")},
    )
    return section


def _render_counts(console: Console, c: dict) -> None:
    if c.get("source") is None:
        console.print("  no context-switch count from any source", style="yellow")
        return
    t = table("switches of the workload's threads", ["", "count", "per s"])
    if c.get("voluntary") is not None:
        t.add_row("voluntary (blocked, slept, yielded)", fmt.count(c["voluntary"]), fmt.rate(c["voluntary_per_s"]))
        t.add_row("involuntary (preempted)", fmt.count(c["involuntary"]), fmt.rate(c["involuntary_per_s"]))
    else:
        t.add_row("all", fmt.count(c["total"]), fmt.rate(c["total_per_s"]))
    if c.get("wakeups") is not None:
        t.add_row("wake-ups", fmt.count(c["wakeups"]), fmt.rate(c["wakeups_per_s"]))
    t.add_row("migrations", fmt.count(c["migrations"]), fmt.rate(c["migrations_per_s"]))
    console.print(t)
    console.print(plain(f"  from {c['source']}"), style="dim")
    if c.get("switch_ins"):
        console.print(
            f"  {fmt.share(c['migrated_share'])} of {c['switch_ins']:,} switch-ins were on another CPU "
            "than the thread last ran on"
        )


def _members(members: list[dict], limit: int = 4) -> str:
    shown = ", ".join(f"{m['comm']} {m['count']:,}" for m in members[:limit])
    return shown + (f", … {len(members) - limit} more" if len(members) > limit else "")


def _render_preemptions(console: Console, p: dict) -> None:
    t = table(f"who ran next after the {p['total']:,} preemptions", ["", "count", "share", "which"])
    t.add_row(
        "kernel threads",
        fmt.count(p["kernel_threads"]),
        fmt.share(ratio(p["kernel_threads"], p["total"])),
        "",
        style="bold",
    )
    for fam in p["kernel_thread_families"]:
        t.add_row(
            plain(f"  {fam['family']}"),
            fmt.count(fam["count"]),
            fmt.share(ratio(fam["count"], p["total"])),
            plain(_members(fam["members"])),
        )
    t.add_row(
        "other applications",
        fmt.count(p["other_applications"]),
        fmt.share(ratio(p["other_applications"], p["total"])),
        plain(_members(p["other_applications_top"])),
        style="bold",
    )
    t.add_row(
        "the workload's own threads",
        fmt.count(p["workload"]),
        fmt.share(ratio(p["workload"], p["total"])),
        plain(_members(p["workload_top"])),
        style="bold",
    )
    console.print(t)


def render(console: Console, section: dict) -> None:
    heading(console, section)
    _render_counts(console, section["counts"])
    if section["preemptions"] and section["preemptions"]["total"]:
        _render_preemptions(console, section["preemptions"])
    latency = section["latency"]
    if latency:
        t = table("time between switches", [""] + list(LATENCY_COLUMNS))
        for key, stats in latency.items():
            t.add_row(LATENCIES[key], *latency_cells(stats))
        console.print(t)
        dist = distribution_table("their distribution", [(LATENCIES[k], s) for k, s in latency.items()])
        if dist:
            console.print(dist)
    footer(console, section, resolution_legend(*latency.values()))


# ---- the HTML report ------------------------------------------------------
# altair, pandas and the page are imported by the functions that draw (see html_common).

HTML_NAMES = 6  # the page has room for more names of threads than the terminal


def _rate_or_total(c: dict) -> str:
    if c.get("voluntary_per_s") is not None and c.get("involuntary_per_s") is not None:
        return fmt.rate(c["voluntary_per_s"] + c["involuntary_per_s"])
    return fmt.rate(c.get("total_per_s"))


def _html_counts(profiles) -> Table:
    from ...report.html.page import Table

    rows = []
    for rd, s in profiles:
        c = s["sections"]["switches"]["counts"]
        migrated = f"{fmt.share(c['migrated_share'])} of {c['switch_ins']:,}" if c.get("switch_ins") else "–"
        rows.append(
            [
                rd.short,
                fmt.count(c.get("voluntary")),
                fmt.rate(c.get("voluntary_per_s")),
                fmt.count(c.get("involuntary")),
                fmt.rate(c.get("involuntary_per_s")),
                _rate_or_total(c),
                fmt.rate(c.get("wakeups_per_s")),
                fmt.rate(c.get("migrations_per_s")),
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


def _html_preemptions(profiles) -> list:
    """Who ran next after a preemption: table by group and kernel-thread
    family with the names, and a bar per run of the three groups' shares."""
    import altair as alt
    import pandas as pd

    from ...report.html.page import Figure, Table
    from .html_common import run_order

    rows, bars = [], []
    for rd, s in profiles:
        p = s["sections"]["switches"]["preemptions"]
        if not p or not p["total"]:
            continue
        groups = (
            ("kernel threads", p["kernel_threads"], ""),
            ("other applications", p["other_applications"], _members(p["other_applications_top"], HTML_NAMES)),
            ("the workload's own threads", p["workload"], _members(p["workload_top"], HTML_NAMES)),
        )
        for i, (group, n, which) in enumerate(groups):
            rows.append([rd.short, group, fmt.count(n), fmt.share(ratio(n, p["total"])), which])
            bars.append({"run": rd.short, "group": group, "order": i, "count": n, "share": ratio(n, p["total"])})
            if i == 0:
                rows += [
                    [
                        rd.short,
                        f"kernel threads: {fam['family']}",
                        fmt.count(fam["count"]),
                        fmt.share(ratio(fam["count"], p["total"])),
                        _members(fam["members"], HTML_NAMES),
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
            alt.Y("run:N", sort=run_order(profiles), title=None),
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


def _html_latency(profiles) -> list:
    from ...report.html.page import Figure, Table
    from .html_common import distribution_chart, distribution_frame, run_order

    table = [
        [rd.short, LATENCIES[key], *latency_cells(stats)]
        for rd, s in profiles
        for key, stats in s["sections"]["switches"]["latency"].items()
    ]
    if not table:
        return []
    df = distribution_frame(profiles, lambda s: s["sections"]["switches"]["latency"], LATENCIES)
    stats = [st for _, s in profiles for st in s["sections"]["switches"]["latency"].values()]
    blocks = [Table("time between switches", ["run", "", *LATENCY_COLUMNS], table, resolution_legend(*stats))]
    if not df.empty:
        blocks.insert(
            0,
            Figure(
                "profile-switch-latency",
                "off-CPU time and run-queue wait",
                distribution_chart(df, list(LATENCIES.values()), run_order(profiles)),
                "share of switches per decade of duration; off-CPU: switch-out to the next "
                "switch-in, run-queue wait: wake-up or preemption to switch-in",
            ),
        )
    return blocks


def html(profiles) -> Section:
    from ...report.html.page import Section
    from .html_common import caveats, crosschecks, section_title

    blocks = caveats(profiles, "switches")
    blocks.append(_html_counts(profiles))
    blocks += _html_preemptions(profiles) + _html_latency(profiles) + crosschecks(profiles, "switches")
    return Section(section_title(profiles, "switches"), blocks)
