"""`cluster noise`: the detours on every CPU of every rank at once, a row
per rank (its host, CPUs, noise share, detour rate, longest detour, top
causes) and the noisy ranks by the outlier rule on their noise share,
each with its distinct causes: those that took it clearly more time than
they took any other rank (a thread on its CPU alone), not its largest
ones, which every rank may share. `cluster bsp` makes the same rows of its
loop's detours (cluster_measures/bsp.py)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from ..analysis import noise as noise_analysis
from ..analysis.cluster import outliers, rule, thresholds, too_few
from ..analysis.metrics import LOWER
from ..format import ns as fmt_ns
from ..format import share
from ..records import Bsp, rank_host, rank_info
from . import RankTable

DISTINCT = 2.0  # a distinct cause took a rank more than this many times what it took any other
FRAMES = ("ranks",)
COLUMNS = {
    "ranks": {
        "rank": ("int64", "MPI rank"),
        "host": ("str", "its host"),
        "cpus": ("str", "the CPUs it measured"),
        "lost_share": ("float64", "share of CPU time lost to detours"),
        "rate_per_s": ("float64", "detours per second"),
        "max_ns": ("float64", "longest detour, ns"),
        "p99_ns": ("float64", "99th percentile detour, ns"),
        "top_cause": ("str", "the cause that took most detour time (empty without attribution)"),
        "outlier": ("bool", "beyond the outlier rule"),
    },
}


@dataclass
class RankRow:
    rank: int
    host: str
    cpus: list[int]
    share: float  # of CPU time lost to detours
    rate_per_s: float
    max_ns: float
    p99_ns: float
    causes: list[tuple[str, float]]  # top causes, share of this rank's detour time
    attribution: str
    outlier: bool = False
    threshold: float | None = None  # the noise share above which it is an outlier (None: too few ranks)
    # causes it has that the others do not: [cause, its detours, most detours on another rank, CPU share lost here]
    distinct: list[list] = field(default_factory=list)
    by_cause: dict[str, tuple[int, float]] = field(default_factory=dict, repr=False)  # cause -> (detours, ns/s)


def rank_row(rank: int, recs: list[dict], bsp: Bsp | None = None) -> RankRow:
    """A rank's row from its records: the detour probe's (noise), or its
    bsp loop's detours taken as the probe's."""
    info = rank_info(recs)
    s = noise_analysis.summarize([bsp.as_detours(), *recs] if bsp else recs)
    runtime = sum(c.runtime_ns for c in s.cpus)
    total = sum(c.total_ns for c in s.cpus)
    count = sum(c.count for c in s.cpus)
    durations = np.array([d.duration_ns for d in s.detours], dtype=float)
    causes: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for d in s.detours:
        for c, ns in d.causes.items():
            causes[c] += ns
            counts[c] += 1
    kept = sum(causes.values())
    top = sorted(((c, ns / kept) for c, ns in causes.items()), key=lambda x: -x[1])[:3] if kept else []
    by_cause = {c: (counts[c], ns / (runtime / 1e9)) for c, ns in causes.items()} if runtime else {}
    return RankRow(
        rank,
        rank_host(recs),
        info.cpus if info else [],
        total / runtime if runtime else float("nan"),
        count / (runtime / 1e9) if runtime else float("nan"),
        max((c.max_ns for c in s.cpus), default=float("nan")),
        float(np.percentile(durations, 99, method="inverted_cdf")) if durations.size else float("nan"),
        top,
        s.attribution,
        by_cause=by_cause,
    )


def distinct_causes(rows: list[RankRow]) -> None:
    """Each rank's causes that took it more than DISTINCT times the time
    they took any other rank, by the time they took it beyond that rank."""
    for r in rows:
        out = []
        for cause, (count, rate) in r.by_cause.items():
            elsewhere = [o.by_cause.get(cause, (0, 0.0)) for o in rows if o is not r]
            most = max((x[1] for x in elsewhere), default=0.0)
            if elsewhere and rate > DISTINCT * most:
                out.append((rate - most, [cause, count, max(x[0] for x in elsewhere), rate / 1e9]))
        r.distinct = [x for _, x in sorted(out, key=lambda x: -x[0])[:3]]


def rank_rows(s, rows: list[RankRow], sent: int) -> None:
    """The rows of the ranks that sent results, judged on their noise share."""
    shares = {r.rank: r.share for r in rows}
    flagged, limits = outliers(shares), thresholds(shares)
    for r in rows:
        r.outlier, r.threshold = r.rank in flagged, limits.get(r.rank)
    distinct_causes(rows)
    s.ranks, s.rule = rows, rule("noise share")
    too_few(s, len(rows))
    if len(rows) < sent:
        s.notes.append(f"{sent - len(rows)} rank(s) sent no results")


def summarize(s, ranks: dict[int, list[dict]], records: list[dict]) -> None:
    rank_rows(s, [rank_row(rank, recs) for rank, recs in ranks.items()], len(ranks))


def _distinct(r: RankRow) -> str:
    """What a rank has that the others do not, or, untraced, that nothing says."""
    if r.attribution != "bpf":
        return f"; its detours' causes were not traced ({r.attribution})"
    if not r.distinct:
        return "; no cause took it more than the other ranks"
    return "; what it has that the other ranks do not: " + ", ".join(
        f"{c} {share(lost)} of its CPU time ({n} detours, at most {m} on another rank)" for c, n, m, lost in r.distinct
    )


def lines(s) -> list[str]:
    """One sentence per outlier rank: what it lost, against which threshold,
    and what it has that the other ranks do not. Too few ranks for a
    verdict (two): what each has that the other has not."""
    out = []
    for r in s.ranks:
        if r.outlier:
            out.append(
                f"rank {r.rank} on {r.host} is an outlier: {share(r.share)} of its CPU time lost, above the "
                f"threshold of {share(r.threshold)}{_distinct(r)}"
            )
        elif r.threshold is None and len(s.ranks) > 1 and (r.distinct or r.attribution != "bpf"):
            out.append(f"rank {r.rank} on {r.host}: {share(r.share)} of its CPU time lost{_distinct(r)}")
    return out


def tables(s, every: bool = True) -> list[RankTable]:
    cols = ["rank", "host", "CPUs", "noise share", "detours/s", "p99", "max", "top causes", ""]
    rows = []
    for r in s.ranks:
        causes = ", ".join(f"{c} {x:.0%}" for c, x in r.causes) or (
            "" if r.attribution == "bpf" else f"unattributed: {r.attribution}"
        )
        rows.append([str(r.rank), r.host, ",".join(map(str, r.cpus)), share(r.share), f"{r.rate_per_s:.0f}",
                     fmt_ns(r.p99_ns), fmt_ns(r.max_ns), causes, "outlier" if r.outlier else ""])  # fmt: skip
    title = f"cluster {s.measure}: {len(s.ranks)} ranks on {s.host_count} host(s)"
    return [RankTable(title, cols, rows, left={"host", "CPUs", "top causes", ""})]


def frame_rows(s, records: list[dict]) -> dict[str, list[dict]]:
    return {
        "ranks": [
            {"rank": r.rank, "host": r.host, "cpus": ",".join(map(str, r.cpus)), "lost_share": r.share,
             "rate_per_s": r.rate_per_s, "max_ns": r.max_ns, "p99_ns": r.p99_ns,
             "top_cause": r.causes[0][0] if r.causes else "", "outlier": r.outlier}
            for r in s.ranks
        ]
    }  # fmt: skip


def figures(rd, s, frames: dict) -> list:
    """Each rank's noise share, the outliers in their colour."""
    import altair as alt

    from ..report.html.cluster import OUTLIER
    from ..report.html.page import Figure

    main = frames["ranks"]
    if main.empty:
        return []
    chart = (
        alt.Chart(main)
        .mark_bar()
        .encode(
            alt.X("rank:O", title="rank"),
            alt.Y("lost_share:Q", title="CPU time lost to detours", axis=alt.Axis(format="%")),
            OUTLIER,
            tooltip=["rank:O", "host:N", "cpus:N", alt.Tooltip("lost_share:Q", format=".3%"), "top_cause:N"],
        )
    )
    return [Figure(f"cluster-noise-{rd.run.id}", f"{rd.short}: noise share per rank", chart.properties(width=420))]


def metrics(s, out) -> None:
    for r in s.ranks:
        out.add(f"cluster/rank {r.rank}/lost share", [r.share], "share", LOWER, "", f"rank {r.rank} ({r.host})")
