"""`oslens latency`: what does each operation cost, and how variable is it?"""

from __future__ import annotations

import click

from ..cpulist import format_cpulist
from . import Context, environment_option, measure, measuring_options


@click.command("latency")
@click.option(
    "--probe",
    "probe",
    metavar="P[:VARIANT][,…]",
    help="Operations to time (default: the whole catalogue; see 'oslens probes').",
)
@click.option(
    "--workers",
    default="1",
    show_default=True,
    metavar="N|max",
    help="Workers timing the same operation at once, each on its own CPU.",
)
@click.option("--mode", type=click.Choice(["process", "thread"]), default="process", show_default=True)
@click.option("--placement", type=click.Choice(["compact", "spread"]), default="compact", show_default=True)
@click.option("--duration", type=float, metavar="S", help="Seconds per operation and repetition (default 0.3).")
@click.option("--ops", type=int, metavar="N", help="Operations per worker instead of a duration.")
@click.option("--reps", type=int, default=3, show_default=True, help="Repetitions.")
@click.option("--warmup", type=float, default=0.1, show_default=True, metavar="S", help="Untimed warm-up seconds.")
@click.option("--mix", is_flag=True, help="Every worker runs the whole catalogue, one operation after another.")
@click.option(
    "--compete",
    metavar="P[:VARIANT][:CPUS]",
    help="Also measure with this probe running on other CPUs (default: every CPU left free).",
)
@measuring_options
@environment_option("latency")
def command(ctx: Context, **kw):
    """What does each operation cost, and how variable is it?"""
    from ..plan.latency import plan as latency_plan

    plan = latency_plan(**kw)
    measure(
        ctx,
        "latency",
        plan,
        f"{len(plan.points)} measurements × {plan.reps} repetitions on CPUs {format_cpulist(plan.params['cpus'])}",
    )
