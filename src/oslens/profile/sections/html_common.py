"""What the sections' HTML views (`oslens report`) share: the runs' order and
colours, the unit of a time axis, the caveats before a section's figures and
the cross-checks after them, and the decade distribution of latency
histograms.

Several runs are overlaid as a comparison (two kernels profiling the same
command): charts whose categories are shared (softirq vectors, system calls,
latency decades) put the runs side by side in one colour each; charts whose
categories belong to one run (its threads, its CPUs) get one panel per run.
Whatever a run could not measure is said in a Note with the reason the
summary gives, never drawn as an empty plot.

`profiles` is a list of (report.html.RunData, profile summary dict). Only the
sections' `html` functions import this module (and altair, pandas and the
page), so that the summary and the terminal view do not load them."""

from __future__ import annotations

import altair as alt
import pandas as pd

from ...report.html.page import Note
from .common import DECADES, crosscheck_text

DECADE_LABELS = [label for _, label in DECADES]


def _time_unit(max_ns: float) -> tuple[float, str]:
    """The unit in which the largest value reads best: profiles last from
    milliseconds to hours, so a fixed unit would give 0.0004 s or 3.6e6 ms."""
    for scale, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")):
        if max_ns >= scale:
            return scale, unit
    return 1.0, "ns"


def in_unit(df: pd.DataFrame, stacked_by: list[str] | None = None) -> str:
    """Adds a "time" column to df (from its "ns") in the unit its longest bar
    reads best in, and returns the unit. Stacked bars are as long as the sum of
    the rows that share `stacked_by`."""
    longest = df.groupby(stacked_by)["ns"].sum().max() if stacked_by else df["ns"].max()
    scale, unit = _time_unit(float(longest or 0))
    df["time"] = df["ns"] / scale
    return unit


def run_order(profiles) -> list[str]:
    """The runs in the order asked for (not alphabetical, which puts run 10 before
    run 2): every figure lists and colours them the same way, with or without data of each."""
    return [rd.short for rd, _ in profiles]


def run_colour(order: list[str]) -> alt.Color:
    return alt.Color("run:N", title="run", scale=alt.Scale(domain=order))


def run_rows(order: list[str]) -> alt.Row:
    return alt.Row("run:N", sort=order, title=None, header=alt.Header(labelAngle=0, labelAlign="left"))


def time_bars(profiles, bars: list[dict], category: str, sort_by: str, what: str, tooltip: list) -> alt.Chart:
    """Bars of time (each bar's "ns") per `category`, the largest `sort_by` first, the runs side by
    side in one colour each; the axis is titled `what (unit)` and the tooltip adds `tooltip`."""
    df = pd.DataFrame(bars)
    unit = in_unit(df)
    order = run_order(profiles)
    return (
        alt.Chart(df)
        .mark_bar()
        .encode(
            alt.X("time:Q", title=f"{what} ({unit})"),
            alt.Y(f"{category}:N", sort=alt.EncodingSortField(sort_by, op="max", order="descending"), title=None),
            run_colour(order),
            alt.YOffset("run:N", scale=alt.Scale(domain=order)),
            tooltip=["run", category, alt.Tooltip("time:Q", title=unit, format=".4g"), *tooltip],
        )
        .properties(width=700, height=alt.Step(12))
    )


def caveats(profiles, key: str) -> list[Note]:
    """Why a run lacks a section's main data, and the section's warnings about
    what it did measure: said before the figures they qualify."""
    out = []
    for rd, s in profiles:
        section = s["sections"][key]
        if section.get("missing"):
            out.append(Note(f"{rd.short}: {section['missing']}", warning=True))
        out += [Note(f"{rd.short}: {note}", warning=True) for note in section.get("notes", [])]
    return out


def _crosscheck(rd, check: dict) -> Note:
    text, off = crosscheck_text(check)
    return Note(f"{rd.short}, cross-check of {text}", warning=off)


def crosschecks(profiles, key: str) -> list[Note]:
    """The same figure from independent sources, side by side: after the figures."""
    return [_crosscheck(rd, check) for rd, s in profiles for check in s["sections"][key].get("crosschecks", [])]


def section_title(profiles, key: str) -> str:
    return f"Profile: {profiles[0][1]['sections'][key]['title']}"


def distribution_frame(profiles, get, names: dict[str, str]) -> pd.DataFrame:
    """Decade shares of latency histograms: one row per run, histogram and decade.
    `get(section_dict)` gives {key: stats}; `names` the label of each key drawn."""
    rows = []
    for rd, s in profiles:
        for key, stats in (get(s) or {}).items():
            if key not in names or not stats or not stats["count"]:
                continue
            rows += [
                {
                    "run": rd.short,
                    "what": names[key],
                    "decade": label,
                    "share": stats["distribution"].get(label, 0.0),
                    "count": stats["count"],
                }
                for label in DECADE_LABELS
            ]
    return pd.DataFrame(rows)


def distribution_chart(df: pd.DataFrame, panels: list[str], order: list[str]) -> alt.TopLevelMixin:
    """Share of values per decade, the runs side by side, one panel per histogram."""
    return (
        alt.Chart(df)
        .mark_bar()
        .encode(
            alt.X("decade:O", sort=DECADE_LABELS, title=None, axis=alt.Axis(labelAngle=0)),
            alt.Y("share:Q", axis=alt.Axis(format="%"), title="share of values"),
            run_colour(order),
            alt.XOffset("run:N", scale=alt.Scale(domain=order)),
            tooltip=["run", "what", "decade", alt.Tooltip("share:Q", format=".2%"), "count"],
        )
        .properties(width=440, height=170)
        .facet(facet=alt.Facet("what:N", sort=panels, title=None), columns=2)
    )
