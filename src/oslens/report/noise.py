"""The `noise` section: per-CPU detours, their causes, and the tail at scale."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..analysis.noise import TOLD_BELOW, CpuNoise, NoiseSummary
from ..format import chance, duration, ns, pct


def render(console: Console, phase: str, s: NoiseSummary, tail: dict) -> None:
    t = Table(title=f"[bold]OS noise per CPU[/] ({phase})", title_justify="left")
    for col in ("cpu", "runtime", "detours", "per s", "noise", "CPU lost", "p50", "p99", "p99.9", "max", "steal"):
        t.add_column(col, justify="right")
    for c in s.cpus:
        t.add_row(
            str(c.cpu),
            ns(c.runtime_ns),
            f"{c.count:,}",
            f"{c.rate_per_s:,.0f}",
            ns(c.total_ns),
            f"{c.lost_share:.3%}",
            ns(c.percentiles_ns["p50"]),
            ns(c.percentiles_ns["p99"]),
            ns(c.percentiles_ns["p99.9"]),
            ns(c.max_ns),
            steal_cell(c),
        )
    console.print(t)
    c0 = s.cpus[0] if s.cpus else None
    if c0:
        console.print(
            Text(
                f"  loop {c0.loop_ns:.1f} ns per iteration; a gap over {ns(c0.threshold_ns)} counts as a "
                f"detour; {steal_legend(s)}",
                style="dim",
            )
        )
    for c in s.cpus:
        if c.ftq:
            f = c.ftq
            console.print(
                Text(
                    f"  FTQ cpu {c.cpu}: {f['quanta']:,} quanta of {ns(f['quantum_ns'])}; work per quantum "
                    f"median {f['median']:,.0f}, min {f['min']:,.0f}, undisturbed (p99) {f['full']:,.0f}; "
                    f"work lost {f['work_lost']:.2%}",
                    style="dim",
                )
            )
        if c.steal_ns:
            console.print(
                Text(
                    f"  cpu {c.cpu}: the hypervisor ran something else for {steal_cell(c)} (steal): "
                    "detours it caused are its own as far as the trace placed the steal, else unexplained",
                    style="dim",
                )
            )
        if c.steal_exceeds_noise:
            console.print(
                Text(
                    f"  note: cpu {c.cpu}: steal ({steal_cell(c)}) exceeds all detours measured "
                    f"({ns(c.total_ns)}): a vCPU not running is a gap the probe sees, so one of the two is wrong",
                    style="yellow",
                )
            )
    overflow = [c for c in s.cpus if c.kept < c.count]
    if overflow:
        console.print(
            Text(
                f"  note: more detours than kept on CPU {','.join(str(c.cpu) for c in overflow)}: "
                "percentiles and causes come from the kept ones, totals count all (raise --opt max_detours)",
                style="yellow",
            )
        )
    if s.master_shared:
        console.print(
            Text(
                "  note: every CPU was probed, so the engine's own master ran on probed CPUs; its "
                "wake-ups are counted (as oslens-engine); leave one CPU unprobed to avoid that",
                style="yellow",
            )
        )
    if s.attribution != "bpf":
        console.print(Text(f"  causes: {s.attribution}", style="yellow"))
    else:
        ct = Table(
            title="[bold]causes[/] (each instant of a detour charged to the innermost event)", title_justify="left"
        )
        for col in ("cause", "detours", "time", "max", "share"):
            ct.add_column(col, justify="right" if col != "cause" else "left")
        for cause, row in list(s.causes.items())[:20]:
            ct.add_row(cause, f"{row['count']:,}", ns(row["total_ns"]), ns(row["max_ns"]), pct(row["share"]))
        console.print(ct)
        if s.lost_events:
            console.print(
                Text(
                    f"  note: {s.lost_events} kernel events were lost (ring buffer full): "
                    "some detours may show as unexplained",
                    style="yellow",
                )
            )
    _tail(console, tail)


def steal_cell(c: CpuNoise) -> str:
    """Steal with its resolution next to it: /proc/stat counts ticks."""
    if c.steal_ns is None:
        return "–"
    return f"{ns(c.steal_ns)} ±{ns(c.steal_resolution_ns)}" if c.steal_resolution_ns else ns(c.steal_ns)


def steal_legend(s: NoiseSummary) -> str:
    if s.steal_note:
        return s.steal_note
    c = next((c for c in s.cpus if c.steal_window_ns), None)
    if c is None:
        return "steal not read"
    return (
        f"steal = time the hypervisor ran something else, from /proc/stat over the detours' window "
        f"({ns(c.steal_window_ns)}, warm-up excluded); tick-sampled: ± one tick per repetition "
        f"(±{ns(c.steal_resolution_ns)} here)"
    )


def tail_cell(row: dict, label: str) -> str:
    lo, hi = row["p_bounds"][label]
    if not row["told"][label]:
        return f"cannot tell [{chance(lo)}–{chance(hi)}]"
    return f"{chance(row['p_delayed'][label])} [{chance(lo)}–{chance(hi)}]"


def tail_legend(tail: dict) -> str:
    return (
        f"  [a–b]: exact (Clopper-Pearson) {tail['confidence']:.0%} interval from the {tail['windows']:,} windows "
        "(taken as independent), carried to N nodes; cannot tell: the interval spans more than "
        f"{tail['cannot_tell_width']:.0%} of [0, 1]; to tell: measuring that long (--duration × --reps, same "
        f"CPUs and step) bounds a never-seen delay under {TOLD_BELOW:.0%} and tells every figure of the row; "
        "the expected slowdown assumes no step worse than the worst seen, told under the same rule"
    )


def _tail(console: Console, tail: dict) -> None:
    if not tail.get("windows"):
        console.print(Text(f"  tail at scale: {tail.get('note', 'not computed')}", style="dim"))
        return
    nodes = tail["nodes"]
    first = next(iter(nodes.values()))
    t = Table(
        title=f"[bold]tail at scale[/]: a synchronised step of {ns(tail['step_ns'])} on N nodes "
        f"(from {tail['windows']:,} measured windows; nodes assumed independent)",
        title_justify="left",
    )
    t.add_column("nodes", justify="right")
    for label in first["p_delayed"]:
        t.add_column(f"P(delay {label.replace('us', ' µs')})", justify="right")
    t.add_column("expected slowdown", justify="right")
    t.add_column("to tell", justify="right")
    for n, row in nodes.items():
        untold = not (all(row["told"].values()) and row["slowdown_told"])
        t.add_row(
            f"{int(n):,}",
            *[tail_cell(row, label) for label in row["p_delayed"]],
            f"{row['expected_slowdown']:.3f}×" if row["slowdown_told"] else "cannot tell",
            f"measure ≥ {duration(row['measure_s'])}" if untold else "",
        )
    console.print(t)
    console.print(Text(tail_legend(tail), style="dim"))


def show(console: Console, run, summary) -> None:
    for phase, s in summary.phases.items():
        render(console, phase, s, summary.tails[phase])
