"""The `timerlat` section: per-CPU wake-up latencies (thread and IRQ) and
what held the worst wake-ups back."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..analysis.histogram import TAIL_RULE
from ..analysis.timerlat import TimerlatSummary
from ..format import ns, pct


def render(console: Console, phase: str, s: TimerlatSummary) -> None:
    t = Table(
        title=f"[bold]timer wake-up latency per CPU[/] ({phase}; a timer every {ns(s.period_ns)})",
        title_justify="left",
    )
    for col in ("cpu", "policy", "wake-ups", "missed", "thread p50", "p99", "p99.9", "max", "IRQ p50", "p99", "max"):
        t.add_column(col, justify="right")
    for c in s.cpus:
        t.add_row(
            str(c.cpu),
            f"FIFO {c.prio}" if c.policy == "fifo" else "OTHER",
            f"{c.wakeups:,}",
            f"{c.missed:,}",
            ns(c.thread["p50"]),
            ns(c.thread["p99"]),
            ns(c.thread["p99.9"]),
            ns(c.thread_max_ns),
            ns(c.irq["p50"]),
            ns(c.irq["p99"]),
            ns(c.irq_max_ns),
        )
    console.print(t)
    console.print(
        Text(
            "  thread: from the timer's expiry to the thread reading the clock on waking (cyclictest's measure); "
            "IRQ: from the expiry to the entry of the timer interrupt that ran it (rtla's IRQ latency), for the "
            f"wake-ups whose interrupt the kernel trace saw; – : {TAIL_RULE}",
            style="dim",
        )
    )
    c0 = s.cpus[0] if s.cpus else None
    if c0 and c0.dma_latency_us is not None:
        console.print(
            Text(f"  idle states: limited to {c0.dma_latency_us} µs exit latency (/dev/cpu_dma_latency)", style="dim")
        )
    elif c0:
        console.print(
            Text(
                "  idle states: as they were (cyclictest holds /dev/cpu_dma_latency at 0 unless --laptop: "
                "--dma-latency 0 does the same)" + (f"; {c0.dma_latency_why}" if c0.dma_latency_why else ""),
                style="yellow" if c0.dma_latency_why else "dim",
            )
        )
    for c in s.cpus:
        if c.why_other:
            console.print(Text(f"  note: cpu {c.cpu}: {c.why_other}", style="yellow"))
        if c.kept < c.wakeups:
            console.print(
                Text(
                    f"  note: cpu {c.cpu}: {c.kept:,} of {c.wakeups:,} wake-ups kept: IRQ latency and causes come "
                    "from the kept ones, the thread latency from all",
                    style="yellow",
                )
            )
    if s.steal_ns:
        console.print(
            Text(
                f"  the hypervisor ran something else for {ns(s.steal_ns)} on these CPUs during the measurement "
                "(steal, /proc/stat, tick-sampled): a wake-up late for it shows as a task with interrupts off, or "
                "unexplained",
                style="yellow",
            )
        )
    if s.master_shared:
        console.print(
            Text(
                "  note: every CPU was measured, so the engine's own master ran on measured CPUs; "
                "leave one CPU out to keep it off them",
                style="yellow",
            )
        )
    if s.attribution != "bpf":
        console.print(Text(f"  IRQ latency and causes: {s.attribution}", style="yellow"))
        return
    w = Table(
        title="[bold]the worst wake-ups[/] (each instant charged to the innermost event on the CPU then)",
        title_justify="left",
    )
    for col in ("cpu", "thread", "IRQ", "what held it back"):
        w.add_column(col, justify="right" if col != "what held it back" else "left")
    for x in s.worst:
        parts = sorted(x.causes.items(), key=lambda kv: -kv[1])
        w.add_row(
            str(x.cpu),
            ns(x.thread_ns),
            ns(x.irq_ns),
            "; ".join(f"{cause} {ns(v)}" for cause, v in parts[:4]),
        )
    console.print(w)
    if s.causes:
        console.print(
            Text(
                "  over the worst wake-ups: "
                + "; ".join(f"{cause} {pct(row['share'])}" for cause, row in list(s.causes.items())[:5]),
                style="dim",
            )
        )
    if s.lost_events:
        console.print(
            Text(
                f"  note: {s.lost_events} kernel events were lost (ring buffer full): some causes may be missing",
                style="yellow",
            )
        )


def show(console: Console, run, summary) -> None:
    for phase, s in summary.phases.items():
        render(console, phase, s)
