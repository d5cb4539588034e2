"""Kernel entry run lengths (the co-design study's chapter 4): how long each
entry into the kernel ran on the CPU before going back to user space — a
system call or a page fault with everything nested in it (not the time it
slept), or an interrupt, softirq or system vector taken in user space — per
kind and combined, and the share of the kernel's time held by the entries
longer than 1 µs, 10 µs and 100 µs (counted exactly, not read off the
histogram)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console

from ... import format as fmt
from ...analysis.runlengths import RunLengths
from .common import (
    bpf_record,
    footer,
    heading,
    new_section,
    plain,
    table,
)

if TYPE_CHECKING:
    from ...report.html.page import Section
    from ..records import Records

TITLE = "Kernel entry run lengths"
VECTORS = ("local_timer", "reschedule", "call_function", "call_function_single", "irq_work")
# kind -> the BPF parts it needs (engine/bpf/loader.c names them)
KINDS = {
    "syscall": ("syscalls",),
    "fault": ("page_faults",),
    "hardirq": ("hardirqs",),
    "softirq": ("softirqs",),
    "vector": VECTORS,
}
BPF_PARTS = ("run_lengths",)
THRESHOLDS = (1000, 10000, 100000)
COLUMNS = ["entries", "mean", "≤ 1 µs", *(f"> {fmt.ns(t)}: entries / time" for t in THRESHOLDS)]


def summarize(recs: Records) -> dict:
    section = new_section(TITLE)
    rec = bpf_record(recs, section, "run_lengths", BPF_PARTS)
    section["kinds"], section["unmeasured"], section["all"] = {}, {}, None
    if rec is None:
        return section
    measured = []
    for kind, parts in KINDS.items():
        why = recs.bpf_parts_why(parts, every=True)  # a vector kind is traced if any vector is
        if why:
            section["unmeasured"][kind] = why
            continue
        part = rec["run_lengths"].get(kind)
        if part is None:
            section["unmeasured"][kind] = "not measured: the engine wrote no figures for it"
            continue
        measured.append(part)
        rl = RunLengths.of([part])
        section["kinds"][kind] = rl.to_dict() if rl else None
    combined = RunLengths.of(measured)
    section["all"] = combined.to_dict() if combined else None
    if "syscall" in section["unmeasured"]:
        section["notes"].append(
            "system calls not traced: interrupts taken inside them count as entries of their own here"
        )
    return section


def _cells(rl: dict | None) -> list[str]:
    if not rl:
        return ["0", *["–"] * (len(COLUMNS) - 1)]
    over = rl["over"]
    return [
        fmt.count(rl["count"]),
        fmt.ns(rl["mean_ns"]),
        fmt.share(1 - over["1000"][0]),
        *(f"{fmt.share(over[str(t)][0])} / {fmt.share(over[str(t)][1])}" for t in THRESHOLDS),
    ]


def _rows(section: dict) -> list[tuple[str, list[str], bool]]:
    rows = [(kind, _cells(rl), False) for kind, rl in section["kinds"].items()]
    rows += [(kind, [why, *[""] * (len(COLUMNS) - 1)], False) for kind, why in section["unmeasured"].items()]
    if section["kinds"]:
        rows.append(("all", _cells(section["all"]), True))
    return rows


def headline(section: dict) -> str | None:
    """'most entries short, a few long ones hold the time' in figures, or None."""
    rl = section.get("all")
    if not rl:
        return None
    n, t = rl["over"]["10000"]
    return (
        f"{fmt.share(1 - rl['over']['1000'][0])} of {fmt.count(rl['count'])} kernel entries ran ≤ 1 µs; "
        f"the {fmt.share(n)} longer than 10 µs held {fmt.share(t)} of the kernel's time in entries"
    )


def render(console: Console, section: dict) -> None:
    heading(console, section)
    if section["missing"]:
        return
    t = table("how long each kernel entry ran on the CPU", ["kind", *COLUMNS])
    for kind, cells, bold in _rows(section):
        t.add_row(kind, *cells, style="bold" if bold else None)
    console.print(t)
    if line := headline(section):
        console.print(plain(f"  {line}"))
    footer(
        console,
        section,
        "an entry: a system call or fault from user space with what nested in it, on the CPU (not asleep), "
        "or an interrupt taken in user space; time share = of the time in entries of that kind",
    )


# ---- the HTML report ------------------------------------------------------


def html(profiles) -> Section:
    import altair as alt
    import pandas as pd

    from ...report.html.page import Figure, Note, Section, Table
    from .html_common import caveats, run_colour, run_order, section_title

    blocks = caveats(profiles, "run_lengths")
    rows, hist = [], []
    for rd, s in profiles:
        section = s["sections"]["run_lengths"]
        if section["missing"]:
            continue
        rows += [[rd.short, kind, *cells] for kind, cells, _ in _rows(section)]
        if line := headline(section):
            blocks.append(Note(f"{rd.short}: {line}"))
        for kind, rl in section["kinds"].items():
            for b, n in (rl or {}).get("log2_hist", []):
                hist.append({"run": rd.short, "kind": kind, "from_ns": 2**b, "entries": n / rl["count"]})
    if rows:
        blocks.append(Table("how long each kernel entry ran on the CPU", ["run", "kind", *COLUMNS], rows))
    if hist:
        df = pd.DataFrame(hist)
        chart = (
            alt.Chart(df)
            .mark_bar()
            .encode(
                alt.X("from_ns:O", title="ran at least (ns, powers of two)"),
                alt.Y("entries:Q", axis=alt.Axis(format="%"), title="share of entries"),
                run_colour(run_order(profiles)),
                alt.XOffset("run:N"),
                tooltip=["run", "kind", "from_ns", alt.Tooltip("entries:Q", format=".2%")],
            )
            .properties(width=440, height=150)
            .facet(facet=alt.Facet("kind:N", title=None), columns=2)
        )
        blocks.append(
            Figure("profile-run-lengths", "kernel entry run lengths", chart, "share of entries per power of two of ns")
        )
    return Section(section_title(profiles, "run_lengths"), blocks)
