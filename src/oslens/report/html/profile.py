"""`profile` runs: where the workload's time went in the kernel, drawn from
the same summary the terminal prints (`oslens.profile.summary.summarize`).
The overview of the runs is here; each section's HTML is its module's
`html(profiles)` (oslens.profile.sections, whose html_common says how several
runs are overlaid), in the order of the terminal."""

from __future__ import annotations

from ...profile.sections import SECTIONS
from ...profile.summary import bpf_line, summarize, target_line
from .page import Note, Section


def _overview(profiles) -> Section:
    """What each run profiled, how it ended, and how much of the kernel side was seen."""
    blocks = []
    for rd, s in profiles:
        target, bpf = s["target"], s["bpf"]
        blocks.append(Note(f"{rd.short}: {target_line(target)}"))
        line, style = bpf_line(bpf)
        blocks.append(Note(f"{rd.short}: {line}", warning=style != "dim"))
        if target.get("error"):
            blocks.append(Note(f"{rd.short}: engine error: {target['error']}", warning=True))
        if target.get("status") not in (None, "ok"):
            blocks.append(
                Note(
                    f"{rd.short}: the run ended {target['status']}: figures cover only what was measured", warning=True
                )
            )
        if bpf.get("lost_events"):
            blocks.append(
                Note(
                    f"{rd.short}: {bpf['lost_events']:,} kernel events were dropped (a BPF map was "
                    "full): BPF counts are lower bounds",
                    warning=True,
                )
            )
    return Section("Profile", blocks)


def sections(runs) -> list[Section]:
    profiles = [(rd, summarize(rd.records)) for rd in runs]
    return [_overview(profiles)] + [section.html(profiles) for section in SECTIONS]
