"""The section of a study's report: each finding of the paper beside this
kernel's, with the finding's confidence, or why this run cannot tell
(analysis/osmark.py), as `oslens show` prints it."""

from __future__ import annotations

import altair as alt
import pandas as pd

from ... import kinds
from ...analysis.scale import analyze
from ...format import plural
from .page import Figure, Note, Section, Table

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
    if figure := _paper_beside_kernel(rd, measured):
        blocks.append(figure)
    rest: dict[str, int] = {}
    for r in rows:
        if r["here"] == "not measured":
            rest[r["reason"]] = rest.get(r["reason"], 0) + 1
    blocks += [Note(f"{plural(n, 'more finding')}: cannot tell here — {why}", warning=True) for why, n in rest.items()]
    return blocks


def _paper_beside_kernel(rd, rows: list[dict]) -> Figure | None:
    """The findings that are numbers on both sides, the paper's figure (or
    range) beside this kernel's with its interval, one panel per unit, on a
    log scale (figures decades and machines apart); none where no finding
    is a number on both sides (a figure of zero cannot be drawn so: left
    to the table)."""
    data = []
    for r in rows:
        both = (r.get("paper_low"), r.get("paper_high"), r.get("value"), r.get("low"), r.get("high"))
        if any(x is None or x <= 0 for x in both):
            continue
        unit = r.get("unit") or "(no unit)"
        data.append({"finding": r["measure"], "unit": unit, "who": "the paper", "x": (both[0] * both[1]) ** 0.5,
                     "low": both[0], "high": both[1], "verdict": r["verdict"]})  # fmt: skip
        data.append({"finding": r["measure"], "unit": unit, "who": "this kernel", "x": both[2], "low": both[3],
                     "high": both[4], "verdict": r["verdict"]})  # fmt: skip
    if not data:
        return None
    frame = pd.DataFrame(data)
    # a panel per unit, each a chart of its own (a faceted layer with independent scales makes Vega-Lite guess)
    chart = alt.vconcat(*(_panel(part, unit) for unit, part in frame.groupby("unit", sort=True)))
    return Figure(
        f"study-paper-{rd.run.id}",
        f"{rd.short} · the paper's figures beside this kernel's",
        chart,
        "each finding that is a number on both sides: the paper's figure (a range drawn as a bar) and this "
        "kernel's median with its interval, on a log scale, one panel per unit",
    )


def _panel(frame: pd.DataFrame, unit: str) -> alt.LayerChart:
    base = alt.Chart(frame).encode(
        y=alt.Y("finding:N", title=None, axis=alt.Axis(labelLimit=480)),
        color=alt.Color("who:N", title=None, scale=alt.Scale(domain=["the paper", "this kernel"])),
        tooltip=[
            "finding:N",
            "who:N",
            alt.Tooltip("x:Q", format=".3~g"),
            alt.Tooltip("low:Q", format=".3~g"),
            alt.Tooltip("high:Q", format=".3~g"),
            "verdict:N",
        ],  # fmt: skip
    )
    log = alt.Scale(type="log")
    ranges = base.mark_rule(strokeWidth=2).encode(x=alt.X("low:Q", scale=log, title=unit), x2="high:Q")
    points = base.mark_point(filled=True, size=60).encode(x=alt.X("x:Q", scale=log, title=unit))
    return alt.layer(ranges, points)


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
