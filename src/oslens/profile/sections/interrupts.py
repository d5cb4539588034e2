"""Interrupts: hard IRQs per second and their handler time, softirq time by
vector, x86 system vectors (timer, IPIs), and how interrupts were spread over
the CPUs. Interrupts are system-wide: the BPF figures cover every CPU, with
the part that hit while a workload thread was running shown apart."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table as RichTable

from ... import format as fmt
from ...cpulist import format_cpulist
from .common import (
    FALLBACK,
    add_crosscheck,
    bpf_record,
    footer,
    heading,
    new_section,
    per_second,
    plain,
    ratio,
    table,
)

if TYPE_CHECKING:
    from ...report.html.page import Note, Section, Table
    from ..records import Records

TITLE = "Interrupts"
BPF_PARTS = ("irqs", "hardirqs", "softirqs", "hardirq", "softirq", "irq_vectors", "vectors")

# One CPU taking this share of an IRQ (or of all interrupts) is flagged: the
# study found timer and network interrupts piled on CPU 0.
CONCENTRATED = 0.8
TOP = 15


def _event_rows(rows: list[dict], wall_s: float | None) -> list[dict]:
    """BPF rows with rates and average handler time, the costliest first."""
    out = [
        {
            **row,
            "per_s": per_second(row["count"], wall_s),
            "avg_ns": ratio(row["ns"], row["count"]),
            "workload_per_s": per_second(row["workload_count"], wall_s),
        }
        for row in rows
    ]
    return sorted(out, key=lambda r: (-r["ns"], -r["count"]))


def _totals(rows: list[dict], wall_s: float | None) -> dict:
    total = {k: sum(r[k] for r in rows) for k in ("count", "ns", "workload_count", "workload_ns")}
    return {
        **total,
        "per_s": per_second(total["count"], wall_s),
        "avg_ns": ratio(total["ns"], total["count"]),
        "workload_per_s": per_second(total["workload_count"], wall_s),
    }


def _spread(recs: Records) -> dict:
    """Per IRQ, which CPUs took it (/proc/interrupts, begin to end)."""
    delta = recs.proc_delta.interrupts
    if delta is None:
        return {"missing": f"not measured: {recs.procfs_missing('/proc/interrupts')}"}
    cpus = sorted({cpu for row in delta.values() for cpu in row.counts})
    several = len(cpus) > 1
    rows = []
    for row in delta.values():
        if not row.counts or row.total <= 0:
            continue
        top_cpu, top = max(row.counts.items(), key=lambda kv: kv[1])
        rows.append(
            {
                "irq": row.name,
                "description": row.description,
                "device_irq": row.numbered,
                "count": row.total,
                "per_s": per_second(row.total, recs.wall_s),
                "cpus": sorted(cpu for cpu, n in row.counts.items() if n > 0),
                "top_cpu": top_cpu,
                "per_cpu": [[cpu, n] for cpu, n in sorted(row.counts.items()) if n > 0],
                "top_share": top / row.total,
                "concentrated": several and top / row.total >= CONCENTRATED,
            }
        )
    rows.sort(key=lambda r: -r["count"])
    per_cpu_counts = {cpu: sum(row.counts.get(cpu, 0) for row in delta.values()) for cpu in cpus}
    all_count = sum(per_cpu_counts.values())
    per_cpu = [
        {
            "cpu": cpu,
            "count": n,
            "share": ratio(n, all_count),
            "concentrated": several and (ratio(n, all_count) or 0) >= CONCENTRATED,
        }
        for cpu, n in per_cpu_counts.items()
    ]
    device = sum(r["count"] for r in rows if r["device_irq"])
    return {
        "cpus": cpus,
        "rows": rows,
        "per_cpu": per_cpu,
        "device_irqs": device,
        "device_irqs_per_s": per_second(device, recs.wall_s),
    }


def _softirqs(recs: Records, bpf_rows: list[dict]) -> list[dict]:
    """BPF softirq rows (time) joined by vector name with /proc/softirqs (counts)."""
    delta = recs.proc_delta.softirqs or {}
    procfs_counts = {vec: sum(per_cpu.values()) for vec, per_cpu in delta.items()}
    rows = [{**row, "procfs_count": procfs_counts.get(row["name"])} for row in bpf_rows]
    seen = {row["name"] for row in rows}
    rows += [
        {"name": vec, "count": None, "procfs_count": n, "procfs_per_s": per_second(n, recs.wall_s)}
        for vec, n in sorted(procfs_counts.items(), key=lambda kv: -kv[1])
        if vec not in seen
    ]
    return rows


def _named(rows: list[dict], name: str) -> int | None:
    return next((r["count"] for r in rows if r["name"] == name), None)


def summarize(recs: Records) -> dict:
    section = new_section(TITLE)
    rec = bpf_record(recs, section, "irqs", BPF_PARTS)
    if rec is None:
        section["missing"] += FALLBACK
    wall = recs.wall_s
    hard = _event_rows(rec.get("hardirq") or [], wall) if rec else []
    soft = _event_rows(rec.get("softirq") or [], wall) if rec else []
    vectors = _event_rows(rec.get("vectors") or [], wall) if rec else []
    section["hardirq"] = {"total": _totals(hard, wall), "rows": hard} if rec else None
    section["vectors"] = {"total": _totals(vectors, wall), "rows": vectors} if rec else None
    section["softirq"] = {"total": _totals(soft, wall) if rec else None, "rows": _softirqs(recs, soft)}
    section["per_cpu"] = rec.get("per_cpu") if rec else None
    section["spread"] = _spread(recs)
    spread = section["spread"]
    if recs.proc_delta.softirqs is None:
        section["notes"].append(f"softirq counts from /proc/softirqs: {recs.procfs_missing('/proc/softirqs')}")
    proc_rows = {r["irq"]: r["count"] for r in spread.get("rows", [])}
    add_crosscheck(
        section,
        "device interrupts, all CPUs",
        {"BPF": section["hardirq"]["total"]["count"] if rec else None, "/proc/interrupts": spread.get("device_irqs")},
    )
    add_crosscheck(
        section,
        "local timer interrupts, all CPUs",
        {"BPF": _named(vectors, "local_timer"), "/proc/interrupts LOC": proc_rows.get("LOC")},
    )
    add_crosscheck(
        section,
        "softirqs run, all CPUs",
        {
            "BPF": section["softirq"]["total"]["count"] if rec else None,
            "/proc/softirqs": (
                sum(r["procfs_count"] for r in section["softirq"]["rows"] if r["procfs_count"] is not None)
                if recs.proc_delta.softirqs
                else None
            ),
        },
    )
    return section


def _event_cells(r: dict) -> list[str]:
    """A BPF row after its name: count, per s, avg, total time, while workload ran, its time."""
    return [
        fmt.count(r["count"]),
        fmt.rate(r["per_s"]),
        fmt.ns(r["avg_ns"]),
        fmt.ns(r["ns"]),
        fmt.count(r["workload_count"]),
        fmt.ns(r["workload_ns"]),
    ]


def _event_table(title: str, label: str, rows: list[dict], with_number: bool = False) -> RichTable:
    cols = [label, "count", "per s", "avg", "total time", "while workload ran", "its time"]
    t = table(title, (["irq"] if with_number else []) + cols, first_left=not with_number)
    for r in rows[:TOP]:
        t.add_row(*([str(r["irq"])] if with_number else []) + [plain(r["name"]), *_event_cells(r)])
    return t


def _render_bpf(console: Console, section: dict) -> None:
    hard = section["hardirq"]
    tot = hard["total"]
    console.print(
        f"  hard IRQs: {fmt.rate(tot['per_s'])} on all CPUs ({fmt.rate(tot['workload_per_s'])} while the "
        f"workload ran), average handler time {fmt.ns(tot['avg_ns'])}"
    )
    if hard["rows"]:
        console.print(_event_table("hard IRQs (device interrupts), costliest first", "device", hard["rows"], True))
    if section["vectors"]["rows"]:
        console.print(_event_table("system vectors (timer, IPIs)", "vector", section["vectors"]["rows"]))
    per_cpu = [c for c in section["per_cpu"] or [] if c["hardirq_count"] or c["softirq_count"] or c["vector_count"]]
    if per_cpu:
        t = table("interrupt time per CPU", ["cpu", "hard IRQs", "time", "softirqs", "time", "vectors", "time"])
        for c in per_cpu:
            t.add_row(
                str(c["cpu"]),
                fmt.count(c["hardirq_count"]),
                fmt.ns(c["hardirq_ns"]),
                fmt.count(c["softirq_count"]),
                fmt.ns(c["softirq_ns"]),
                fmt.count(c["vector_count"]),
                fmt.ns(c["vector_ns"]),
            )
        console.print(t)


def _render_softirqs(console: Console, softirq: dict) -> None:
    rows = softirq["rows"]
    if not rows:
        return
    if softirq["total"] is not None:
        t = table(
            "softirqs by vector (time from BPF, all CPUs)",
            ["vector", "run", "per s", "avg", "total time", "while workload ran", "its time", "run (/proc/softirqs)"],
        )
        for r in rows:
            if r["count"] is not None:
                t.add_row(plain(r["name"]), *_event_cells(r), fmt.count(r["procfs_count"]))
    else:
        t = table("softirqs by vector (/proc/softirqs)", ["vector", "run", "per s"])
        for r in rows:
            t.add_row(plain(r["name"]), fmt.count(r["procfs_count"]), fmt.rate(r["procfs_per_s"]))
    console.print(t)


def _render_spread(console: Console, spread: dict) -> None:
    if spread.get("missing"):
        console.print(plain(f"  spread over CPUs: {spread['missing']}"), style="yellow")
        return
    t = table(
        f"spread over CPUs (/proc/interrupts; flagged: one CPU took ≥{CONCENTRATED:.0%})",
        ["irq", "description", "count", "per s", "CPUs that took them", "top CPU", "its share"],
    )
    for r in spread["rows"][:TOP]:
        t.add_row(
            plain(r["irq"]),
            plain(r["description"]),
            fmt.count(r["count"]),
            fmt.rate(r["per_s"]),
            format_cpulist(r["cpus"]),
            str(r["top_cpu"]),
            fmt.share(r["top_share"]),
            style="yellow" if r["concentrated"] else None,
        )
    console.print(t)
    if len(spread["rows"]) > TOP:
        console.print(f"  … {len(spread['rows']) - TOP} more interrupt sources", style="dim")
    console.print(
        "  all interrupts per CPU: " + ", ".join(f"cpu {c['cpu']} {fmt.share(c['share'])}" for c in spread["per_cpu"]),
        style="dim",
    )
    for c in spread["per_cpu"]:
        if c["concentrated"]:
            console.print(f"  CPU {c['cpu']} took {fmt.share(c['share'])} of all interrupts", style="yellow")


def render(console: Console, section: dict) -> None:
    heading(console, section)
    if section["hardirq"] is not None:
        _render_bpf(console, section)
    _render_softirqs(console, section["softirq"])
    _render_spread(console, section["spread"])
    footer(console, section, "hard IRQs, softirqs and vectors are counted on every CPU, not only the workload's")


# ---- the HTML report ------------------------------------------------------
# altair, pandas and the page are imported by the functions that draw (see html_common).

TOP_IRQS = 15  # hard IRQs and vectors in the table
TOP_SPREAD = 20  # interrupt sources in the heatmap
CELL_TEXT_CPUS = 16  # beyond this many CPUs the heatmap's cells are too small for their counts


def _html_events(profiles) -> Table | None:
    """Hard IRQs and system vectors (BPF, all CPUs), the costliest first."""
    from ...report.html.page import Table

    rows = []
    for rd, s in profiles:
        section = s["sections"]["interrupts"]
        for kind, key in (("hard IRQ", "hardirq"), ("vector", "vectors")):
            for r in (section[key] or {}).get("rows", [])[:TOP_IRQS]:
                irq = r.get("irq", "–") if kind == "hard IRQ" else "–"
                rows.append([rd.short, kind, irq, r["name"], *_event_cells(r)])
    if not rows:
        return None
    return Table(
        f"hard IRQs and system vectors (the {TOP_IRQS} costliest of each)",
        ["run", "kind", "irq", "name", "count", "per s", "avg", "total time", "while workload ran", "its time"],
        rows,
        'on every CPU, not only the workload\'s; "while workload ran": those that '
        "hit while a workload thread was on the CPU",
    )


def _html_irq_totals(profiles) -> list[Note]:
    from ...report.html.page import Note

    out = []
    for rd, s in profiles:
        hard = s["sections"]["interrupts"]["hardirq"]
        if hard:
            t = hard["total"]
            out.append(
                Note(
                    f"{rd.short}: hard IRQs {fmt.rate(t['per_s'])} on all CPUs "
                    f"({fmt.rate(t['workload_per_s'])} while the workload ran), average handler time "
                    f"{fmt.ns(t['avg_ns'])}"
                )
            )
    return out


def _html_softirqs(profiles) -> list:
    """Softirq time by vector (BPF) as a chart; the counts of every run,
    /proc/softirqs included, as a table."""
    import altair as alt

    from ...report.html.page import Figure, Note, Table
    from .html_common import time_bars

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
                        "avg": fmt.ns(r["avg_ns"]),
                        "while_workload": fmt.ns(r["workload_ns"]),
                    }
                )
                rows.append([rd.short, r["name"], *_event_cells(r), fmt.count(r["procfs_count"])])
            elif r["procfs_count"]:  # a vector that never ran says nothing
                rows.append(
                    [
                        rd.short,
                        r["name"],
                        "–",
                        fmt.rate(r["procfs_per_s"]),
                        "–",
                        "–",
                        "–",
                        "–",
                        fmt.count(r["procfs_count"]),
                    ]
                )
    blocks = []
    if bars:
        tooltip = ["count", "avg", alt.Tooltip("while_workload:N", title="while workload ran")]
        chart = time_bars(profiles, bars, "vector", "ns", "time in the handlers", tooltip)
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


def _html_spread_rows(rd, spread: dict) -> tuple[list[dict], int]:
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


def _html_spread(profiles) -> list:
    import altair as alt
    import pandas as pd

    from ...report.html.page import Figure, Note
    from .html_common import run_order, run_rows

    rows, blocks = [], []
    for rd, s in profiles:
        spread = s["sections"]["interrupts"]["spread"]
        if spread.get("missing"):
            blocks.append(Note(f"{rd.short}: spread over CPUs {spread['missing']}", warning=True))
            continue
        its_rows, left_out = _html_spread_rows(rd, spread)
        rows += its_rows
        if left_out:
            blocks.append(
                Note(f"{rd.short}: {left_out} more interrupt sources took fewer interrupts and are not drawn")
            )
        share = ", ".join(f"cpu {c['cpu']} {fmt.share(c['share'])}" for c in spread["per_cpu"])
        blocks.append(Note(f"{rd.short}: all interrupts per CPU: {share}"))
        blocks += [
            Note(f"{rd.short}: CPU {c['cpu']} took {fmt.share(c['share'])} of all interrupts", warning=True)
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
        .facet(row=run_rows(run_order(profiles)))
    )
    fig = Figure(
        "profile-irq-spread",
        "interrupts per source and CPU (/proc/interrupts)",
        chart,
        f"the {TOP_SPREAD} busiest sources of each run; a blank cell: that CPU took none; colour on a log "
        "scale. System-wide, not only while the workload ran",
    )
    return [fig, *blocks]


def html(profiles) -> Section:
    from ...report.html.page import Section
    from .html_common import caveats, crosschecks, section_title

    blocks = caveats(profiles, "interrupts") + _html_irq_totals(profiles)
    table = _html_events(profiles)
    if table:
        blocks.append(table)
    blocks += _html_softirqs(profiles) + _html_spread(profiles) + crosschecks(profiles, "interrupts")
    return Section(section_title(profiles, "interrupts"), blocks)
