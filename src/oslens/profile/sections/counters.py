"""perf counters of the workload's process tree. Hardware ones split by
privilege (each event opened once excluding the kernel, once excluding user
mode): cycles, instructions, IPC, front-end stalls, L1i and iTLB misses, and
the share of instructions run in the kernel. Software ones listed as they are."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console

from ... import format as fmt
from ...format import si
from .common import (
    footer,
    heading,
    new_section,
    per_second,
    plain,
    ratio,
    table,
)

if TYPE_CHECKING:
    from ...report.html.page import Figure, Section
    from ..records import Records

TITLE = "Hardware counters: user vs kernel"
HARDWARE = ("cycles", "instructions", "stalled-cycles-frontend", "L1-icache-misses", "iTLB-misses")
SOFTWARE = ("task-clock", "context-switches", "cpu-migrations", "page-faults-min", "page-faults-maj")
SCOPES = ("user", "kernel", "all")

# key -> (label, how it prints)
# What a software event opened with exclude_kernel (perf_event_paranoid=2
# without CAP_PERFMON, as `perf stat` falls back to) still counts, per
# kernel/events/core.c: the scheduler's events are counted with the
# scheduler's own (kernel) registers, which exclude_kernel drops; a fault
# with the faulting registers; task-clock is its own PMU, which counts the
# task's time on CPU whatever the exclude bits.
USER_ONLY_MEANS = {
    "task-clock": "still the whole CPU time, kernel included (task-clock ignores exclude_kernel when counting)",
    "context-switches": None,
    "cpu-migrations": None,
    "page-faults-min": "faults taken in user mode only, not those the kernel takes on user memory (e.g. in read())",
    "page-faults-maj": "faults taken in user mode only, not those the kernel takes on user memory (e.g. in read())",
}
NEVER_IN_USER_MODE = "always 0 that way: the scheduler counts it in kernel mode, which exclude_kernel drops"


def user_only_label(scope_limited: str | None) -> str | None:
    """The engine's "user only: perf_event_paranoid=2" as the report says it."""
    if not scope_limited:
        return None
    _, _, why = scope_limited.partition(": ")
    return f"user-space only ({why or scope_limited})"


def _software(name: str, e: dict, wall_s: float | None) -> dict:
    label = user_only_label(e.get("scope_limited"))
    value, error, means = e.get("value"), e.get("error"), None
    if label:
        means = USER_ONLY_MEANS.get(name)
        if means is None and value is not None:
            value, error = None, f"{label}: {NEVER_IN_USER_MODE}"
    return {
        "name": name,
        "value": value,
        "per_s": per_second(value, wall_s),
        "error": error,
        "user_only": label,
        "means": means,
    }


METRICS = {
    "cycles": ("cycles", "count"),
    "instructions": ("instructions", "count"),
    "ipc": ("instructions per cycle", "ratio"),
    "frontend_stalls_per_kcycle": ("front-end stall cycles per 1000 cycles", "ratio"),
    "l1i_misses_per_kinstr": ("L1-icache misses per 1000 instructions", "ratio"),
    "itlb_misses": ("iTLB misses", "count"),
    "itlb_misses_per_kinstr": ("iTLB misses per 1000 instructions", "ratio"),
}


def _per_thousand(events: float | None, base: float | None) -> float | None:
    r = ratio(events, base)
    return None if r is None else 1000 * r


def _metrics(v: dict[str, float | None]) -> dict[str, float | None]:
    return {
        "cycles": v["cycles"],
        "instructions": v["instructions"],
        "ipc": ratio(v["instructions"], v["cycles"]),
        "frontend_stalls_per_kcycle": _per_thousand(v["stalled-cycles-frontend"], v["cycles"]),
        "l1i_misses_per_kinstr": _per_thousand(v["L1-icache-misses"], v["instructions"]),
        "itlb_misses": v["iTLB-misses"],
        "itlb_misses_per_kinstr": _per_thousand(v["iTLB-misses"], v["instructions"]),
    }


