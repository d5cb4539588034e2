"""The section of a study's report: each finding of the paper beside this
kernel's, with the finding's confidence, or why this run cannot tell
(analysis/osmark.py), as `oslens show` prints it."""

from __future__ import annotations

from ...analysis.scale import analyze
from .page import Section, Table

TITLE = "OSMark: the paper and this kernel"


def sections(runs) -> list[Section]:
    blocks = []
    for rd in runs:
        if rd.run.params.get("study") != "osmark":
            continue
        kernel = rd.run.machine.get("kernel", {}).get("release", "this kernel")
        rows = analyze(rd.run, rd.records).study or []
        blocks.append(
            Table(
                f"{rd.short} · OSMark re-run",
                [
                    "probe",
                    "the paper's benchmark",
                    "the paper (32-core AMD, Linux 2.6.26)",
                    f"Linux {kernel}",
                    "finding",
                    "confidence",
                ],
                [
                    [
                        r["probe"],
                        r["paper_benchmark"],
                        r["paper"],
                        r["today"],
                        r.get("finding") or "–",
                        f"{r['confidence']:.0%}" if r.get("confidence") is not None else "–",
                    ]
                    for r in rows
                ],
                "finding: scales or does not scale where the efficiency's interval at the most workers lies on one "
                "side of 90 % and the points it rests on ran together with their CPUs to themselves; otherwise "
                "'cannot tell here', saying why. Confidence: the interval's coverage",
            )  # fmt: skip
        )
    return [Section(TITLE, blocks)] if blocks else []
