"""The terminal tables of a `cluster` run: a row per rank, the outliers and
what differs between their nodes, and for `cluster bsp` the measured
slowdown beside the predicted one, and who made the steps late."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..format import ns as fmt_ns


def _pct(x: float) -> str:
    return "-" if x != x else f"{100 * x:.3g} %"


def rows_lines(s) -> list[str]:
    """One sentence per outlier rank: what it lost, and to what."""
    out = []
    for r in s.ranks:
        if r.outlier:
            cause = f", mostly to {r.causes[0][0]} ({r.causes[0][1]:.0%})" if r.causes else ""
            out.append(f"rank {r.rank} on {r.host} is an outlier: {_pct(r.share)} of its CPU time lost{cause}")
    return out


def show(console: Console, run, summary) -> None:
    s = summary
    t = Table(title=f"cluster {s.measure}: {len(s.ranks)} ranks on {s.hosts} host(s)", box=None)
    for col in ("rank", "host", "CPUs", "noise share", "detours/s", "p99", "max", "top causes", ""):
        t.add_column(col, justify="right" if col in ("rank", "noise share", "detours/s", "p99", "max") else "left")
    for r in s.ranks:
        causes = ", ".join(f"{c} {x:.0%}" for c, x in r.causes) or (
            "" if r.attribution == "bpf" else f"unattributed: {r.attribution}"
        )
        t.add_row(
            *(
                Text(x)
                for x in (
                    str(r.rank),
                    r.host,
                    ",".join(map(str, r.cpus)),
                    _pct(r.share),
                    f"{r.rate_per_s:.0f}",
                    fmt_ns(r.p99_ns),
                    fmt_ns(r.max_ns),
                    causes,
                    "outlier" if r.outlier else "",
                )
            )
        )
    console.print(t)
    console.print(f"outlier: {s.rule}", style="dim", highlight=False, markup=False)
    for line in rows_lines(s):
        console.print(line, highlight=False, markup=False)
    if s.node_diff:
        console.print("what differs between the nodes:", highlight=False)
        for fact, hosts in s.node_diff.items():
            console.print(
                f"  {fact}: " + "; ".join(f"{h}: {v}" for h, v in hosts.items()), highlight=False, markup=False
            )
    elif s.hosts > 1:
        console.print("the nodes' kernel, command line, THP, clock source, governors and IRQ placement are the same")
    for n in s.notes:
        console.print(n, style="yellow", highlight=False, markup=False)
    if s.bsp and s.bsp.get("steps"):
        show_bsp(console, s.bsp)


def show_bsp(console: Console, b: dict) -> None:
    m, p = b["measured"], b["predicted"]
    lo, hi = p["mean_interval"]
    t = Table(
        title=f"bulk-synchronous steps: {b['compute_us']} µs of work, then {b['collective']}, × {b['steps']}",
        box=None,
    )
    for col in ("slowdown", "mean", "median", "p99", "max"):
        t.add_column(col, justify="left" if col == "slowdown" else "right")
    t.add_row("measured", *(f"{m[k]:.3f}" for k in ("mean", "median", "p99", "max")))
    t.add_row("predicted", f"{p['mean']:.3f} [{lo:.3f}–{hi:.3f}]", *(f"{p[k]:.3f}" for k in ("median", "p99", "max")))
    console.print(t)
    console.print(
        f"undisturbed step {fmt_ns(b['undisturbed_ns'])}, the collective's own cost {fmt_ns(b['collective_ns'])}; "
        f"prediction off by {b['error']:+.1%} (mean); {b['steps_left_out']} steps after bookkeeping left out",
        highlight=False,
        markup=False,
    )
    console.print(f"model: {b['model']}", style="dim", highlight=False, markup=False)
    for r in sorted(b["late"], key=lambda r: -r["last_share"]):
        causes = ", ".join(f"{c} {x:.0%}" for c, x in r["causes"])
        hit = (
            f"; last in {r['last_when_hit']:.0%} of the {r['steps_hit']} steps its detours hit"
            if r["last_when_hit"] is not None
            else ""
        )
        console.print(
            f"rank {r['rank']} ({r['host']}) arrived last in {r['last_share']:.0%} of the steps{hit}"
            + (f"; what delayed it then: {causes}" if causes else ""),
            highlight=False,
            markup=False,
        )
