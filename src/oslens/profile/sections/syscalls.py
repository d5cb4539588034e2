"""System calls of the workload: the top calls by count and by total time,
each with its latency percentiles and error count."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table as RichTable

from ... import format as fmt
from .common import (
    bpf_record,
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
    from ...report.html.page import Figure, Section
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


# The columns of a call's row, in the terminal and in the HTML report.
COLUMNS = ("call", "count", "per s", "errors", "total time", "avg", "p50", "p99", "max")


def _cells(r: dict) -> list[str]:
    """A call's row after its name."""
    return [
        fmt.count(r["count"]),
        fmt.rate(r["per_s"]),
        fmt.count(r["errors"]),
        fmt.ns(r["total_ns"]),
        fmt.ns(r["avg_ns"]),
        fmt.ns(r["p50_ns"]),
        fmt.ns(r["p99_ns"]),
        fmt.ns(r["max_ns"]),
    ]


def _top_table(title: str, rows: list[dict]) -> RichTable:
    t = table(title, COLUMNS)
    for r in rows[:TOP]:
        t.add_row(plain(r["name"]), *_cells(r))
    return t


def render(console: Console, section: dict) -> None:
    heading(console, section)
    total, rows = section["total"], section["rows"]
    if total is not None:
        console.print(
            f"  {fmt.count(total['count'])} calls ({fmt.rate(total['per_s'])}) of {total['distinct']} kinds, "
            f"{fmt.count(total['errors'])} returned an error; {fmt.ns(total['total_ns'])} inside them"
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


# ---- the HTML report ------------------------------------------------------
# altair, pandas and the page are imported by the functions that draw (see html_common).

TOP_CALLS = 15

HTML_COLUMNS = ["run", *COLUMNS]


def _html_cells(rd, r: dict) -> list:
    return [rd.short, r["name"], *_cells(r)]


def _html_chart(profiles) -> Figure | None:
    """Total time per call, the calls that took longest in any run, runs side by side."""
    from ...report.html.page import Figure
    from .html_common import time_bars

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
            "avg": fmt.ns(r["avg_ns"]),
            "p99": fmt.ns(r["p99_ns"]),
            "longest": longest[r["name"]],
        }
        for rd, s in profiles
        for r in s["sections"]["syscalls"]["rows"]
        if r["name"] in calls
    ]
    if not bars:
        return None
    return Figure(
        "profile-syscall-time",
        f"time inside system calls (the {TOP_CALLS} longest)",
        time_bars(profiles, bars, "call", "longest", "total time inside the call", ["count", "avg", "p99"]),
        "entry to return, so time blocked or asleep in a call counts (futex, read, poll …); calls that "
        "never return (exit, a successful execve) have no time",
    )


def html(profiles) -> Section:
    from ...report.html.page import Note, Section, Table
    from .html_common import caveats, crosschecks, section_title

    blocks = caveats(profiles, "syscalls")
    by_count, by_time = [], []
    for rd, s in profiles:
        section = s["sections"]["syscalls"]
        total, rows = section["total"], section["rows"]
        if total is not None:
            blocks.append(
                Note(
                    f"{rd.short}: {fmt.count(total['count'])} calls ({fmt.rate(total['per_s'])}) of "
                    f"{total['distinct']} kinds, {fmt.count(total['errors'])} returned an error; "
                    f"{fmt.ns(total['total_ns'])} inside them"
                )
            )
        by_count += [_html_cells(rd, r) for r in rows[:TOP_CALLS]]
        by_time += [_html_cells(rd, r) for r in sorted(rows, key=lambda r: -r["total_ns"])[:TOP_CALLS]]
    chart = _html_chart(profiles)
    if chart:
        blocks.append(chart)
    if by_count:
        legend = resolution_legend(
            *({"resolution": r["resolution"]} for _, s in profiles for r in s["sections"]["syscalls"]["rows"])
        )
        blocks += [
            Table(f"top {TOP_CALLS} by count", HTML_COLUMNS, by_count),
            Table(f"top {TOP_CALLS} by total time", HTML_COLUMNS, by_time, legend),
        ]
    blocks += crosschecks(profiles, "syscalls")
    return Section(section_title(profiles, "syscalls"), blocks)
