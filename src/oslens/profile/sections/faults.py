"""Page faults of the workload: minor and major per second and the latency of
a fault (frequency/s, avg, max, min, stddev and distribution, as in the
data-center characterization study's table)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console

from ... import format as fmt
from ...analysis.histogram import Histogram
from ..records import RUSAGE_SOURCE
from .common import (
    FALLBACK,
    LATENCY_COLUMNS,
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
    resolution_legend,
    table,
    thread_sum,
)

if TYPE_CHECKING:
    from ...report.html.page import Section
    from ..records import Records

TITLE = "Page faults"
BPF_PARTS = ("page_faults", "faults")
KINDS = ("minor", "major")


def _counts_without_bpf(recs: Records) -> tuple[dict, str | None]:
    """The software counters (not user-mode-only ones: they miss the faults
    taken in the kernel on user memory), else the threads' min_flt/maj_flt,
    else the command's rusage."""
    counters = {k: recs.counter_value(f"page-faults-{k[:3]}") for k in KINDS}
    if all(v is not None for v in counters.values()):
        return counters, "page-faults-min/maj counters"
    if recs.threads:
        return {k: thread_sum(recs, f"{k[:3]}_flt") for k in KINDS}, "threads' min_flt/maj_flt (/proc)"
    ru = recs.rusage
    if ru and ru.get("min_flt") is not None and ru.get("maj_flt") is not None:
        return {"minor": ru["min_flt"], "major": ru["maj_flt"]}, RUSAGE_SOURCE
    return dict.fromkeys(KINDS), None


def _minor(all_faults: dict | None, major: dict | None) -> dict | None:
    """The minor faults' latency: every fault's histogram minus the major ones' (the
    kernel side keeps both in one layout, so the difference is exact per bucket)."""
    if all_faults is None or major is None:
        return None
    try:
        return hist_stats(Histogram.from_record(all_faults).subtract(Histogram.from_record(major)).to_record())
    except ValueError:
        return None


def summarize(recs: Records) -> dict:
    section = new_section(TITLE)
    rec = bpf_record(recs, section, "faults", BPF_PARTS)
    if rec is not None:
        counts, source = {k: rec[k] for k in KINDS}, "BPF"
        section["latency"] = {
            "minor": _minor(rec.get("hist"), rec.get("major_hist")),
            "all": hist_stats(rec.get("hist")),
            "major": hist_stats(rec.get("major_hist")),
        }
        if section["latency"]["minor"]:
            section["notes"].append(
                "minor-fault latency = all faults minus major ones, bucket by bucket: counts and avg exact, "
                "min and max to their bucket's width"
            )
    else:
        section["missing"] += FALLBACK
        counts, source = _counts_without_bpf(recs)
        section["latency"] = None
    total = None if None in counts.values() else sum(counts.values())
    section["counts"] = {
        "source": source,
        **counts,
        "all": total,
        **{f"{k}_per_s": per_second(v, recs.wall_s) for k, v in {**counts, "all": total}.items()},
    }
    vmstat = recs.proc_delta.vmstat
    # pgfault counts every fault, pgmajfault the major ones among them.
    section["system_wide"] = (
        {"minor": vmstat["pgfault"] - vmstat["pgmajfault"], "major": vmstat["pgmajfault"]}
        if vmstat and "pgfault" in vmstat and "pgmajfault" in vmstat
        else None
    )
    for kind in KINDS:
        add_crosscheck(
            section,
            f"{kind} faults",
            {
                "BPF": rec[kind] if rec else None,
                f"page-faults-{kind[:3]} counter": recs.counter_value(f"page-faults-{kind[:3]}"),
                f"threads' {kind[:3]}_flt": thread_sum(recs, f"{kind[:3]}_flt"),
            },
        )
    return section


def _cells(kind: str, counts: dict, latency: dict) -> list[str]:
    """A kind of fault's row after its name: per s, count, then the latency."""
    stats = latency.get(kind)
    return [fmt.rate(counts[f"{kind}_per_s"]), fmt.count(counts[kind]), *latency_cells(stats)[1:]]


def render(console: Console, section: dict) -> None:
    heading(console, section)
    c = section["counts"]
    latency = section["latency"] or {}
    if c["source"] is None:
        console.print("  no page-fault count from any source", style="yellow")
    else:
        t = table("faults of the workload and their latency", ["", "per s"] + list(LATENCY_COLUMNS))
        for kind in (*KINDS, "all"):
            t.add_row(kind, *_cells(kind, c, latency), style="bold" if kind == "all" else None)
        console.print(t)
        console.print(plain(f"  counts from {c['source']}" + ("; latency from BPF" if latency else "")), style="dim")
    dist = distribution_table("fault latency distribution", [(k, s) for k, s in latency.items()])
    if dist:
        console.print(dist)
    sw = section["system_wide"]
    if sw:
        console.print(
            f"  whole machine meanwhile (/proc/vmstat): {fmt.count(sw['minor'])} minor, {fmt.count(sw['major'])} major",
            style="dim",
        )
    footer(console, section, resolution_legend(*latency.values()))


# ---- the HTML report ------------------------------------------------------
# altair, pandas and the page are imported by the functions that draw (see html_common).


def html(profiles) -> Section:
    from ...report.html.page import Figure, Note, Section, Table
    from .html_common import caveats, crosschecks, distribution_chart, distribution_frame, run_order, section_title

    blocks = caveats(profiles, "faults")
    rows = []
    for rd, s in profiles:
        section = s["sections"]["faults"]
        c, latency = section["counts"], section["latency"] or {}
        if c["source"] is None:
            blocks.append(Note(f"{rd.short}: no page-fault count from any source", warning=True))
            continue
        source = c["source"] + ("; latency from BPF" if latency else "")
        rows += [[rd.short, kind, *_cells(kind, c, latency), source] for kind in (*KINDS, "all")]
    if rows:
        stats = [st for _, s in profiles for st in (s["sections"]["faults"]["latency"] or {}).values()]
        caption = "; ".join(
            filter(
                None,
                [
                    "minor = all faults minus major ones, bucket by bucket (min and max to a bucket's width)",
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
    df = distribution_frame(
        profiles, lambda s: s["sections"]["faults"]["latency"], {"all": "all faults", "major": "major faults"}
    )
    if not df.empty:
        blocks.append(
            Figure(
                "profile-fault-latency",
                "page-fault latency",
                distribution_chart(df, ["all faults", "major faults"], run_order(profiles)),
                "share of faults per decade of time spent handling them (BPF)",
            )
        )
    for rd, s in profiles:
        sw = s["sections"]["faults"]["system_wide"]
        if sw:
            blocks.append(
                Note(
                    f"{rd.short}: whole machine meanwhile (/proc/vmstat): {fmt.count(sw['minor'])} minor, "
                    f"{fmt.count(sw['major'])} major"
                )
            )
    blocks += crosschecks(profiles, "faults")
    return Section(section_title(profiles, "faults"), blocks)
