"""The section of a study's report: each finding of the paper beside this
kernel's, with the finding's confidence, or why this run cannot tell
(analysis/osmark.py), as `oslens show` prints it."""

from __future__ import annotations

from ... import kinds
from ...analysis.scale import analyze
from ...format import plural
from .page import Note, Section, Table

TITLE = "OSMark: the paper and this kernel"


def _verdicts(rd, rows: list[dict]) -> list:
    """A study's findings measured here, each beside the paper's, and the
    rest counted by what they would need."""
    measured = [r for r in rows if r["here"] != "not measured"]
    kernel = rd.run.machine.get("kernel", {}).get("release", "this kernel")
    blocks = [
        Table(
            f"{rd.short} · study {rd.run.params['study']}: the paper and Linux {kernel}",
            ["finding", "the paper", "this kernel", "verdict", "why"],
            [[r["measure"], r["paper"], r["here"], r["verdict"], r["reason"]] for r in measured],
            "agrees / differs only where the interval of this kernel's figure lies wholly on one side of what the "
            "paper says; otherwise, or where the machine lacks what the finding needs, 'cannot tell here'",
        )
    ]
    rest: dict[str, int] = {}
    for r in rows:
        if r["here"] == "not measured":
            rest[r["reason"]] = rest.get(r["reason"], 0) + 1
    blocks += [Note(f"{plural(n, 'more finding')}: cannot tell here — {why}", warning=True) for why, n in rest.items()]
    return blocks


def sections(runs) -> list[Section]:
    blocks, others = [], []
    for rd in runs:
        study = rd.run.params.get("study")
        if study and study != "osmark":
            rows = kinds.get(rd.run.kind).load("analyze")(rd.run, rd.records).study or []
            if rows and "here" in rows[0]:
                others += _verdicts(rd, rows)
            continue
        if study != "osmark":
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
    return ([Section(TITLE, blocks)] if blocks else []) + ([Section("The study: the paper and this kernel", others)]
                                                           if others else [])  # fmt: skip
