"""The `appscale` section: one row per CPU count, then the fits."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ..format import pct, seconds, si


def _interval(iv: dict) -> str:
    if iv["n"] < 2:
        return seconds(iv["median"])
    return f"{seconds(iv['median'])} [{seconds(iv['low'])}–{seconds(iv['high'])}]"


def _s(x: float | None) -> str:
    return "–" if x is None else f"{x:.3g}"


def render(console: Console, what: str, s: dict) -> None:
    rows = s["rows"]
    if not rows:
        console.print("nothing measured")
        return
    coverage = min((r["wall_s"]["coverage"] for r in rows if r["ok"]), default=0)
    t = Table(title=f"[bold]{escape(what)}[/] — wall time, speedup and where the CPU time went", title_justify="left")
    for col in (
        "CPUs",
        f"wall [{coverage:.0%} CI]",
        f"speedup vs {s['base_n']}",
        "efficiency",
        "user s",
        "sys s",
        "sys share",
        "irq+softirq s",
        "ctx switches",
        "page faults",
        "note",
    ):
        t.add_column(col, justify="left" if col == "note" else "right", no_wrap=col.startswith("wall"))
    notes: list[str] = []
    for r in rows:
        marks = []
        for w in r.get("warnings", []) + [_failure(f) for f in r["failures"]]:
            if w not in notes:
                notes.append(w)
            marks.append(str(notes.index(w) + 1))
        mark = Text(",".join(marks), style="yellow")
        if not r["ok"]:
            t.add_row(str(r["n"]), Text("failed", style="red"), *["–"] * 8, mark)
            continue
        t.add_row(
            str(r["n"]),
            _interval(r["wall_s"]),
            f"{r['speedup']:.2f}×",
            pct(r["efficiency"]),
            _s(r["user_s"]),
            _s(r["system_s"]),
            pct(r["system_share"]),
            _s(r["irq_softirq_s"]),
            si(r["context_switches"]),
            si(r["page_faults"]),
            mark,
        )
    console.print(t)
    for i, n in enumerate(notes, 1):
        console.print(Text(f"  {i}. {n}", style="yellow"))
    first = rows[0]
    console.print(
        Text(
            f"  confined by {first['confinement']}; CPU time from {first['cpu_source']}; "
            "irq+softirq = interrupt time on those CPUs (/proc/stat, whoever was interrupted)",
            style="dim",
        )
    )
    for line in fit_lines(s["fits"]):
        console.print(Text(f"  {line}", style="dim"))


def _failure(f: dict) -> str:
    if f["signal"] is not None:
        end = f"killed by signal {f['signal']}"
    elif f["how"] == "time_limit":
        end = "stopped at the time limit"
    else:
        end = f"exited with status {f['code']}"
    tail = " ".join(f.get("output_tail", "").split())[-160:]
    return f"rep {f['rep'] + 1} {end}: not timed" + (f" (output ends: {tail})" if tail else "")


def fit_lines(fits: dict) -> list[str]:
    lines = []
    a = fits.get("amdahl", {})
    if a.get("fitted"):
        top = f", at most {a['max_speedup']:.3g}× with unlimited CPUs (extrapolated)" if a.get("max_speedup") else ""
        se = f" ± {a['serial_fraction_se']:.2g}" if a.get("serial_fraction_se") is not None else ""
        lines.append(f"Amdahl: serial fraction {a['serial_fraction']:.3g}{se}{top}")
    else:
        lines.append(f"Amdahl: not fitted, {a.get('why', 'no data')}")
    u = fits.get("usl", {})
    if u.get("fitted"):

        def se(k):
            return f" ± {u[k + '_se']:.2g}" if u.get(k + "_se") is not None else ""

        peak = ""
        if u.get("peak_n"):
            where = " (extrapolated beyond the CPUs measured)" if u.get("peak_is_extrapolated") else ""
            peak = f"; speedup peaks at {u['peak_speedup']:.3g}× near {u['peak_n']:.0f} CPUs{where}"
        lines.append(
            f"USL: contention σ = {u['sigma']:.3g}{se('sigma')}, coherency κ = {u['kappa']:.3g}{se('kappa')}, "
            f"R² = {u['r2']:.3f}"
            if u.get("r2") is not None
            else f"USL: contention σ = {u['sigma']:.3g}, coherency κ = {u['kappa']:.3g}"
        )
        lines[-1] += peak
        preds = ", ".join(f"{p['n']} CPUs {p['speedup']:.3g}×" for p in u.get("predicted", []))
        if preds:
            lines.append(f"USL predicts (extrapolated): {preds}")
    else:
        lines.append(f"USL: not fitted, {u.get('why', 'no data')}")
    return lines


def show(console: Console, run, summary: dict) -> None:
    p = run.params
    render(console, f"workload {p['workload']}" if p.get("workload") else " ".join(p.get("command") or []), summary)
