"""`cluster bsp`: compute, then a collective, on every rank — the measured
bulk-synchronous slowdown against the tail-at-scale prediction from the
same run's per-rank noise, with who made each step late and why; and the
rows per rank of `cluster noise`, made of the loop's own detours.

The prediction (tail at scale) assumes what the model assumes: each rank's
delay in a step is an independent draw from that rank's own distribution
of delays per step (its detours in each step of this run), so a step lasts
the undisturbed work, plus the collective's own cost, plus the largest
draw. It is drawn by Monte Carlo, with a bootstrap interval over the steps.
Where measured and predicted differ, the model's assumptions are what to
question first: delays correlated across ranks (one hypervisor, one timer
tick), or a collective whose cost grows with the delay."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from ..analysis import noise as noise_analysis
from ..analysis.metrics import LOWER
from ..format import ns as fmt_ns
from ..records import Bsp, bsp_of, bsps
from . import RankTable
from . import noise as noise_measure

DRAWS = 20_000
BOOTSTRAP = 200
CONFIDENCE = 0.95
CDF_POINTS = 101  # quantiles kept of the measured and predicted slowdowns (0, 1 %, … 100 %)
FRAMES = ("ranks", "steps")
COLUMNS = {
    "steps": {
        "rank": ("int64", "MPI rank"),
        "step": ("int64", "step number"),
        "work_ns": ("int64", "the step's work, ns (longer than undisturbed by the detours in it)"),
        "wait_ns": ("int64", "its wait in the collective, ns"),
        "last": ("bool", "this rank arrived last at the collective"),
    },
}


def summarize(s, ranks: dict[int, list[dict]], records: list[dict]) -> None:
    loops = {rank: b for rank, recs in ranks.items() if (b := bsp_of(recs)) is not None}
    rows = [noise_measure.rank_row(rank, ranks[rank], b) for rank, b in loops.items()]
    noise_measure.rank_rows(s, rows, len(ranks))
    if loops:
        s.data = slowdown(loops, ranks)


def _step_delays(b: Bsp, detours: list) -> np.ndarray:
    """Detour time in each step of a rank, by where each detour ended."""
    starts = b.start_ns + np.array(b.step_start_ns, dtype=np.int64)
    out = np.zeros(len(starts))
    for d in detours:
        end = d.start_ns + d.duration_ns
        i = int(np.searchsorted(starts, end, side="right")) - 1
        if 0 <= i < len(out):
            out[i] += d.duration_ns
    return out


def _stats(x: np.ndarray) -> dict:
    return {
        "mean": float(np.mean(x)),
        "median": float(np.median(x)),
        "p99": float(np.quantile(x, 0.99, method="inverted_cdf")),
        "max": float(np.max(x)),
    }


def slowdown(recs: dict[int, Bsp], ranks: dict[int, list[dict]], seed: int = 1) -> dict:
    order = sorted(recs)
    k = min(len(recs[r].work_ns) for r in order)
    if k == 0:
        return {"steps": 0}
    work = np.array([recs[r].work_ns[:k] for r in order], dtype=float)
    wait = np.array([recs[r].wait_ns[:k] for r in order], dtype=float)
    keep = np.ones(k, dtype=bool)  # steps after bookkeeping are left out
    for r in order:
        for i in recs[r].synced:
            if i < k:
                keep[i] = False
    # Detours per rank and step, with causes where attributed (its trace's kernel events).
    detours, delay = {}, []
    for r in order:
        s = noise_analysis.summarize([recs[r].as_detours(), *ranks[r]])
        detours[r] = s
        delay.append(_step_delays(recs[r], s.detours)[:k])
    delay = np.array(delay)
    undisturbed = float(max(np.median(w[keep] - d[keep]) for w, d in zip(work, delay)))
    iteration = np.median(work + wait, axis=0)[keep]
    # The last to arrive waits only for the collective itself, so it is the
    # rank with the shortest wait: told without comparing clocks across
    # nodes, and without the skew with which the previous step released the
    # ranks (the longest work is not always the latest arrival).
    last = np.argmin(wait, axis=0)
    cost = float(np.median(wait.min(axis=0)[keep]))
    measured = iteration / undisturbed

    rng = np.random.default_rng(seed)
    d_keep = delay[:, keep]

    def predict(d: np.ndarray) -> np.ndarray:
        draws = np.stack([rng.choice(row, DRAWS) for row in d])
        return (undisturbed + cost + draws.max(axis=0)) / undisturbed

    predicted = predict(d_keep)
    boot = []
    for _ in range(BOOTSTRAP):
        idx = rng.integers(0, d_keep.shape[1], d_keep.shape[1])
        boot.append(float(np.mean(predict(d_keep[:, idx]))))
    lo, hi = np.quantile(boot, [(1 - CONFIDENCE) / 2, (1 + CONFIDENCE) / 2])

    # Who made the steps late, and with what.
    lasts = last[keep]
    hit = d_keep.max(axis=0) > 0.1 * undisturbed  # steps some rank lost ≥ 10 % of a step in
    late = []
    for pos, r in enumerate(order):
        mine = lasts == pos
        causes: dict[str, float] = defaultdict(float)
        steps = set(np.flatnonzero(keep)[mine].tolist())
        starts = recs[r].start_ns + np.array(recs[r].step_start_ns[:k], dtype=np.int64)
        # untraced (--no-bpf, or tracing unavailable), a detour has no
        # causes: it is not one the trace could not explain
        traced = detours[r].attribution == "bpf"
        for d in detours[r].detours if traced else ():
            i = int(np.searchsorted(starts, d.start_ns + d.duration_ns, side="right")) - 1
            if i in steps:
                for c, ns in (d.causes or {noise_analysis.UNEXPLAINED: d.duration_ns}).items():
                    causes[c] += ns
        total = sum(causes.values())
        hit_here = hit & (d_keep.argmax(axis=0) == pos)
        late.append(
            {
                "rank": r,
                "host": recs[r].host,
                "last_share": float(np.mean(mine)),
                "steps_hit": int(hit_here.sum()),
                "last_when_hit": float(np.mean(mine[hit_here])) if hit_here.any() else None,
                "causes": sorted(((c, ns / total) for c, ns in causes.items()), key=lambda x: -x[1])[:3]
                if total
                else [],
                "attribution": detours[r].attribution,
            }
        )
    mean_pred = float(np.mean(predicted))
    q = np.linspace(0, 1, CDF_POINTS)
    return {
        "steps": int(keep.sum()),
        "steps_left_out": int((~keep).sum()),
        "compute_us": recs[order[0]].compute_us,
        "collective": recs[order[0]].collective,
        "undisturbed_ns": undisturbed,
        "collective_ns": cost,
        "measured": _stats(measured),
        "predicted": {**_stats(predicted), "mean_interval": [float(lo), float(hi)]},
        "error": mean_pred / float(np.mean(measured)) - 1,
        "late": late,
        # the two distributions at CDF_POINTS quantiles each: what a plot of them needs, not every step
        "quantiles": {
            "q": q.tolist(),
            "measured": np.quantile(measured, q, method="inverted_cdf").tolist(),
            "predicted": np.quantile(predicted, q, method="inverted_cdf").tolist(),
        },
        "model": "independent per-rank delays per step (this run's detours), Monte Carlo, bootstrap interval",
    }


def _measured(s) -> dict | None:
    return s.data if s.data and s.data.get("steps") else None


def tables(s, every: bool = True) -> list[RankTable]:
    out = noise_measure.tables(s, every)
    if b := _measured(s):
        m, p = b["measured"], b["predicted"]
        lo, hi = p["mean_interval"]
        rows = [
            ["measured", *(f"{m[k]:.3f}" for k in ("mean", "median", "p99", "max"))],
            ["predicted", f"{p['mean']:.3f} [{lo:.3f}–{hi:.3f}]", *(f"{p[k]:.3f}" for k in ("median", "p99", "max"))],
        ]
        title = f"bulk-synchronous steps: {b['compute_us']} µs of work, then {b['collective']}, × {b['steps']}"
        caption = (
            f"undisturbed step {fmt_ns(b['undisturbed_ns'])}, the collective's own cost {fmt_ns(b['collective_ns'])};"
            f" prediction off by {b['error']:+.1%} (mean); {b['steps_left_out']} steps after bookkeeping left out;"
            f" model: {b['model']}"
        )
        cols = ["slowdown", "mean", "median", "p99", "max"]
        out.append(RankTable(title, cols, rows, caption, left={"slowdown"}, judged=False))
    return out


def lines(s) -> list[str]:
    """The noise rows' sentences, then who arrived last how often, and what delayed it then."""
    out = noise_measure.lines(s)
    b = _measured(s)
    for r in sorted(b["late"] if b else [], key=lambda r: -r["last_share"]):
        causes = ", ".join(f"{c} {x:.0%}" for c, x in r["causes"])
        if r["attribution"] != "bpf":
            causes = f"not traced ({r['attribution']})"
        hit = (
            f"; last in {r['last_when_hit']:.0%} of the {r['steps_hit']} steps its detours hit"
            if r["last_when_hit"] is not None
            else ""
        )
        what = f"; what delayed it then: {causes}" if causes else ""
        out.append(f"rank {r['rank']} ({r['host']}) arrived last in {r['last_share']:.0%} of the steps{hit}{what}")
    return out


