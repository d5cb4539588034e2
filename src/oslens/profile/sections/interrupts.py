"""Interrupts: hard IRQs per second and their handler time, softirq time by
vector, x86 system vectors (timer, IPIs), and how interrupts were spread over
the CPUs. Interrupts are system-wide: the BPF figures cover every CPU, with
the part that hit while a workload thread was running shown apart."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from ...cpulist import format_cpulist
from .common import (
    FALLBACK,
    add_crosscheck,
    bpf_record,
    fmt_count,
    fmt_ns,
    fmt_rate,
    fmt_share,
    footer,
    heading,
    new_section,
    per_second,
    plain,
    ratio,
    table,
)

if TYPE_CHECKING:
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


def _event_table(title: str, label: str, rows: list[dict], with_number: bool = False) -> Table:
    cols = [label, "count", "per s", "avg", "total time", "while workload ran", "its time"]
    t = table(title, (["irq"] if with_number else []) + cols, first_left=not with_number)
    for r in rows[:TOP]:
        cells = [
            plain(r["name"]),
            fmt_count(r["count"]),
            fmt_rate(r["per_s"]),
            fmt_ns(r["avg_ns"]),
            fmt_ns(r["ns"]),
            fmt_count(r["workload_count"]),
            fmt_ns(r["workload_ns"]),
        ]
        t.add_row(*([str(r["irq"])] if with_number else []) + cells)
    return t


def _render_bpf(console: Console, section: dict) -> None:
    hard = section["hardirq"]
    tot = hard["total"]
    console.print(
        f"  hard IRQs: {fmt_rate(tot['per_s'])} on all CPUs ({fmt_rate(tot['workload_per_s'])} while the "
        f"workload ran), average handler time {fmt_ns(tot['avg_ns'])}"
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
                fmt_count(c["hardirq_count"]),
                fmt_ns(c["hardirq_ns"]),
                fmt_count(c["softirq_count"]),
                fmt_ns(c["softirq_ns"]),
                fmt_count(c["vector_count"]),
                fmt_ns(c["vector_ns"]),
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
                t.add_row(
                    plain(r["name"]),
                    fmt_count(r["count"]),
                    fmt_rate(r["per_s"]),
                    fmt_ns(r["avg_ns"]),
                    fmt_ns(r["ns"]),
                    fmt_count(r["workload_count"]),
                    fmt_ns(r["workload_ns"]),
                    fmt_count(r["procfs_count"]),
                )
    else:
        t = table("softirqs by vector (/proc/softirqs)", ["vector", "run", "per s"])
        for r in rows:
            t.add_row(plain(r["name"]), fmt_count(r["procfs_count"]), fmt_rate(r["procfs_per_s"]))
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
            fmt_count(r["count"]),
            fmt_rate(r["per_s"]),
            format_cpulist(r["cpus"]),
            str(r["top_cpu"]),
            fmt_share(r["top_share"]),
            style="yellow" if r["concentrated"] else None,
        )
    console.print(t)
    if len(spread["rows"]) > TOP:
        console.print(f"  … {len(spread['rows']) - TOP} more interrupt sources", style="dim")
    console.print(
        "  all interrupts per CPU: " + ", ".join(f"cpu {c['cpu']} {fmt_share(c['share'])}" for c in spread["per_cpu"]),
        style="dim",
    )
    for c in spread["per_cpu"]:
        if c["concentrated"]:
            console.print(f"  CPU {c['cpu']} took {fmt_share(c['share'])} of all interrupts", style="yellow")


def render(console: Console, section: dict) -> None:
    heading(console, section)
    if section["hardirq"] is not None:
        _render_bpf(console, section)
    _render_softirqs(console, section["softirq"])
    _render_spread(console, section["spread"])
    footer(console, section, "hard IRQs, softirqs and vectors are counted on every CPU, not only the workload's")
