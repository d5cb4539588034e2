"""The terminal tables of a `cluster` run: a row per rank, the outliers and
what differs between their nodes, and for `cluster bsp` the measured
slowdown beside the predicted one, and who made the steps late."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..format import ns as fmt_ns
from ..format import share, si

# Beyond this many ranks, the terminal shows the outlier ranks and the spread
# across ranks, not a row per rank (`export` and `show --json` have them all).
MAX_ROWS = 32


def _distinct(r) -> str:
    """What a rank has that the others do not, or, untraced, that nothing says."""
    if r.attribution != "bpf":
        return f"; its detours' causes were not traced ({r.attribution})"
    if not r.distinct:
        return "; no cause took it more than the other ranks"
    return "; what it has that the other ranks do not: " + ", ".join(
        f"{c} {share(lost)} of its CPU time ({n} detours, at most {m} on another rank)" for c, n, m, lost in r.distinct
    )


def rows_lines(s) -> list[str]:
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


def latency_rows(op: dict, every: bool = True) -> tuple[list[str], list[list[str]]]:
    """One operation of `cluster latency`: its percentiles on each rank (or,
    with every=False and many ranks, on the outliers), then across ranks."""
    cols = ["rank", "host", "workers", "timed", "p50", "p99", "p99.9", "max", ""]
    ranks = op["ranks"] if every or len(op["ranks"]) <= MAX_ROWS else [r for r in op["ranks"] if r["outlier"]]
    rows = [
        [
            str(r["rank"]),
            r["host"],
            str(r["workers"]),
            str(r["count"]),
            *(fmt_ns(r[f"{q}_ns"]) if r["count"] else "-" for q in ("p50", "p99", "p99.9", "max")),
            "outlier" if r["outlier"] else "",
        ]
        for r in ranks
    ]
    a = op["across"]
    for i, what in enumerate(("min", "median", "max")):
        rows.append(
            [
                f"{what} of ranks",
                "",
                "",
                "",
                *(fmt_ns(a[f"{q}_ns"][i]) if a.get(f"{q}_ns") else "-" for q in ("p50", "p99", "p99.9")),
                "",
                "",
            ]
        )
    return cols, rows


def scale_rows(c: dict, every: bool = True) -> tuple[list[str], list[list[str]]]:
    """One probe of `cluster scale`: ops/s and efficiency at each worker count
    per rank, and the whole job's ops/s (its ranks ran at once)."""
    counts = c["workers"]
    cols = ["rank", "host", *(f"{n} workers" for n in counts), ""]
    ranks = c["ranks"] if every or len(c["ranks"]) <= MAX_ROWS else [r for r in c["ranks"] if r["outlier"]]
    rows = []
    for r in ranks:
        cells = []
        for n in counts:
            i = r["workers"].index(n)
            eff = r["efficiency"][i]
            cells.append(si(r["ops_per_s"][i]) + ("" if eff is None else f" ({eff:.0%})"))
        rows.append([str(r["rank"]), r["host"], *cells, "outlier" if r["outlier"] else ""])
    rows.append(["job", f"{len(c['ranks'])} ranks", *(si(x) for x in c["job_ops_per_s"]), ""])
    return cols, rows


def timerlat_rows(rows: list[dict], every: bool = True) -> tuple[list[str], list[list[str]]]:
    """`cluster timerlat`: each rank's threads' wake-up latency (every CPU's
    pooled), the worst one's CPU and what held it back; or, with
    every=False and many ranks, the outliers."""
    cols = ["rank", "host", "CPUs", "wake-ups", "missed", "p50", "p99", "p99.9", "max", "worst: CPU, held by", ""]
    shown = rows if every or len(rows) <= MAX_ROWS else [r for r in rows if r["outlier"]]
    out = []
    for r in shown:
        held = r["worst_cause"] or ("" if r["attribution"] == "bpf" else f"not traced ({r['attribution']})")
        worst = f"{r['worst_cpu']}" + (f", {held}" if held else "") if r["worst_cpu"] is not None else "-"
        out.append([str(r["rank"]), r["host"], ",".join(map(str, r["cpus"])), f"{r['wakeups']:,}", f"{r['missed']:,}",
                    *(fmt_ns(r[f"{q}_ns"]) for q in ("p50", "p99", "p99.9", "max")), worst,
                    "outlier" if r["outlier"] else ""])  # fmt: skip
    return cols, out


def _print_table(console: Console, title: str, cols: list[str], rows: list[list[str]]) -> None:
    t = Table(title=title, box=None)
    for i, col in enumerate(cols):
        t.add_column(col, justify="left" if i in (1,) or col == "" else "right")
    for row in rows:
        t.add_row(*(Text(x) for x in row))
    console.print(t)


def outlier_lines(s) -> list[str]:
    """One sentence per outlier rank of `cluster latency` / `cluster scale`."""
    out = []
    for op in s.latency or []:
        for r in op["ranks"]:
            if r["outlier"]:
                out.append(
                    f"{op['operation']}: rank {r['rank']} on {r['host']} is an outlier, "
                    f"p99 {fmt_ns(r['p99_ns'])} above the threshold of {fmt_ns(r['threshold_ns'])}"
                )
    for r in s.timerlat or []:
        if r["outlier"]:
            out.append(
                f"timerlat: rank {r['rank']} on {r['host']} is an outlier, p99 {fmt_ns(r['p99_ns'])} above the "
                f"threshold of {fmt_ns(r['threshold_ns'])}; its worst wake-up {fmt_ns(r['max_ns'])} on CPU "
                f"{r['worst_cpu']}" + (f", held by {r['worst_cause']}" if r["worst_cause"] else "")
            )
    for c in s.scale or []:
        for r in c["ranks"]:
            if r["outlier"]:
                out.append(
                    f"{c['probe']}: rank {r['rank']} on {r['host']} scales worse than the others, "
                    f"{si(r['per_worker'][-1])} ops/s per worker at {r['workers'][-1]} workers, "
                    f"below the threshold of {si(r['threshold'])}"
                )
    return out


def _show_findings(console: Console, s, outliers: list[str]) -> None:
    """Under the tables: the outlier rule, a sentence per outlier, what differs between the nodes, notes."""
    console.print(f"outlier: {s.rule}", style="dim", highlight=False, markup=False)
    for line in outliers:
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


def show(console: Console, run, summary) -> None:
    s = summary
    if s.latency is not None or s.scale is not None or s.timerlat is not None:
        if s.timerlat is not None:
            _print_table(console, "cluster timerlat: thread latency per rank", *timerlat_rows(s.timerlat, every=False))
        for op in s.latency or []:
            _print_table(console, f"cluster latency: {op['operation']}", *latency_rows(op, every=False))
        for c in s.scale or []:
            _print_table(
                console, f"cluster scale: {c['probe']} ({c['mode']}), ops/s (efficiency)", *scale_rows(c, every=False)
            )
        _show_findings(console, s, outlier_lines(s))
        return
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
                    share(r.share),
                    f"{r.rate_per_s:.0f}",
                    fmt_ns(r.p99_ns),
                    fmt_ns(r.max_ns),
                    causes,
                    "outlier" if r.outlier else "",
                )
            )
        )
    console.print(t)
    _show_findings(console, s, rows_lines(s))
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
        if r["attribution"] != "bpf":
            causes = f"not traced ({r['attribution']})"
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
