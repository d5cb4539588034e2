"""What the profile sections share: rates, histogram statistics, cross-checks
between independent sources, and the pieces of their rendering.

Every section dict has "title", "missing" (None, or why the section's main
data could not be measured), "notes" (warnings about what was measured) and
"crosschecks" (the same figure from independent sources, side by side).
Unknown numbers are None, never 0 and never NaN (which is not JSON)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Iterable

import numpy as np
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ... import format as fmt
from ...analysis.histogram import Histogram

if TYPE_CHECKING:
    from ..records import Records

# Decades for the distribution of a latency histogram: upper bound (ns), label.
DECADES = (
    (1e3, "<1 µs"),
    (1e4, "1–10 µs"),
    (1e5, "10–100 µs"),
    (1e6, "0.1–1 ms"),
    (1e7, "1–10 ms"),
    (1e8, "10–100 ms"),
    (math.inf, "≥100 ms"),
)

# Sources that count the same thing over slightly different windows and scopes
# still agree within this; beyond it the report says by how much they differ.
CROSSCHECK_TOLERANCE = 0.05


def new_section(title: str) -> dict:
    return {"title": title, "missing": None, "notes": [], "crosschecks": []}


def finite(x: float | None) -> float | None:
    return float(x) if x is not None and math.isfinite(x) else None


def per_second(count: float | None, wall_s: float | None) -> float | None:
    return count / wall_s if count is not None and wall_s else None


def ratio(part: float | None, whole: float | None) -> float | None:
    return part / whole if part is not None and whole else None


def _distribution(h: Histogram) -> dict[str, float]:
    """Share of values per decade. Each bucket goes whole to the decade of its
    representative value (the one percentiles use), so a share is exact to
    within the buckets straddling a decade boundary."""
    # The histogram's own bucket decoding, so that this stays consistent with
    # its percentiles.
    values = np.clip(h.representatives(), h.min, h.max) * h.unit_ns
    upper = np.array([bound for bound, _ in DECADES])
    decade = np.searchsorted(upper, values, side="right")
    counts = np.bincount(decade, weights=h.counts, minlength=len(DECADES))
    return {label: float(c / h.count) for (_, label), c in zip(DECADES, counts)}


def hist_stats(record: dict | None) -> dict | None:
    """Count, total, avg/min/max/stddev, p50/p99 and distribution of an engine
    histogram record. `resolution` is the relative error of a percentile
    (half the widest bucket)."""
    if record is None:
        return None
    h = Histogram.from_record(record)
    stats = {"count": h.count, "total_ns": h.sum * h.unit_ns, "resolution": 2.0**-h.sub_bits / 2}
    if h.count == 0:
        return {
            **stats,
            **dict.fromkeys(("avg_ns", "min_ns", "max_ns", "std_ns", "p50_ns", "p99_ns")),
            "distribution": {},
        }
    p50, p99 = h.percentiles([50, 99])
    return {
        **stats,
        "avg_ns": h.mean_ns,
        "min_ns": h.min_ns,
        "max_ns": h.max_ns,
        "std_ns": finite(h.std_ns),
        "p50_ns": float(p50),
        "p99_ns": float(p99),
        "distribution": _distribution(h),
    }


def add_crosscheck(section: dict, what: str, values: dict[str, float | None], unit: str = "count") -> None:
    """Record the same figure from independent sources, if at least two have it."""
    present = {source: v for source, v in values.items() if v is not None}
    if len(present) < 2:
        return
    high = max(present.values())
    spread = (high - min(present.values())) / high if high > 0 else 0.0
    section["crosschecks"].append({"what": what, "unit": unit, "values": present, "spread": spread})


def bpf_record(recs: Records, section: dict, kind: str, parts: tuple[str, ...]) -> dict | None:
    """The BPF aggregate `kind`, or None with the section's "missing" set to
    why; notes the parts this kernel lacks when the rest loaded."""
    rec, why = recs.bpf_aggregate(kind, parts)
    if why:
        section["missing"] = why
    lacking = recs.bpf_parts_lacking(parts)
    if rec is not None and lacking:
        section["notes"].append(f"this kernel lacks {', '.join(lacking)}: those figures are absent")
    return rec


# Appended to "missing" by a section that shows a fallback instead.
FALLBACK = "; shown instead: what procfs and the software counters give"


# For a figure summed over threads when Records.threads_complete is False.
THREADS_PARTIAL = (
    "without BPF only the threads alive at the end could be read (/proc): threads that exited are not counted"
)


def thread_sum(recs: Records, attr: str) -> int | None:
    """A figure summed over the workload's threads, None if no thread was seen."""
    return sum(getattr(t, attr) for t in recs.threads) if recs.threads else None


# ---- rendering -------------------------------------------------------------


def plain(s: object) -> Text:
    """A string from the machine or the user, shown as is (never read as rich markup)."""
    return Text(str(s))


def table(title: str, columns: Iterable[str], first_left: bool = True) -> Table:
    t = Table(title=title, title_justify="left")
    for i, col in enumerate(columns):
        t.add_column(col, justify="left" if i == 0 and first_left else "right")
    return t


def heading(console: Console, section: dict) -> None:
    console.print(Text(section["title"], style="bold underline"))
    if section.get("missing"):
        console.print(Text(f"  {section['missing']}", style="yellow"))


def crosscheck_text(check: dict) -> tuple[str, bool]:
    """'what: source v · source v (differ by x%)', and whether the sources disagree."""
    figure = fmt.ns if check["unit"] == "ns" else fmt.count
    text = f"{check['what']}: " + " · ".join(f"{source} {figure(v)}" for source, v in check["values"].items())
    off = check["spread"] > CROSSCHECK_TOLERANCE
    return (text + f" (differ by {check['spread']:.0%})" if off else text), off


def footer(console: Console, section: dict, legend: str | None = None) -> None:
    if legend:
        console.print(Text(f"  {legend}", style="dim"))
    for check in section.get("crosschecks", []):
        text, off = crosscheck_text(check)
        console.print(Text(f"  cross-check, {text}", style="yellow" if off else "dim"))
    for note in section.get("notes", []):
        console.print(Text(f"  note: {note}", style="yellow"))


LATENCY_COLUMNS = ("count", "avg", "min", "p50", "p99", "max", "stddev")


def latency_cells(stats: dict | None) -> list[str]:
    if stats is None:
        return ["–"] * len(LATENCY_COLUMNS)
    return [fmt.count(stats["count"])] + [
        fmt.ns(stats[k]) for k in ("avg_ns", "min_ns", "p50_ns", "p99_ns", "max_ns", "std_ns")
    ]


def distribution_table(title: str, rows: list[tuple[str, dict | None]]) -> Table | None:
    """One row per histogram: the share of values in each decade."""
    rows = [(label, stats) for label, stats in rows if stats and stats["count"]]
    if not rows:
        return None
    t = table(title, [""] + [label for _, label in DECADES])
    for label, stats in rows:
        t.add_row(label, *[fmt.share(stats["distribution"].get(d)) for _, d in DECADES])
    return t


def resolution_legend(*stats: dict | None) -> str:
    res = max((s["resolution"] for s in stats if s), default=None)
    return (
        ""
        if res is None
        else (f"percentiles and stddev within ±{res:.1%} (histogram bucket width); min, max, avg exact")
    )
