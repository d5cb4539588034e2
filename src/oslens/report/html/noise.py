"""`noise` runs: every detour on a per-CPU timeline (when, how long, what
caused it), where the lost time went by cause, what that noise does to a
synchronised step across many nodes (the tail at scale), and the per-CPU
numbers. A run measured alone and with competition has a series for each
phase; several runs overlay as further series."""

from __future__ import annotations

from dataclasses import dataclass

import altair as alt
import numpy as np
import pandas as pd

from ...analysis.noise import TOLD_BELOW, NoiseSummary, summarize_phases, tail_at_scale
from ...format import chance, duration, ns
from ..noise import steal_cell, steal_legend
from .page import Figure, Note, Section, Table

TITLE = "OS noise (noise)"
MAX_POINTS = 5000  # detours drawn per series: the longest, the ones that matter for the tail
TOP_CAUSES = 9  # named colours on the timeline; the rest are "other causes"
BAR_CAUSES = 15  # causes in the bar chart
TABLE_CAUSES = 15  # causes listed per series in the table
NODES = np.unique(np.geomspace(1, 1e5, 31).round().astype(int)).tolist()
DELAYS_NS = (1e4, 1e5, 1e6)
OTHER = "other causes"
NOT_ATTRIBUTED = "not attributed"
# tableau10 without its grey, which marks the causes not named (and detours
# no cause could be given for): one distinct colour per named cause.
PALETTE = ["#4c78a8", "#f58518", "#e45756", "#72b7b2", "#54a24b", "#eeca3b", "#b279a2", "#ff9da6", "#9d755d"]

# Vega expression: durations in ns with the unit that suits them.
NS_LABEL = (
    "datum.value >= 1e9 ? format(datum.value / 1e9, '~g') + ' s' : "
    "datum.value >= 1e6 ? format(datum.value / 1e6, '~g') + ' ms' : "
    "datum.value >= 1e3 ? format(datum.value / 1e3, '~g') + ' µs' : format(datum.value, '~g') + ' ns'"
)


@dataclass
class Series:
    """One phase of one run: what the figures overlay."""

    label: str
    summary: NoiseSummary
    step_ns: float

    @property
    def runtime_ns(self) -> float:
        return sum(c.runtime_ns for c in self.summary.cpus)


def _series(runs) -> list[Series]:
    out = []
    for rd in runs:
        phases = summarize_phases(rd.records)
        step = rd.run.params.get("step_ns") or 1e6
        for phase, s in phases.items():
            # A phase name alone would repeat across runs; a run alone across phases.
            label = f"{rd.short} · {phase}" if len(runs) > 1 or len(phases) > 1 else rd.short
            out.append(Series(label, s, step))
    return out


def _ticks(lo: float, hi: float, steps=(1,)) -> list[float]:
    """Log-axis ticks at these multiples of each power of ten: left to
    itself, a log axis labels 2, 3, … 9 times each decade, and they collide."""
    a, b = int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi)))
    return [m * 10.0**k for k in range(a, b + 1) for m in steps if lo <= m * 10.0**k <= hi]


def _series_colour(series: list[Series]) -> alt.Color:
    """The same colour for a series in every figure, whichever series a
    figure leaves out (a run without attribution has no causes)."""
    return alt.Color(
        "series:N",
        title=None,
        scale=alt.Scale(domain=[s.label for s in series], range=PALETTE),
        legend=alt.Legend(orient="bottom", labelLimit=420),
    )


def _top_causes(series: list[Series]) -> list[str]:
    """Causes by the share of CPU time they took, largest first, over every
    series, so a cause keeps its colour and its place across runs."""
    share: dict[str, float] = {}
    for s in series:
        for cause, row in s.summary.causes.items():
            if s.runtime_ns:
                share[cause] = max(share.get(cause, 0.0), row["total_ns"] / s.runtime_ns)
    return sorted(share, key=share.get, reverse=True)


