"""System calls of the workload: the top calls by count and by total time,
each with its latency percentiles and error count."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from .common import (
    bpf_record,
    fmt_count,
    fmt_ns,
    fmt_rate,
    footer,
    heading,
    hist_stats,
    new_section,
    per_second,
    plain,
    resolution_legend,
    table,
)

if TYPE_CHECKING:
    from ..records import Records

TITLE = "System calls"
BPF_PARTS = ("syscalls", "raw_syscalls")
TOP = 15


def _row(row: dict, wall_s: float | None) -> dict:
    stats = hist_stats(row["hist"])
    return {
        "nr": row["nr"],
        "name": row.get("name") or f"syscall {row['nr']}",
        "count": row["count"],
        "per_s": per_second(row["count"], wall_s),
        "errors": row["errors"],
        "total_ns": stats["total_ns"],
        "timed": stats["count"],
        **{k: stats[k] for k in ("avg_ns", "p50_ns", "p99_ns", "max_ns", "resolution")},
    }


def summarize(recs: Records) -> dict:
    section = new_section(TITLE)
    rec = bpf_record(recs, section, "syscalls", BPF_PARTS)
    rows = [_row(r, recs.wall_s) for r in (rec or {}).get("rows", [])]
    rows.sort(key=lambda r: (-r["count"], r["name"]))
    section["rows"] = rows  # all of them, by count; the report shows the top by count and by time
    section["total"] = (
        {
            "count": sum(r["count"] for r in rows),
            "errors": sum(r["errors"] for r in rows),
            "total_ns": sum(r["total_ns"] for r in rows),
            "distinct": len(rows),
            "per_s": per_second(sum(r["count"] for r in rows), recs.wall_s),
        }
        if rec
        else None
    )
    return section


def _top_table(title: str, rows: list[dict]) -> Table:
    t = table(title, ["call", "count", "per s", "errors", "total time", "avg", "p50", "p99", "max"])
    for r in rows[:TOP]:
        t.add_row(
            plain(r["name"]),
            fmt_count(r["count"]),
            fmt_rate(r["per_s"]),
            fmt_count(r["errors"]),
            fmt_ns(r["total_ns"]),
            fmt_ns(r["avg_ns"]),
            fmt_ns(r["p50_ns"]),
            fmt_ns(r["p99_ns"]),
            fmt_ns(r["max_ns"]),
        )
    return t


def render(console: Console, section: dict) -> None:
    heading(console, section)
    total, rows = section["total"], section["rows"]
    if total is not None:
        console.print(
            f"  {fmt_count(total['count'])} calls ({fmt_rate(total['per_s'])}) of {total['distinct']} kinds, "
            f"{fmt_count(total['errors'])} returned an error; {fmt_ns(total['total_ns'])} inside them"
        )
    if rows:
        console.print(_top_table("top by count", rows))
        console.print(_top_table("top by total time", sorted(rows, key=lambda r: -r["total_ns"])))
    legend = (
        (
            "time inside a call runs from entry to return, so it includes time blocked or asleep in it; "
            "calls that never return (exit, a successful execve) have no time. "
            + resolution_legend(*({"resolution": r["resolution"]} for r in rows))
        )
        if rows
        else None
    )
    footer(console, section, legend)
