"""The HTML section of `cluster` runs: the per-rank table, the outliers and
node differences, and for `cluster bsp` the measured and predicted slowdown."""

from __future__ import annotations

from ...analysis.cluster import analyze
from ...format import ns as fmt_ns
from ..cluster import latency_rows, outlier_lines, rows_lines, scale_rows
from .page import Note, Section, Table


def sections(runs) -> list[Section]:
    blocks = []
    for rd in runs:
        s = analyze(rd.run, rd.records)
        if s.latency is not None or s.scale is not None:
            for op in s.latency or []:
                blocks.append(
                    Table(
                        f"{rd.label}: cluster latency, {op['operation']}",
                        *latency_rows(op),
                        caption=f"outlier: {s.rule}",
                    )
                )
            for c in s.scale or []:
                title = f"{rd.label}: cluster scale, {c['probe']} ({c['mode']}), ops/s (efficiency)"
                blocks.append(Table(title, *scale_rows(c), caption=f"outlier: {s.rule}"))
            blocks += [Note(line, warning=True) for line in outlier_lines(s)]
            for fact, hosts in s.node_diff.items():
                blocks.append(Note(f"{fact} differs: " + "; ".join(f"{h}: {v}" for h, v in hosts.items())))
            continue
        blocks.append(
            Table(
                f"{rd.label}: cluster {s.measure}, {len(s.ranks)} ranks on {s.hosts} host(s)",
                ["rank", "host", "CPUs", "noise share", "detours/s", "p99", "max", "top causes", "outlier"],
                [
                    [
                        r.rank,
                        r.host,
                        ",".join(map(str, r.cpus)),
                        f"{100 * r.share:.3g} %",
                        f"{r.rate_per_s:.0f}",
                        fmt_ns(r.p99_ns),
                        fmt_ns(r.max_ns),
                        ", ".join(f"{c} {x:.0%}" for c, x in r.causes),
                        "outlier" if r.outlier else "",
                    ]
                    for r in s.ranks
                ],
                caption=f"outlier: {s.rule}",
            )
        )
        blocks += [Note(line, warning=True) for line in rows_lines(s)]
        for fact, hosts in s.node_diff.items():
            blocks.append(Note(f"{fact} differs: " + "; ".join(f"{h}: {v}" for h, v in hosts.items())))
        b = s.bsp
        if b and b.get("steps"):
            m, p = b["measured"], b["predicted"]
            lo, hi = p["mean_interval"]
            blocks.append(
                Table(
                    f"{rd.short}: {b['compute_us']} µs of work then {b['collective']}, × {b['steps']} steps",
                    ["slowdown", "mean", "median", "p99", "max"],
                    [
                        ["measured", *(f"{m[k]:.3f}" for k in ("mean", "median", "p99", "max"))],
                        [
                            "predicted",
                            f"{p['mean']:.3f} [{lo:.3f}–{hi:.3f}]",
                            *(f"{p[k]:.3f}" for k in ("median", "p99", "max")),
                        ],
                    ],
                    caption=f"prediction off by {b['error']:+.1%}; model: {b['model']}",
                )
            )
    return [Section("Cluster", blocks)] if blocks else []
