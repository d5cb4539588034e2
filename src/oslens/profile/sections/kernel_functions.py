"""Where the workload's kernel time went, by function: its threads' kernel
stacks sampled on a clock on every CPU (engine/bpf/profile.h), a sample
standing for one period of the workload's time on that CPU. By what
entered the kernel (a system call, read from the thread's registers; a
page fault, told by its stack) and by function — self (it was running)
and total (it was on the stack), with its costliest callers. Estimates: a
function seen in n samples is known to about 1/√n of its time."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from rich.console import Console

from ... import format as fmt
from ...analysis import kstacks
from .common import bpf_record, footer, heading, new_section, plain, table

if TYPE_CHECKING:
    from ...report.html.page import Section
    from ..records import Records

TITLE = "Kernel functions (sampled)"
BPF_PARTS = ("samples",)
TOP = 20
ENTRIES = 8
OWN_PROGRAMS = "_oslens_"  # in the name of a frame of oslens's own BPF programs


def samples_of(rec: dict) -> list[kstacks.Sample]:
    """The samples record's counts, each under the cause its stack tells."""
    return [
        kstacks.Sample(kstacks.on_cpu_cause(s)[0], tuple(s.get("frames") or s.get("stack") or ()), s["count"])
        for s in rec.get("samples", [])
    ]


def summarize(recs: Records) -> dict:
    section = new_section(TITLE)
    rec = bpf_record(recs, section, "samples", BPF_PARTS)
    section.update(samples=0, period_ns=None, kernel_ns=None, user_ns=None, entries=[], functions=[], folded={})
    if rec is None:
        return section
    samples = samples_of(rec)
    prof = kstacks.profile(samples, rec["period_ns"], 1.0, rec.get("lost", 0))
    if prof is None:
        section["notes"].append("no sample fell in the workload's threads (too short a run for a 1 ms clock?)")
        return section
    labels = {kstacks.on_cpu_cause(s)[0]: kstacks.on_cpu_cause(s)[1] for s in rec["samples"]}
    kernel = prof.kernel_ns
    section.update(
        samples=prof.samples,
        period_ns=prof.period_ns,
        kernel_ns=kernel,
        user_ns=prof.user_ns,
        entries=[
            {"entry": labels.get(k, k), "key": k, "ns": v, "share": v / kernel if kernel else None}
            for k, v in sorted(prof.by_cause.items(), key=lambda kv: -kv[1])[:ENTRIES]
        ],
        functions=[
            {
                "function": f.name,
                "self_ns": f.self_ns,
                "total_ns": f.total_ns,
                "samples": f.samples,
                "share": f.self_ns / kernel if kernel else None,
                "callers": f.callers,
            }  # fmt: skip
            for f in prof.functions[:TOP]
        ],
        folded={k: v for k, (_, v) in kstacks.folded(samples, prof.period_ns, 1.0).items()},
    )
    if prof.lost:
        section["notes"].append(f"{fmt.count(prof.lost)} samples found no room in the kernel's maps")
    own = sum(s.count for s in samples if any(OWN_PROGRAMS in f for f in s.frames))
    if own:
        section["notes"].append(
            f"the profiler's own programs (bpf_prog_…_oslens_…) ran in {fmt.pct(own / prof.samples)} of the samples: "
            "what its per-call tracing cost the workload (profile --no-syscalls leaves those programs out)"
        )
    if any(s.frames and s.frames[0].startswith("0x") for s in samples):
        section["notes"].append("some frames are addresses: kallsyms had no name for them (BPF programs, or hidden)")
    return section


def stacks(recs: Records) -> dict[str, kstacks.PointSamples]:
    """The whole run's sampled functions, for `compare` (per run, not per operation)."""
    rec = recs.last("samples")
    if not rec or not rec.get("period_ns"):
        return {}
    sampled = kstacks.PointSamples.of(samples_of(rec), rec["period_ns"], 1.0, per="run")
    return {"the profiled command": sampled} if sampled else {}


def render(console: Console, section: dict) -> None:
    heading(console, section)
    if section["functions"]:
        digits = kstacks.digits(section["samples"])
        kernel, user = fmt.ns(section["kernel_ns"], digits), fmt.ns(section["user_ns"], digits)
        console.print(
            f"  {fmt.count(section['samples'])} samples every {fmt.ns(section['period_ns'])} of a CPU: "
            f"{kernel} in the kernel, {user} in user space; in the kernel, entered by "
            + ", ".join(f"{e['entry']} {fmt.pct(e['share'])}" for e in section["entries"][:4])
        )
        t = table("kernel functions by their own time", ["function", "self", "share", "with callees", "called from"])
        for f in section["functions"]:
            d = kstacks.digits(f["samples"])
            t.add_row(
                plain(f["function"]),
                fmt.ns(f["self_ns"], d),
                fmt.pct(f["share"]),
                fmt.ns(f["total_ns"], d),
                plain(" ← ".join(f["callers"][:3])),
            )
        console.print(t)
    footer(
        console,
        section,
        "self = samples in which the function was running × the period; a function seen in n samples is known "
        "to about 1/√n; time with interrupts off shows where they are turned back on (a software clock)"
        if section["functions"]
        else None,
    )


# ---- the HTML report ------------------------------------------------------


def html(profiles) -> Section:
    from ...report.html import flames
    from ...report.html.page import Figure, Section, Table
    from .html_common import caveats, section_title

    blocks = caveats(profiles, "kernel_functions")
    rows = []
    for rd, s in profiles:
        section = s["sections"]["kernel_functions"]
        drawn = flames.chart(section["folded"]) if section.get("folded") else None
        if drawn:
            chart, hidden = drawn
            blocks.append(
                Figure(
                    # by what the page calls it: a serve run holds one profile per server
                    "profile-flames-" + re.sub(r"[^a-z0-9]+", "-", rd.short.lower()).strip("-"),
                    f"{rd.short}: kernel and user time by stack (flame graph)",
                    chart,
                    "width: sampled time on a CPU; what entered the kernel at the root, then the kernel functions "
                    "outermost first" + flames.hidden_note(hidden),
                )
            )
        for f in section["functions"]:
            rows.append([rd.short, f["function"], f["self_ns"], fmt.pct(f["share"]), " ← ".join(f["callers"][:3])])
    if rows:
        blocks.append(Table("kernel functions by their own time", ["run", "function", "self ns", "share",
                                                                   "called from"], rows))  # fmt: skip
    return Section(section_title(profiles, "kernel_functions"), blocks)