def _hardware(section: dict, events: dict[tuple[str, str], dict]) -> dict:
    values = {
        scope: {name: (events.get((name, scope)) or {}).get("value") for name in HARDWARE} for scope in SCOPES[:2]
    }
    # user + kernel where both were counted: "all" is never half of it.
    values["all"] = {
        name: None
        if None in (values["user"][name], values["kernel"][name])
        else values["user"][name] + values["kernel"][name]
        for name in HARDWARE
    }
    per_scope = {scope: _metrics(values[scope]) for scope in SCOPES}
    unavailable = [
        {
            "event": name,
            "scope": scope,
            "error": (events.get((name, scope)) or {}).get("error") or "the engine did not report it",
        }
        for name in HARDWARE
        for scope in SCOPES[:2]
        if values[scope][name] is None
    ]
    errors = sorted({u["error"] for u in unavailable})
    if len(unavailable) == 2 * len(HARDWARE):
        section["missing"] = f"hardware counters not available: {'; '.join(errors)}"
    else:
        section["notes"] += [f"{u['event']} ({u['scope']}) not available: {u['error']}" for u in unavailable]
    return {
        "metrics": [
            {"metric": key, "label": label, **{scope: per_scope[scope][key] for scope in SCOPES}}
            for key, (label, _) in METRICS.items()
        ],
        "kernel_instruction_share": ratio(values["kernel"]["instructions"], values["all"]["instructions"]),
        "kernel_cycle_share": ratio(values["kernel"]["cycles"], values["all"]["cycles"]),
        "unavailable": unavailable,
    }


def summarize(recs: Records) -> dict:
    section = new_section(TITLE)
    rec = recs.last("counters")
    if rec is None:
        section["missing"] = "not measured: the engine wrote no counters record"
        section["hardware"], section["software"] = None, []
        return section
    events = {(e["name"], e["scope"]): e for e in rec.get("events", [])}
    section["hardware"] = _hardware(section, events)
    section["software"] = [
        _software(name, e, recs.wall_s) for name in SOFTWARE for e in [events.get((name, "all"))] if e is not None
    ]
    limited = sorted({s["user_only"] for s in section["software"] if s["user_only"]})
    if limited:
        section["notes"].append(
            f"software counters {', '.join(limited)}: refused at every privilege level, "
            "so opened with exclude_kernel as `perf stat` does"
        )
    for e in events.values():
        # The engine scaled these by enabled/running: say how much was counted.
        if e.get("value") is not None and e.get("running_ns") and e["running_ns"] < e.get("enabled_ns", 0):
            section["notes"].append(
                f"{e['name']} ({e['scope']}) counted {e['running_ns'] / e['enabled_ns']:.0%} "
                "of the time (multiplexed) and scaled up"
            )
    return section


def _sw_name(s: dict) -> str:
    return f"{s['name']}, {s['user_only']}" if s.get("user_only") else s["name"]


def _fmt(value: float | None, kind: str) -> str:
    if value is None:
        return "n/a"
    return si(value) if kind == "count" else f"{value:.2f}"


def render(console: Console, section: dict) -> None:
    heading(console, section)
    hw = section["hardware"]
    if hw and any(m[scope] is not None for m in hw["metrics"] for scope in SCOPES):
        t = table("hardware counters by privilege", ["", "user", "kernel", "user + kernel"])
        for m in hw["metrics"]:
            kind = METRICS[m["metric"]][1]
            t.add_row(m["label"], *[_fmt(m[scope], kind) for scope in SCOPES])
        console.print(t)
        console.print(
            f"  share of instructions run in the kernel: {fmt.share(hw['kernel_instruction_share'])}; "
            f"of cycles: {fmt.share(hw['kernel_cycle_share'])}"
        )
    if section["software"]:
        t = table("software counters", ["counter", "value", "per s"])
        for s in section["software"]:
            name = plain(_sw_name(s))
            if s["value"] is None:
                t.add_row(name, "n/a", plain(s["error"] or "no value"))
            elif s["name"] == "task-clock":
                t.add_row(name, fmt.ns(s["value"]), f"{s['per_s'] / 1e9:.2f} CPUs" if s["per_s"] else "–")
            else:
                t.add_row(name, f"{s['value']:,.0f}", fmt.rate(s["per_s"]))
        console.print(t)
        for s in section["software"]:
            if s.get("means"):
                console.print(plain(f"  {s['name']}, {s['user_only']}: {s['means']}"), style="dim")
        console.print("  software counters cover the whole process tree (inherited)", style="dim")
    footer(console, section)


