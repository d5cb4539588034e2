"""The `appscale` section: one row per CPU count, then the fits."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ..format import pct, plural, seconds, si, sig
from .usl import usl_line


def _interval(iv: dict) -> str:
    """The median wall time with its own interval, confidence and repetitions."""
    if iv["n"] < 2:
        return f"{seconds(iv['median'])} [1 rep, no interval]"
    return f"{seconds(iv['median'])} [{seconds(iv['low'])}–{seconds(iv['high'])}, {iv['coverage']:.0%}, {iv['n']} reps]"


def _s(x: float | None) -> str:  # None: not measured (the notes say why)
    return sig(x)


def render(console: Console, what: str, s: dict) -> None:
    rows = s["rows"]
    if not rows:
        console.print("nothing measured")
        return
    t = Table(title=f"[bold]{escape(what)}[/] — wall time, speedup and where the CPU time went", title_justify="left")
    for col in (
        "CPUs",
        "wall",
        # against the smallest count measured; none measured (every repetition failed): no base to name
        f"speedup vs {s['base_n']}" if s.get("base_n") is not None else "speedup",
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
    first = next((r for r in rows if r.get("confinement")), None)
    if first is not None:  # none: no repetition ran confined (each one's --prepare failed)
        console.print(
            Text(
                f"  confined by {first['confinement']}; CPU time from {first['cpu_source']}; "
                + (
                    f"irq+softirq {first['irq_unavailable']}"
                    if first.get("irq_unavailable")
                    else "irq+softirq = interrupt time on those CPUs (/proc/stat, whoever was interrupted)"
                ),
                style="dim",
            )
        )
    if not any(r["ok"] for r in rows):
        console.print(Text("  every repetition failed (the notes say how): no speedup, nothing to fit", style="red"))
        return
    for line in fit_lines(s["fits"], [r["n"] for r in rows if r["ok"]]):
        console.print(Text(f"  {line}", style="dim"))


def _failure(f: dict) -> str:
    if f["signal"] is not None:
        end = f"killed by signal {f['signal']}"
    elif f["how"] == "time_limit":
        end = "stopped at the time limit"
    elif f["how"] == "prepare":
        how = f"exited with status {f['code']}" if f["code"] is not None else f"was killed by signal {f['signal']}"
        return f"rep {f['rep'] + 1}: its --prepare command {how}: not run" + _tail(f)
    else:
        end = f"exited with status {f['code']}"
    return f"rep {f['rep'] + 1} {end}: not timed" + _tail(f)


def _tail(f: dict) -> str:
    tail = " ".join(f.get("output_tail", "").split())[-160:]
    return f" (output ends: {tail})" if tail else ""


def fit_lines(fits: dict, measured: list[int]) -> list[str]:
    """The Amdahl and USL fits in words; `measured`: the CPU counts measured."""
    lines = []
    a = fits.get("amdahl", {})
    if a.get("fitted"):
        top = f", at most {sig(a['max_speedup'])}× with unlimited CPUs (extrapolated)" if a.get("max_speedup") else ""
        se = f" ± {sig(a['serial_fraction_se'], 2)}" if a.get("serial_fraction_se") is not None else ""
        lines.append(f"Amdahl: serial fraction {sig(a['serial_fraction'])}{se}{top}")
    else:
        lines.append(f"Amdahl: not fitted, {a.get('why', 'no data')}")
    u = fits.get("usl", {})
    peak = f"speedup {sig(u['peak_speedup'])}×" if u.get("peak_speedup") is not None else ""
    lines.append(usl_line(u, measured, "CPUs", peak))
    preds = ", ".join(f"{plural(p['n'], 'CPU')} {sig(p['speedup'])}×" for p in u.get("predicted", []))
    if u.get("fitted") and preds:
        lines.append(f"USL predicts (extrapolated): {preds}")
    return lines


def show(console: Console, run, summary: dict) -> None:
    from ..analysis.appscale import per_app

    p = run.params
    single = f"workload {p['workload']}" if p.get("workload") else " ".join(p.get("command") or [])
    for app, s in per_app(summary):
        render(console, app or single, s)
    if summary.get("study"):
        from . import verdicts

        verdicts.show(console, run, summary["study"])
