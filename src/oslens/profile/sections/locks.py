"""Kernel lock contention met by the workload (lock:contention_begin/end):
the top contended locks by total wait, with their kind, the kernel function
that waited, count, max and average wait."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console

from ... import format as fmt
from ...locknames import lock_label, stacks_lost_note
from .common import (
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
    from ...report.html.page import Section
    from ..records import Records

TITLE = "Kernel lock contention"
BPF_PARTS = ("lock_contention", "locks")
TOP = 20


def _caller(row: dict) -> str:
    if row.get("caller"):
        return row["caller"]
    stack = row.get("stack") or []
    return f"{stack[0]} (unresolved)" if stack else "unknown"


def _row(row: dict, wall_s: float | None) -> dict:
    callers = row.get("callers") or ([row["caller"]] if row.get("caller") else [])  # a run stored with one caller
    return {
        "lock": lock_label(row.get("lock_name"), row.get("lock_symbol"), callers, row["lock"]),
        "address": row["lock"],
        "kind": row.get("kind"),
        "caller": _caller(row),
        "count": row["count"],
        "per_s": per_second(row["count"], wall_s),
        "total_ns": row["total_ns"],
        "avg_ns": ratio(row["total_ns"], row["count"]),
        "max_ns": row["max_ns"],
        "stack": row.get("stack") or [],
    }


def _merge_by_caller(rows: list[dict], wall_s: float | None) -> list[dict]:
    """The kernel side keys waits by full stack; a reader asks per lock and
    waiting function, so stacks that differ further down are added up (the
    stack kept is the one that waited longest)."""
    merged: dict[tuple, dict] = {}
    for r in sorted(rows, key=lambda r: -r["total_ns"]):
        key = (r["lock"], r["address"], r["kind"], r["caller"])
        m = merged.get(key)
        if m is None:
            merged[key] = dict(r)
            continue
        m["count"] += r["count"]
        m["total_ns"] += r["total_ns"]
        m["max_ns"] = max(m["max_ns"], r["max_ns"])
        m["per_s"] = per_second(m["count"], wall_s)
        m["avg_ns"] = ratio(m["total_ns"], m["count"])
    return sorted(merged.values(), key=lambda r: -r["total_ns"])


def summarize(recs: Records) -> dict:
    section = new_section(TITLE)
    rec = bpf_record(recs, section, "locks", BPF_PARTS)
    if rec and rec.get("unresolved_because"):
        section["notes"].append(f"callers and lock names unresolved: {rec['unresolved_because']}")
    if rec and rec.get("lock_symbols_unavailable"):
        section["notes"].append(rec["lock_symbols_unavailable"])
    if rec and rec.get("stacks_lost"):
        section["notes"].append(stacks_lost_note(rec["stacks_lost"]))
    rows = _merge_by_caller([_row(r, recs.wall_s) for r in (rec or {}).get("rows", [])], recs.wall_s)
    section["rows"] = rows[:TOP]
    section["total"] = (
        {"locks": len(rows), "count": sum(r["count"] for r in rows), "total_ns": sum(r["total_ns"] for r in rows)}
        if rec
        else None
    )
    if rec is not None and not rows:
        section["notes"].append("no kernel lock was contended by the workload's threads")
    return section


def render(console: Console, section: dict) -> None:
    heading(console, section)
    total = section["total"]
    if section["rows"]:
        console.print(
            f"  {total['locks']:,} contended locks, {fmt.count(total['count'])} waits, "
            f"{fmt.ns(total['total_ns'])} waited in all"
        )
        t = table(
            "top contended locks by total wait", ["lock", "kind", "waited in", "waits", "total wait", "avg", "max"]
        )
        for r in section["rows"]:
            t.add_row(
                plain(r["lock"]),
                plain(r["kind"] or "–"),
                plain(r["caller"]),
                fmt.count(r["count"]),
                fmt.ns(r["total_ns"]),
                fmt.ns(r["avg_ns"]),
                fmt.ns(r["max_ns"]),
            )
        console.print(t)
    footer(
        console,
        section,
        "wait = contention_begin to contention_end: spinning and sleeping both count" if section["rows"] else None,
    )


# ---- the HTML report ------------------------------------------------------
# altair, pandas and the page are imported by the functions that draw (see html_common).


def html(profiles) -> Section:
    from ...report.html.page import Note, Section, Table
    from .html_common import caveats, crosschecks, section_title

    blocks = caveats(profiles, "locks")
    rows = []
    for rd, s in profiles:
        section = s["sections"]["locks"]
        total = section["total"]
        if section["rows"]:
            blocks.append(
                Note(
                    f"{rd.short}: {total['locks']:,} contended locks, {fmt.count(total['count'])} waits, "
                    f"{fmt.ns(total['total_ns'])} waited in all"
                )
            )
        rows += [
            [
                rd.short,
                r["lock"],
                r["kind"] or "–",
                r["caller"],
                fmt.count(r["count"]),
                fmt.ns(r["total_ns"]),
                fmt.ns(r["avg_ns"]),
                fmt.ns(r["max_ns"]),
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
                "without a name or symbol is named by the code that waited for it",
            )
        )
    blocks += crosschecks(profiles, "locks")
    return Section(section_title(profiles, "locks"), blocks)
