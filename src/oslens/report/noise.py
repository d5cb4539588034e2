"""The `noise` section: per-CPU detours, their causes, and the tail at scale."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..analysis.noise import NoiseSummary
from ..format import ns, pct


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
            ns(c.steal_ns) if c.steal_ns is not None else "–",
        )
    console.print(t)
    c0 = s.cpus[0] if s.cpus else None
    if c0:
        console.print(
            Text(
                f"  loop {c0.loop_ns:.1f} ns per iteration; a gap over {ns(c0.threshold_ns)} counts as a "
                "detour; steal = time the hypervisor ran something else (/proc/stat, 10 ms resolution)",
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
                    f"  cpu {c.cpu}: the hypervisor ran something else for {ns(c.steal_ns)} (steal): "
                    "detours it caused show as unexplained",
                    style="dim",
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
    for n, row in nodes.items():
        t.add_row(f"{int(n):,}", *[pct(v) for v in row["p_delayed"].values()], f"{row['expected_slowdown']:.3f}×")
    console.print(t)


def show(console: Console, run, summary) -> None:
    for phase, s in summary.phases.items():
        render(console, phase, s, summary.tails[phase])
