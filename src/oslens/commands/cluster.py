"""`oslens cluster`: the same measurement on every rank of an MPI job at
once, stored as one run with a row per rank, and `cluster bsp`, the
bulk-synchronous loop that checks what that noise does to a job."""

from __future__ import annotations

import functools
import sys

import click

from . import Context, common_options, print_run

CLUSTER_HELP = "What does OS noise on each node do to a job that spans them all?"


def launch_options(fn):
    @click.option(
        "--launch",
        metavar="CMD",
        help='The MPI launcher and its options, e.g. "mpirun -n 64 --hostfile hosts" or "srun -N 16" '
        "(default: mpirun -n RANKS on this host).",
    )
    @click.option("--ranks", type=int, metavar="N", help="Ranks of the default launcher on this host (default 2).")
    @functools.wraps(fn)
    def wrapper(*a, **kw):
        return fn(*a, **kw)

    return wrapper


def _measure(ctx: Context, what: str, plan, launch_argv: list[str], note: str | None, headline: str) -> None:
    from ..plan.cluster import check_launcher
    from ..runner import check, execute

    check(plan.points)
    check_launcher(launch_argv)
    if note:
        ctx.say(f"oslens cluster: {note}")
    with ctx.store() as store:
        ctx.say(f"oslens cluster {what}: {headline}, store {store.path}")
        run_id = execute(
            store, "cluster", sys.argv, plan.params, plan.points, plan.total_reps, ctx.err, ctx.quiet, checked=True
        )
        print_run(ctx, store, run_id)


@click.group("cluster", help=CLUSTER_HELP)
def command():
    pass


@command.command("noise")
@click.option("--duration", type=float, default=5.0, show_default=True, metavar="S", help="Seconds per repetition.")
@click.option("--reps", type=int, default=1, show_default=True)
@click.option("--warmup", type=float, default=0.2, show_default=True, metavar="S")
@click.option("--threshold-ns", "threshold", type=int, metavar="NS", help="Shortest gap counted, in ns.")
@click.option("--no-bpf", "no_bpf", is_flag=True, help="Do not trace the kernel: detours without their causes.")
@click.option("--step-us", type=float, default=1000.0, show_default=True, help="Tail at scale: one step, in µs.")
@launch_options
@common_options
def noise(ctx: Context, launch, ranks, no_bpf, step_us, **kw):
    """Detours on every CPU of every rank at once: the noisy nodes, and why."""
    from ..plan.cluster import launcher, plan_run
    from ..plan.noise import plan as noise_plan

    argv, n, note = launcher(launch, ranks)
    inner = noise_plan(
        cpus=None, mode="thread", compete=None, attribution=not no_bpf, step_us=step_us, ftq_us=None, **kw
    )
    params = {"measure": "noise", "launch": argv, "ranks": n}
    plan = plan_run(inner, "noise", argv, params)
    _measure(ctx, "noise", plan, argv, note, f"{kw['duration']:g} s × {kw['reps']} on every rank of '{' '.join(argv)}'")


@command.command("bsp")
@click.option("--compute-us", type=int, default=1000, show_default=True, help="The work of one step, in µs.")
@click.option("--iterations", type=int, default=2000, show_default=True, help="Steps measured.")
@click.option("--collective", type=click.Choice(["barrier", "allreduce"]), default="barrier", show_default=True)
@click.option("--threshold-ns", "threshold_ns", type=int, metavar="NS", help="Shortest gap counted as a detour.")
@click.option("--no-bpf", "no_bpf", is_flag=True, help="Do not trace the kernel: detours without their causes.")
@launch_options
@common_options
def bsp(ctx: Context, launch, ranks, compute_us, iterations, collective, threshold_ns, no_bpf):
    """Compute, then a collective, on every rank: the measured slowdown
    against the tail-at-scale prediction, and who made each step late."""
    from ..plan.cluster import launcher, plan_bsp

    argv, n, note = launcher(launch, ranks)
    plan = plan_bsp(
        compute_us=compute_us,
        iterations=iterations,
        collective=collective,
        threshold_ns=threshold_ns,
        attribution=not no_bpf,
        launch=argv,
        params={"measure": "bsp", "launch": argv, "ranks": n},
    )
    _measure(ctx, "bsp", plan, argv, note, f"{compute_us} µs × {iterations} steps, {collective}")
