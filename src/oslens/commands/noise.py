"""`oslens noise`: how much does the OS interrupt a thread that only computes, and why?"""

from __future__ import annotations

import click

from ..cpulist import format_cpulist
from ..format import seconds
from . import Context, environment_option, measure, measuring_options, one_of, renamed


@click.command("noise")
@click.option("--cpus", metavar="LIST", help="CPUs to probe, e.g. 0-3,8 (default: every available CPU).")
@click.option("--duration", type=float, default=5.0, show_default=True, metavar="S", help="Seconds per repetition.")
@click.option(
    "--threshold-ns",
    "threshold",
    type=int,
    metavar="NS",
    help="Shortest gap counted, in ns (default: 20 loop times, ≥ 500 ns; no less than a few, measured here).",
)
@click.option("--threshold", "old_threshold", type=int, hidden=True, callback=renamed("--threshold", "--threshold-ns"))
@click.option("--reps", type=int, default=1, show_default=True)
@click.option("--warmup", type=float, default=0.2, show_default=True, metavar="S")
@click.option("--mode", type=click.Choice(["process", "thread"]), default="thread", show_default=True)
@click.option("--compete", metavar="P[:VARIANT][:CPUS]", help="Also measure with this probe running on other CPUs.")
@click.option("--no-bpf", "no_bpf", is_flag=True, help="Do not trace the kernel: detours without their causes.")
@click.option(
    "--no-attribution", "no_attribution", is_flag=True, hidden=True, callback=renamed("--no-attribution", "--no-bpf")
)
@click.option(
    "--ftq-us",
    "ftq_us",
    type=int,
    metavar="US",
    help="Also count work per fixed time quantum of this many µs (FTQ), a regular time series.",
)
@click.option(
    "--step-us",
    type=float,
    default=1000.0,
    show_default=True,
    help="Tail at scale: the length of one synchronised step, in µs.",
)
@measuring_options
@environment_option("noise")
def command(ctx: Context, no_bpf: bool, no_attribution: bool, old_threshold: int | None, step_us: float, **kw):
    """How much does the OS interrupt a thread that only computes, and why?"""
    from ..plan.noise import plan as noise_plan

    kw["threshold"] = one_of(kw["threshold"], old_threshold, "--threshold-ns", "--threshold")
    plan = noise_plan(attribution=not (no_bpf or no_attribution), step_us=step_us, **kw)
    measure(
        ctx,
        "noise",
        plan,
        f"CPUs {format_cpulist(plan.params['cpus'])}, {seconds(plan.params['duration_s'])} × {plan.reps}",
    )
