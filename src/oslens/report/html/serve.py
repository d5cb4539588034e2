"""`serve` runs: the servers under load side by side (what each answered,
where its time went), then the profile's sections with every server of
every run overlaid as `profile` overlays runs (profile/sections/*.html)."""

from __future__ import annotations

from dataclasses import dataclass

from ...analysis.serve import describe, job_results, rep_notes, summarize
from ...profile.sections import SECTIONS
from .page import Figure, Note, Section, Table


@dataclass(frozen=True)
class _Served:
    """A server of a run, as the profile's sections name a run."""

    short: str


def _ms(x: float | None) -> float | None:
    return round(x, 3) if x is not None else None


def sections(runs) -> list[Section]:
    rows, notes, profiles = [], [], []
    for rd in runs:
        for s in summarize(rd.records)["servers"]:
            f, reps = s["figures"], s["reps"]
            lat = reps[len(reps) // 2]["latency_ms"] if reps else {}
            rows.append([rd.short, s["label"], s["stands_for"], f.get("per_s"),
                         sum(r["errors"] or 0 for r in reps), _ms(lat.get("p50")), _ms(lat.get("p99")),
                         f.get("kernel_share"), f.get("syscalls_per_s"), f.get("voluntary_per_s"),
                         f.get("involuntary_per_s"), f.get("faults_per_s")])  # fmt: skip
            notes.append(Note(f"{rd.short} {describe(s)}", warning=not s["answered"]))
            if results := job_results(s):
                notes.append(Note(f"{rd.short} {results}"))
            notes += [Note(f"{rd.short} {text}", warning=level != "note") for text, level in rep_notes(s)]
            if s["profile"] is not None:
                profiles.append((_Served(f"{rd.short} {s['label']}"), s["profile"]))
    table = Table(
        "Servers under load (median of the repetitions)",
        [
            "run",
            "server",
            "stands for",
            "requests/s",
            "errors",
            "p50 ms",
            "p99 ms",
            "kernel share",
            "syscalls/s",
            "voluntary switches/s",
            "preemptions/s",
            "faults/s",
        ],  # fmt: skip
        rows,
        "each server profiled in steady state, after its warm-up, while its load generator ran on other CPUs; "
        "a job (no requests) profiled over its whole run",
    )
    out = [Section("Servers under load", [table, *notes])]
    if profiles:
        out += [_as_serve(section.html(profiles)) for section in SECTIONS]
    return out


def _as_serve(section: Section) -> Section:
    """A profile section's figures named as this kind's (an id says which kind drew it)."""
    for block in section.blocks:
        if isinstance(block, Figure):
            block.id = "serve-" + block.id.removeprefix("profile-")
    return section
