"""The `timerlat` section: per-CPU wake-up latencies (thread and IRQ) and
what held the worst wake-ups back."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..analysis.histogram import TAIL_RULE
from ..analysis.timerlat import IRQ_AT_CALLBACK, IRQ_AT_ENTRY, TimerlatSummary
from ..cpulist import format_cpulist
from ..format import ns, share

LEGEND = (
    "thread: from the timer's expiry to the thread reading the clock on waking (cyclictest's measure); "
    "IRQ: from the expiry to the timer's callback (rtla timerlat's IRQ latency), for the wake-ups the kernel "
    f"trace saw fire; – : {TAIL_RULE}"
)
CAUSES_SHOWN = 4  # per wake-up in the terminal; the rest summed
COLUMNS = ("cpu", "policy", "wake-ups", "missed", "thread p50", "p99", "p99.9", "max", "IRQ p50", "p99", "max")


def cpu_row(c) -> list[str]:
    """A CPU's figures, in COLUMNS' order: the terminal and the HTML show the same."""
    return [
        str(c.cpu),
        f"FIFO {c.prio}" if c.policy == "fifo" else "OTHER",
        f"{c.wakeups:,}",
        f"{c.missed:,}",
        *(ns(c.thread[q]) for q in ("p50", "p99", "p99.9")),
        ns(c.thread_max_ns),
        ns(c.irq["p50"]),
        ns(c.irq["p99"]),
        ns(c.irq_max_ns),
    ]


def notes(s: TimerlatSummary) -> list[tuple[str, bool]]:
    """What a reader must know beside the numbers, as (text, warning):
    the terminal and the HTML report say the same."""
    out: list[tuple[str, bool]] = []

    def cpus(cs) -> str:
        cs = [c.cpu for c in cs]
        return f"CPU{'s' if len(cs) > 1 else ''} {format_cpulist(cs)}"

    c0 = s.cpus[0] if s.cpus else None
    if c0 and c0.dma_latency_us is not None:
        out.append((f"idle states limited to {c0.dma_latency_us} µs exit latency (/dev/cpu_dma_latency)", False))
    elif c0:
        why = f"; the limit asked was not held: {c0.dma_latency_why}" if c0.dma_latency_why else ""
        out.append(
            (
                "idle states as they were (cyclictest holds /dev/cpu_dma_latency at 0 unless --laptop: "
                f"--dma-latency 0 does the same){why}",
                bool(why),
            )
        )
    for why in sorted({c.why_other for c in s.cpus if c.why_other}):
        out.append((f"{cpus(c for c in s.cpus if c.why_other == why)}: {why}", True))
    short = [c for c in s.cpus if c.kept < c.wakeups]
    if short:
        out.append(
            (
                f"{cpus(short)}: not every wake-up was kept ({sum(c.kept for c in short):,} of "
                f"{sum(c.wakeups for c in short):,}): IRQ latency and causes come from the kept ones, the thread "
                "latency from all",
                True,
            )
        )
    if s.attribution == "bpf":
        if s.irq_ends == IRQ_AT_ENTRY:
            out.append((f"IRQ latency ends at {s.irq_ends}", True))
        unseen = [c for c in s.cpus if c.wakeups and not c.irq_seen]
        if unseen and s.irq_ends == IRQ_AT_ENTRY:
            out.append(
                (
                    f"{cpus(unseen)}: no timer interrupt recognised among the kernel's events "
                    "(x86's local_timer vector, or an IRQ named timer, arch_timer or riscv-timer): no IRQ latency",
                    True,
                )
            )
        elif unseen:
            out.append((f"{cpus(unseen)}: the trace saw none of the threads' timers fire: no IRQ latency", True))
        gaps = [c for c in s.cpus if c.irq_seen and c.irq_seen < c.kept]
        if gaps and s.irq_ends == IRQ_AT_CALLBACK:
            missing = sum(c.kept - c.irq_seen for c in gaps)
            out.append(
                (
                    f"{cpus(gaps)}: {missing:,} kept wake-up(s) whose timer the kernel trace did not see fire, "
                    "though it saw the others': the trace has gaps there (no event of any kind"
                    + ("" if s.lost_events else ", none counted lost")
                    + "); their IRQ latency and causes are not told",
                    True,
                )
            )
    else:
        out.append((f"IRQ latency and causes: {s.attribution}", True))
    if s.steal_ns:
        out.append(
            (
                f"the hypervisor ran something else for {ns(s.steal_ns, 2)} ±{ns(s.steal_resolution_ns, 2)} on "
                "these CPUs while measuring (steal, /proc/stat, tick-sampled): a wake-up late for it shows as a "
                "task with interrupts off, or unexplained",
                True,
            )
        )
    if s.lost_events:
        out.append((f"{s.lost_events:,} kernel events were lost (ring buffer full): some causes may be missing", True))
    if s.master_shared:
        out.append(
            (
                "every CPU was measured, so the engine's own master ran on measured CPUs; leave one CPU out to "
                "keep it off them",
                True,
            )
        )
    return out


def causes_text(causes: dict[str, float], shown: int = CAUSES_SHOWN) -> str:
    parts = sorted(causes.items(), key=lambda kv: -kv[1])
    text = "; ".join(f"{cause} {ns(v)}" for cause, v in parts[:shown])
    rest = parts[shown:]
    return text + (f"; +{len(rest)} more ({ns(sum(v for _, v in rest))})" if rest else "")


def render(console: Console, phase: str, s: TimerlatSummary) -> None:
    t = Table(
        title=f"[bold]timer wake-up latency per CPU[/] ({phase}; a timer every {ns(s.period_ns)})",
        title_justify="left",
    )
    for col in COLUMNS:
        t.add_column(col, justify="right")
    for c in s.cpus:
        t.add_row(*cpu_row(c))
    console.print(t)
    console.print(Text(f"  {LEGEND}", style="dim"))
    for text, warning in notes(s):
        console.print(Text(f"  {'note: ' if warning else ''}{text}", style="yellow" if warning else "dim"))
    if s.attribution != "bpf":
        return
    w = Table(
        title="[bold]the worst wake-ups[/] (each instant charged to the innermost event on the CPU then)",
        title_justify="left",
    )
    for col in ("cpu", "thread", "IRQ", "what held it back"):
        w.add_column(col, justify="right" if col != "what held it back" else "left")
    for x in s.worst:
        w.add_row(str(x.cpu), ns(x.thread_ns), ns(x.irq_ns), causes_text(x.causes))
    console.print(w)
    if s.causes:
        console.print(
            Text(
                "  over the worst wake-ups: "
                + "; ".join(f"{cause} {share(row['share'], 2)}" for cause, row in list(s.causes.items())[:5]),
                style="dim",
            )
        )


def show(console: Console, run, summary) -> None:
    for phase, s in summary.phases.items():
        render(console, phase, s)