def _timeline(series: list[Series], top: list[str]) -> Figure | None:
    rows, capped = [], []
    named = set(top[:TOP_CAUSES])
    for s in series:
        sm = s.summary
        if not sm.detours or not sm.windows:
            continue
        t0 = min(w[1] for w in sm.windows)
        detours = sm.detours
        if len(detours) > MAX_POINTS:
            capped.append(f"{s.label}: {MAX_POINTS:,} of {len(detours):,}")
            detours = sorted(detours, key=lambda d: d.duration_ns, reverse=True)[:MAX_POINTS]
        for d in detours:
            if sm.attribution != "bpf":
                cause = NOT_ATTRIBUTED
            else:
                cause = d.cause if d.cause in named else OTHER
            parts = sorted(d.causes.items(), key=lambda kv: -kv[1])[:3]
            rows.append(
                {
                    "series": s.label,
                    "cpu": d.cpu,
                    "panel": f"{s.label} · CPU {d.cpu}",
                    "t_s": round((d.start_ns - t0) / 1e9, 6),
                    "duration_ns": int(d.duration_ns),
                    "cause": cause,
                    "detail": "; ".join(f"{c} {ns(v)}" for c, v in parts) or NOT_ATTRIBUTED,
                }
            )
    if not rows:
        return None
    df = pd.DataFrame(rows)
    named_here = [c for c in top[:TOP_CAUSES] if c in set(df.cause)]
    greys = [(c, g) for c, g in ((OTHER, "#bab0ac"), (NOT_ATTRIBUTED, "#79706e")) if c in set(df.cause)]
    domain = named_here + [c for c, _ in greys]
    colours = PALETTE[: len(named_here)] + [g for _, g in greys]
    # One full-width panel per series and CPU, stacked, a CPU's series next
    # to each other: a grid of series × CPUs would leave empty cells where
    # runs probed different CPUs, and squeeze the time axis as runs are added.
    present = set(df.panel)
    panels = [p for cpu in sorted(df.cpu.unique()) for s in series if (p := f"{s.label} · CPU {cpu}") in present]
    lo, hi = df.duration_ns.min(), df.duration_ns.max()
    chart = (
        alt.Chart(df)
        .mark_circle(size=14, opacity=0.6)
        .encode(
            alt.X("t_s:Q", title="time since the series' first measurement began (s)"),
            alt.Y(
                "duration_ns:Q",
                title="detour",
                scale=alt.Scale(type="log", domain=[lo, hi]),
                axis=alt.Axis(values=_ticks(lo, hi), labelExpr=NS_LABEL),
            ),
            alt.Color(
                "cause:N",
                title="cause (longest part)",
                scale=alt.Scale(domain=domain, range=colours),
                legend=alt.Legend(orient="bottom", columns=2, labelLimit=420),
            ),
            tooltip=[
                "series:N",
                "cpu:O",
                alt.Tooltip("t_s:Q", title="at s", format=".6f"),
                alt.Tooltip("duration_ns:Q", title="duration ns", format=",d"),
                alt.Tooltip("detail:N", title="causes"),
            ],
        )
        .properties(width=1000, height=110 if len(panels) <= 8 else 70)
        .facet(
            alt.Facet(
                "panel:N",
                sort=panels,
                title=None,
                header=alt.Header(labelAnchor="start", labelFontWeight="bold", labelFontSize=11),
            ),
            columns=1,
            spacing=8,
        )
    )
    caption = (
        "each point is one detour: the probe loop stopped for this long at this time; colour: the cause "
        "that took the largest part of it"
    )
    if capped:
        caption += (
            f". Only the {MAX_POINTS:,} longest detours of each series are drawn ("
            + "; ".join(capped)
            + "); the tables and the other figures use every detour"
        )
    return Figure("noise-timeline", "every detour, per CPU", chart, caption)