def frame_rows(s, records: list[dict]) -> dict[str, list[dict]]:
    loops = bsps(records)
    steps = []
    if loops:
        k = min(len(b.work_ns) for b in loops.values())
        # the last to arrive waits least (as the analysis tells it)
        last = [min(loops, key=lambda r: loops[r].wait_ns[i]) for i in range(k)]
        for rank, b in sorted(loops.items()):
            steps += [{"rank": rank, "step": i, "work_ns": b.work_ns[i], "wait_ns": b.wait_ns[i],
                       "last": last[i] == rank} for i in range(k)]  # fmt: skip
    return {**noise_measure.frame_rows(s, records), "steps": steps}


def figures(rd, s, frames: dict) -> list:
    """The noise share per rank; the step slowdowns, measured and predicted,
    as distributions (a step is as slow as its latest rank); and which rank
    arrived last how often, beside the steps a large delay hit it in."""
    import altair as alt
    import pandas as pd

    from ..report.html.page import Figure

    out = noise_measure.figures(rd, s, frames)
    b = _measured(s)
    if b and (qs := b.get("quantiles")):  # a run stored before they were kept has none
        rows = [{"slowdown": v, "quantile": q, "line": line}
                for line in ("measured", "predicted") for q, v in zip(qs["q"], qs[line])]  # fmt: skip
        chart = (
            alt.Chart(pd.DataFrame(rows))
            .mark_line(interpolate="step-after")
            .encode(
                alt.X("slowdown:Q", title="step time over the undisturbed step", scale=alt.Scale(zero=False)),
                alt.Y("quantile:Q", title="share of steps at most this slow", axis=alt.Axis(format="%")),
                alt.Color("line:N", title=None, legend=alt.Legend(orient="bottom")),
                tooltip=["line:N", alt.Tooltip("quantile:Q", format=".0%"), alt.Tooltip("slowdown:Q", format=".3f")],
            )
            .properties(width=420, height=240)
        )
        out.append(
            Figure(
                f"cluster-slowdown-{rd.run.id}",
                f"{rd.short}: slowdown per step, measured and predicted",
                chart,
                f"predicted: {b['model']}; measured over {b['steps']:,} steps",
            )
        )
    if b and (late := b.get("late")):
        rows = [{"rank": r["rank"], "host": r["host"], "last": r["last_share"], "hit": r["steps_hit"],
                 "top cause": r["causes"][0][0] if r["causes"] else "–"} for r in late]  # fmt: skip
        share = alt.Y("last:Q", title="steps it arrived last in", axis=alt.Axis(format="%"),
                      scale=alt.Scale(domain=[0, 1]))  # fmt: skip
        tips = ["rank:O", "host:N", alt.Tooltip("last:Q", format=".1%"),
                alt.Tooltip("hit:Q", title="steps a large delay hit it in"), "top cause:N"]  # fmt: skip
        chart = (
            alt.Chart(pd.DataFrame(rows))
            .mark_bar()
            .encode(alt.X("rank:O", title="rank"), share, tooltip=tips)
            .properties(width=420, height=200)
        )
        out.append(
            Figure(
                f"cluster-arrival-{rd.run.id}",
                f"{rd.short}: arrival order at the {b['collective']}",
                chart,
                "the last to arrive waits least in the collective: told without comparing clocks across nodes",
            )
        )
    return out


def metrics(s, out) -> None:
    noise_measure.metrics(s, out)
    if b := _measured(s):
        out.add("cluster/bsp/slowdown mean", [b["measured"]["mean"]], "×", LOWER, "", "measured BSP slowdown")
