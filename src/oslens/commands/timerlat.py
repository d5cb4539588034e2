"""`oslens timerlat`: how late does a real-time thread wake from a periodic timer, and why?"""

from __future__ import annotations

import click

from ..cpulist import format_cpulist
from ..format import seconds
from . import Context, environment_option, measure, measuring_options


@click.command("timerlat")
@click.option(
    "--cpus", metavar="LIST", help="CPUs to measure, a thread each, e.g. 0-3,8 (default: every available CPU)."
)
@click.option("--duration", type=float, default=5.0, show_default=True, metavar="S", help="Seconds per repetition.")
@click.option(
    "--period-us",
    type=int,
    default=1000,
    show_default=True,
    metavar="US",
    help="The timer's period (rtla's and cyclictest's default).",
)
@click.option(
    "--prio",
    type=int,
    default=95,
    show_default=True,
    metavar="N",
    help="SCHED_FIFO priority of each thread, as rtla timerlat's (0: SCHED_OTHER). "
    "Without the right to it, the record says so.",
)
@click.option(
    "--dma-latency",
    "dma_latency_us",
    type=int,
    metavar="US",
    help="Hold /dev/cpu_dma_latency at US while measuring, keeping CPUs out of idle states slower to leave "
    "(rtla's --dma-latency; cyclictest holds 0 unless --laptop). Default: idle states as they are.",
)
@click.option("--reps", type=int, default=1, show_default=True)
@click.option("--warmup", type=float, default=0.2, show_default=True, metavar="S")
@click.option("--compete", metavar="P[:VARIANT][:CPUS]", help="Also measure with this probe running on other CPUs.")
@click.option(
    "--no-bpf", "no_bpf", is_flag=True, help="Do not trace the kernel: latencies without IRQ latency or causes."
)
@measuring_options
@environment_option("timerlat")
def command(ctx: Context, no_bpf: bool, **kw):
    """How late does a real-time thread wake from a periodic timer, and why?"""
    from ..plan.timerlat import plan as timerlat_plan

    plan = timerlat_plan(attribution=not no_bpf, **kw)
    p = plan.params
    measure(
        ctx,
        "timerlat",
        plan,
        f"CPUs {format_cpulist(p['cpus'])}, every {p['period_us']} µs at "
        f"{'SCHED_FIFO ' + str(p['prio']) if p['prio'] else 'SCHED_OTHER'}, {seconds(p['duration_s'])} × {plan.reps}",
    )