# ---- the HTML report ------------------------------------------------------
# altair, pandas and the page are imported by the functions that draw (see html_common).


def _html_figure(profiles) -> Figure | None:
    """The per-instruction and per-cycle rates, user against kernel: where
    the kernel runs worse than user code (lower IPC, more i-cache and iTLB misses)."""
    import altair as alt
    import pandas as pd

    from ...report.html.page import Figure
    from .html_common import run_colour, run_order

    bars = [
        {"run": rd.short, "metric": m["label"], "scope": scope, "value": m[scope]}
        for rd, s in profiles
        for m in (s["sections"]["counters"]["hardware"] or {}).get("metrics", [])
        if METRICS[m["metric"]][1] == "ratio"
        for scope in ("user", "kernel")
        if m[scope] is not None
    ]
    if not bars:
        return None
    order = run_order(profiles)
    chart = (
        alt.Chart(pd.DataFrame(bars))
        .mark_bar()
        .encode(
            alt.X("scope:N", title=None, sort=["user", "kernel"], axis=alt.Axis(labelAngle=0)),
            alt.Y("value:Q", title=None),
            run_colour(order),
            alt.XOffset("run:N", scale=alt.Scale(domain=order)),
            tooltip=["run", "metric", "scope", alt.Tooltip("value:Q", format=".3g")],
        )
        .properties(width=200, height=160)
        .facet(
            facet=alt.Facet(
                "metric:N", title=None, sort=[label for label, kind in METRICS.values() if kind == "ratio"]
            ),
            columns=4,
        )
        .resolve_scale(y="independent")
    )
    return Figure(
        "profile-counters",
        "hardware counter rates, user vs kernel",
        chart,
        "each event counted twice, once excluding the kernel and once excluding user mode",
    )


def html(profiles) -> Section:
    from ...report.html.page import Note, Section, Table
    from .html_common import caveats, crosschecks, section_title

    blocks = caveats(profiles, "counters")
    figure = _html_figure(profiles)
    if figure:
        blocks.append(figure)
    hw_rows, sw_rows = [], []
    for rd, s in profiles:
        section = s["sections"]["counters"]
        hw = section["hardware"]
        if hw and any(m[scope] is not None for m in hw["metrics"] for scope in SCOPES):
            hw_rows += [
                [rd.short, m["label"], *[_fmt(m[scope], METRICS[m["metric"]][1]) for scope in SCOPES]]
                for m in hw["metrics"]
            ]
            blocks.append(
                Note(
                    f"{rd.short}: share of instructions run in the kernel "
                    f"{fmt.share(hw['kernel_instruction_share'])}; of cycles "
                    f"{fmt.share(hw['kernel_cycle_share'])}"
                )
            )
        for c in section["software"]:
            name = _sw_name(c) + (f": {c['means']}" if c.get("means") else "")
            if c["value"] is None:
                sw_rows.append([rd.short, name, "n/a", c["error"] or "no value"])
            elif c["name"] == "task-clock":
                sw_rows.append(
                    [rd.short, name, fmt.ns(c["value"]), f"{c['per_s'] / 1e9:.2f} CPUs" if c["per_s"] else "–"]
                )
            else:
                sw_rows.append([rd.short, name, fmt.count(c["value"]), fmt.rate(c["per_s"])])
    if hw_rows:
        blocks.append(Table("hardware counters by privilege", ["run", "", "user", "kernel", "user + kernel"], hw_rows))
    if sw_rows:
        blocks.append(
            Table(
                "software counters", ["run", "counter", "value", "per s"], sw_rows, "the whole process tree (inherited)"
            )
        )
    blocks += crosschecks(profiles, "counters")
    return Section(section_title(profiles, "counters"), blocks)
