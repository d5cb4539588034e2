"""The frames of a `profile` run, read from the profile summary
(`oslens.profile.summary.summarize(records)`, what `show --json` prints).

`threads` (main): one row per thread of the workload, where its time went.
`sections`: one row per section of the profile: its title and, when it
could not be measured, why. `figures`: every number of the summary that is
not in a table, one row each (section, dotted name, value): the totals,
counts and rates. `crosschecks`: one row per figure measured two ways or
more (the source of each value, and their spread).

Then one frame per table of the summary, in the summary's order: each list
of rows a section holds, named after the section and where it lies in it
(`syscalls`, `locks`, `hardirqs`, `softirqs`, `vectors`, `irqs_per_cpu`,
`irq_spread`, `cpu_split`, `hardware_counters`, `software_counters`, …; a
table without a name of its own here is `<section>_<path>`), and each set
of histograms summarised side by side (`switch_latency`, `fault_latency`,
with a `which` column). Nested objects in a row become columns joined by
"_" (`ticks_user`); a list in a row becomes JSON text. These tables'
columns are those of the summary's rows, so they follow the profile
sections (oslens.profile.sections) rather than being declared here.
"""

from __future__ import annotations

import json
from typing import Any

from . import describe, table

COLUMNS = {
    "threads": {
        "tid": ("int64", "thread id"),
        "tgid": ("int64", "its process id"),
        "comm": ("str", "its name"),
        "user_ns": ("int64", "user CPU time, ns"),
        "system_ns": ("int64", "system CPU time, ns"),
        "runtime_ns": ("int64", "CPU time (precise), ns"),
        "kernel_share": ("float64", "system / (user + system)"),
        "nvcsw": ("int64", "voluntary context switches"),
        "nivcsw": ("int64", "involuntary context switches"),
        "min_flt": ("int64", "minor page faults"),
        "maj_flt": ("int64", "major page faults"),
        "ended": ("str", "exit: exited during the profile; end: alive at its end"),
        "since_begin": ("bool", "a baseline taken when the profile attached was subtracted"),
    },
    "sections": {
        "section": ("str", "section of the profile"),
        "title": ("str", "its title"),
        "missing": ("str", "why it could not be measured (empty when it was)"),
    },
    "figures": {
        "section": ("str", "section of the profile (target, bpf, or a section's name)"),
        "name": ("str", "the figure's dotted path in the summary"),
        "value": ("float64", "its value"),
    },
    "crosschecks": {
        "section": ("str", "section of the profile"),
        "what": ("str", "the figure"),
        "unit": ("str", "its unit"),
        "source": ("str", "one way of measuring it"),
        "value": ("float64", "what that way measured"),
        "spread": ("float64", "(largest - smallest) / largest over the sources"),
    },
}
__doc__ += describe(COLUMNS)

# Tables of the summary with a name of their own: (section, path) -> frame.
NAMES = {
    ("time", "threads"): "threads",
    ("time", "cpu_split.per_cpu"): "cpu_split",
    ("switches", "latency"): "switch_latency",
    ("switches", "preemptions.kernel_thread_families"): "preempting_kernel_threads",
    ("switches", "preemptions.other_applications_top"): "preempting_applications",
    ("switches", "preemptions.workload_top"): "preempting_workload_threads",
    ("faults", "latency"): "fault_latency",
    ("interrupts", "hardirq.rows"): "hardirqs",
    ("interrupts", "softirq.rows"): "softirqs",
    ("interrupts", "vectors.rows"): "vectors",
    ("interrupts", "per_cpu"): "irqs_per_cpu",
    ("interrupts", "spread.rows"): "irq_spread",
    ("interrupts", "spread.per_cpu"): "irq_spread_per_cpu",
    ("syscalls", "rows"): "syscalls",
    ("locks", "rows"): "locks",
    ("counters", "hardware.metrics"): "hardware_counters",
    ("counters", "hardware.unavailable"): "hardware_unavailable",
    ("counters", "software"): "software_counters",
}
_SKIP = ("title", "missing", "notes", "crosschecks")


def _flat(row: dict, prefix: str = "") -> dict:
    out: dict[str, Any] = {}
    for k, v in row.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}_"))
        elif isinstance(v, list):
            out[prefix + k] = json.dumps(v)
        else:
            out[prefix + k] = v
    return out


def _histograms(d: dict) -> bool:
    """A dict of histogram summaries side by side ({which: {count, …}})."""
    return bool(d) and all(isinstance(v, dict) and "count" in v for v in d.values())


def _walk(section: str, node: Any, path: str, tables: dict, figures: list) -> None:
    if isinstance(node, list):
        if (node or (section, path) in NAMES) and all(isinstance(x, dict) for x in node):
            tables[(section, path)] = [_flat(x) for x in node]
        return
    if isinstance(node, dict):
        if path and _histograms(node):
            tables[(section, path)] = [{"which": k, **_flat(v)} for k, v in node.items()]
            return
        for k, v in node.items():
            if not path and k in _SKIP:
                continue
            _walk(section, v, f"{path}.{k}" if path else str(k), tables, figures)
        return
    if isinstance(node, (int, float)) and not isinstance(node, bool):
        figures.append({"section": section, "name": path, "value": float(node)})


def frames(run, records: list[dict]) -> dict:
    import pandas as pd

    from ..profile.summary import summarize

    summary = summarize(records)
    tables: dict = {}
    figures: list = []
    for name in ("target", "bpf"):
        _walk(name, summary.get(name) or {}, "", {}, figures)
    sections, checks = [], []
    for section, body in (summary.get("sections") or {}).items():
        if not isinstance(body, dict):
            continue
        sections.append({"section": section, "title": body.get("title"), "missing": body.get("missing") or ""})
        for c in body.get("crosschecks") or []:
            checks += [
                {
                    "section": section,
                    "what": c.get("what"),
                    "unit": c.get("unit"),
                    "source": src,
                    "value": value,
                    "spread": c.get("spread"),
                }
                for src, value in (c.get("values") or {}).items()
            ]
        _walk(section, body, "", tables, figures)
    out = {
        "threads": table(run.id, tables.pop(("time", "threads"), []), COLUMNS["threads"]),
        "sections": table(run.id, sections, COLUMNS["sections"]),
        "figures": table(run.id, figures, COLUMNS["figures"]),
        "crosschecks": table(run.id, checks, COLUMNS["crosschecks"]),
    }
    for (section, path), rows in tables.items():
        name = NAMES.get((section, path)) or f"{section}_{path.replace('.', '_')}"
        frame = pd.DataFrame.from_records([{"run_id": run.id, **r} for r in rows])
        out[name] = _typed(frame) if rows else pd.DataFrame({"run_id": pd.Series([], dtype="int64")})
    return out


def _typed(frame):
    """One type per column: numbers (Int64 when all integers), flags, text;
    a column mixing them holds JSON text."""
    for col in frame.columns:
        if frame[col].dtype != object:
            continue
        values = frame[col].dropna()
        if values.map(lambda v: isinstance(v, bool)).all() and len(values):
            frame[col] = frame[col].astype("boolean")
        elif values.map(lambda v: isinstance(v, int) and not isinstance(v, bool)).all() and len(values):
            frame[col] = frame[col].astype("Int64")
        elif values.map(lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)).all():
            frame[col] = frame[col].astype("float64")
        elif values.map(lambda v: isinstance(v, str)).all():
            frame[col] = frame[col].astype("str")
        else:
            frame[col] = frame[col].map(lambda v: None if v is None else json.dumps(v)).astype("str")
    return frame