def _causes(series: list[Series], top: list[str]) -> list:
    attributed = [s for s in series if s.summary.attribution == "bpf" and s.runtime_ns]
    blocks = [
        Note(f"{s.label}: causes unknown: {s.summary.attribution}", warning=True)
        for s in series
        if s.summary.attribution != "bpf"
    ]
    if not attributed:
        return blocks
    shown = top[:BAR_CAUSES]
    bars, rows = [], []
    for s in attributed:
        other = 0.0
        for i, (cause, r) in enumerate(s.summary.causes.items()):
            if cause in shown:
                bars.append(
                    {
                        "series": s.label,
                        "cause": cause,
                        "share": r["total_ns"] / s.runtime_ns,
                        "time": ns(r["total_ns"]),
                        "detours": r["count"],
                    }
                )
            else:
                other += r["total_ns"]
            if i < TABLE_CAUSES:
                rows.append(
                    [
                        s.label,
                        cause,
                        f"{r['count']:,}",
                        ns(r["total_ns"]),
                        ns(r["max_ns"]),
                        f"{r['share']:.2%}",
                        f"{r['total_ns'] / s.runtime_ns:.3%}",
                    ]
                )
        if other:
            bars.append(
                {"series": s.label, "cause": OTHER, "share": other / s.runtime_ns, "time": ns(other), "detours": None}
            )
        if s.summary.lost_events:
            blocks.append(
                Note(
                    f"{s.label}: {s.summary.lost_events:,} kernel events were lost (ring buffer "
                    "full): some detours may show as unexplained",
                    warning=True,
                )
            )
    table = Table(
        "causes",
        ["series", "cause", "detours", "time", "max", "share of noise", "share of CPU time"],
        rows,
        f"at most {TABLE_CAUSES} causes per series; a detour with several causes counts once for each",
    )
    if not bars:
        return [table, *blocks]
    order = [c for c in shown if any(b["cause"] == c for b in bars)] + [OTHER]
    labels = [s.label for s in attributed]
    chart = (
        alt.Chart(pd.DataFrame(bars))
        .mark_bar()
        .encode(
            alt.X("share:Q", title="share of the measured CPU time", axis=alt.Axis(format="%")),
            alt.Y("cause:N", title=None, sort=order, axis=alt.Axis(labelLimit=320)),
            alt.YOffset("series:N", sort=labels),
            _series_colour(series),
            tooltip=["series:N", "cause:N", alt.Tooltip("share:Q", format=".3%"), "time:N", "detours:Q"],
        )
        .properties(width=560, height=alt.Step(max(6, 16 // len(labels))))
    )
    return [
        Figure(
            "noise-causes",
            "where the lost time went, by cause",
            chart,
            f"the {len(order) - 1} causes that took most time, each instant of a detour charged to the "
            "innermost kernel event active then; instants no event covers are the hypervisor's as far as "
            "the vCPU's steal clock rose around them, else unexplained (hardware, hypervisor or SMI)",
        ),
        table,
        *blocks,
    ]


def _tail(series: list[Series]) -> list:
    rows, slow, notes = [], [], []
    for s in series:
        t = tail_at_scale(s.summary, s.step_ns, NODES, DELAYS_NS)
        if not t.get("windows"):
            notes.append(Note(f"{s.label}: tail at scale: {t.get('note', 'not computed')}", warning=True))
            continue
        untold = []
        for x, label in zip(DELAYS_NS, t["events"]):
            for n, r in t["nodes"].items():
                p, (lo, hi), told = r["p_delayed"][label], r["p_bounds"][label], r["told"][label]
                # A told chance is a point on the curve (zero: none on a log
                # axis); every chance has its interval drawn as a band.
                rows.append(
                    {
                        "series": s.label,
                        "nodes": int(n),
                        "delay": f"> {ns(x)}",
                        "p": p if told and p > 0 else None,
                        "lo": lo,
                        "hi": hi,
                        "figure": f"{chance(p)} [{chance(lo)}–{chance(hi)}]" if told else "cannot tell",
                    }
                )
            first = next((int(n) for n, r in t["nodes"].items() if not r["told"][label]), None)
            if first is not None:
                measure = duration(t["nodes"][str(first)]["measure_s"])
                untold.append(f"delay > {ns(x)} from {first:,} nodes (measure ≥ {measure} to tell it there)")
        for n, r in t["nodes"].items():
            if r["slowdown_told"]:
                slow.append({"series": s.label, "nodes": int(n), "slowdown": r["expected_slowdown"]})
        first = next((int(n) for n, r in t["nodes"].items() if not r["slowdown_told"]), None)
        if first is not None:
            measure = duration(t["nodes"][str(first)]["measure_s"])
            untold.append(
                f"step worse than the worst seen (the expected slowdown assumes none) from {first:,} nodes "
                f"(measure ≥ {measure} to tell it there)"
            )
        notes.append(Note(f"{s.label}: a step of {ns(s.step_ns)}, from {t['windows']:,} measured windows"))
        if untold:
            notes.append(Note(f"{s.label}: cannot tell the chance of a " + "; of a ".join(untold), warning=True))
        notes.append(
            Note(
                f"{s.label}: each chance's band is its exact (Clopper-Pearson) {t['confidence']:.0%} interval "
                f"from the {t['windows']:,} windows (taken as independent), carried to N nodes; a chance cannot "
                f"be told where that spans more than {t['cannot_tell_width']:.0%} of [0, 1]; to tell it, measure "
                f"until a delay never seen would be bounded under {TOLD_BELOW:.0%} on those nodes"
            )
        )
    if not slow:
        return notes
    colour = _series_colour(series)
    x = alt.X(
        "nodes:Q",
        title="nodes",
        # the nodes carried to, not the data's extent: a layer with no point
        # (nothing told) has none, and Vega warns of an infinite one
        scale=alt.Scale(type="log", domain=[NODES[0], NODES[-1]]),
        axis=alt.Axis(values=_ticks(NODES[0], NODES[-1]), format="~s"),
    )
    p = pd.DataFrame(rows, columns=["series", "nodes", "delay", "p", "lo", "hi", "figure"])
    panels = []
    for x_ns in DELAYS_NS:
        label = f"> {ns(x_ns)}"
        d = p[(p.delay == label) & (p.hi > 0)].copy()
        if d.empty:
            continue
        bottom = max(1e-6, 10.0 ** np.floor(np.log10(np.nanmin([*d.p.dropna(), *d.hi]))))
        d["lo"] = d.lo.clip(lower=bottom)  # a zero lower bound sits on the axis
        scale = alt.Scale(type="log", domain=[bottom, 1], clamp=True)
        axis = alt.Axis(values=_ticks(bottom, 1), format="~%")
        y = alt.Y("p:Q", title="P(step delayed)", scale=scale, axis=axis)
        tooltip = ["series:N", "nodes:Q", "delay:N", "figure:N"]
        band = (
            alt.Chart(d)
            .mark_area(opacity=0.15)
            .encode(
                x,
                alt.Y("lo:Q", scale=scale, title="P(step delayed)", axis=axis),
                alt.Y2("hi:Q"),
                colour,
                tooltip=tooltip,
            )
        )
        told = d[d.p.notna()]
        # the band's y channel names its scale; with no point told there is no line layer
        layers = band
        if not told.empty:
            layers += alt.Chart(told).mark_line(point=alt.OverlayMarkDef(size=12)).encode(x, y, colour, tooltip=tooltip)
        panels.append(layers.properties(title=f"delayed by {label}", width=200, height=200))
    slow = pd.DataFrame(slow, columns=["series", "nodes", "slowdown"])
    # no slowdown that can be told (every figure "cannot tell"): no panel, whose
    # empty axes would have an infinite extent
    top = max(2.0, float(slow.slowdown.max())) if not slow.empty else 2.0
    if not slow.empty:
        panels.append(
            alt.Chart(slow)
            .mark_line(point=alt.OverlayMarkDef(size=12))
            .encode(
                x,
                alt.Y(
                    "slowdown:Q",
                    title="expected step time / step",
                    scale=alt.Scale(type="log", domain=[1, top]),
                    axis=alt.Axis(values=_ticks(1, top, (1, 2, 5)), format="~g"),
                ),
                colour,
                tooltip=["series:N", "nodes:Q", alt.Tooltip("slowdown:Q", format=".3f")],
            )
            .properties(title="expected slowdown", width=200, height=200)
        )
    caption = (
        "a bulk-synchronous step waits for its slowest node: the chance that at least one of N nodes is "
        "delayed by more than X, from the noise measured in each step-long window, nodes assumed "
        "independent (1 − (1 − p)ᴺ), the band its exact 95 % interval from the number of windows; and "
        "the expected time of a step over its length. Zero chances, the chances that cannot be told "
        "(interval over half of [0, 1]) and the slowdowns that cannot be told are not drawn as points"
    )
    return [
        Figure("noise-tail-at-scale", "tail at scale: a synchronised step on N nodes", alt.hconcat(*panels), caption),
        *notes,
    ]


def _per_cpu(series: list[Series]) -> list:
    rows, notes = [], []
    for s in series:
        sm = s.summary
        for c in sm.cpus:
            rows.append(
                [
                    s.label,
                    c.cpu,
                    ns(c.runtime_ns),
                    f"{c.count:,}",
                    f"{c.rate_per_s:,.0f}",
                    ns(c.total_ns),
                    f"{c.lost_share:.3%}",
                    ns(c.percentiles_ns["p50"]),
                    ns(c.percentiles_ns["p99"]),
                    ns(c.percentiles_ns["p99.9"]),
                    ns(c.max_ns),
                    steal_cell(c) if c.steal_ns is not None else None,
                ]
            )
        if sm.cpus:
            c0 = sm.cpus[0]
            notes.append(
                Note(
                    f"{s.label}: the probe loop takes {c0.loop_ns:.1f} ns per iteration; a gap over "
                    f"{ns(c0.threshold_ns)} counts as a detour; {steal_legend(sm)}"
                )
            )
        for c in sm.cpus:
            if c.ftq:
                f = c.ftq
                notes.append(
                    Note(
                        f"{s.label}, FTQ CPU {c.cpu}: {f['quanta']:,} quanta of {ns(f['quantum_ns'])}; "
                        f"work per quantum median {f['median']:,.0f}, min {f['min']:,.0f}, undisturbed "
                        f"(p99) {f['full']:,.0f}; work lost {f['work_lost']:.2%}"
                    )
                )
        stolen = [c for c in sm.cpus if c.steal_ns]
        if stolen:
            notes.append(
                Note(
                    f"{s.label}: the hypervisor ran something else on CPU "
                    f"{','.join(str(c.cpu) for c in stolen)} (steal): detours it caused are its own as far "
                    "as the trace placed the steal, else unexplained",
                    warning=True,
                )
            )
        for c in sm.cpus:
            if c.steal_exceeds_noise:
                notes.append(
                    Note(
                        f"{s.label}: CPU {c.cpu}: steal ({steal_cell(c)}) exceeds all detours measured "
                        f"({ns(c.total_ns)}): a vCPU not running is a gap the probe sees, so one of the two "
                        "is wrong",
                        warning=True,
                    )
                )
        overflow = [c for c in sm.cpus if c.kept < c.count]
        if overflow:
            notes.append(
                Note(
                    f"{s.label}: more detours than kept on CPU {','.join(str(c.cpu) for c in overflow)}: "
                    "percentiles, causes and the timeline come from the kept ones, totals count all "
                    "(raise --opt max_detours)",
                    warning=True,
                )
            )
        if sm.master_shared:
            notes.append(
                Note(
                    f"{s.label}: every CPU was probed, so the engine's own master ran on probed CPUs; "
                    "its wake-ups are counted (as oslens-engine); leave one CPU unprobed to avoid that",
                    warning=True,
                )
            )
    table = Table(
        "per CPU",
        ["series", "CPU", "runtime", "detours", "per s", "noise", "CPU lost", "p50", "p99", "p99.9", "max", "steal"],
        rows,
        "CPU lost: the detours' time over the runtime; steal: time the hypervisor ran something else, "
        "from /proc/stat over the detours' window (warm-up excluded), tick-sampled: ± one tick "
        "(1/USER_HZ) per repetition",
    )
    return [table, *notes]


def sections(runs) -> list[Section]:
    series = _series(runs)
    if not any(s.summary.cpus for s in series):
        return [Section(TITLE, [Note("no complete measurement in these runs", warning=True)])]
    top = _top_causes(series)
    timeline = _timeline(series, top)
    blocks = [timeline] if timeline else []
    blocks += _per_cpu(series)
    blocks += _causes(series, top)
    blocks += _tail(series)
    return [Section(TITLE, blocks)]
