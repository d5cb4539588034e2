"""`oslens appscale`: does an application speed up with cores, and is the time lost in the kernel?"""

from __future__ import annotations

import sys

import click

from . import EXIT_FAILED, Context, environment_option, measuring_options, one_of, print_dry_run, print_run, renamed


def _refused_inside(kw: dict) -> str | None:
    """Inside an environment only the engine is there: its built-in
    workloads run, a command of the host's and a shell for --prepare do not.
    What any machine would refuse is refused too, before one is made."""
    from ..plan.appscale import check

    if kw.get("command"):
        return "inside an environment only the engine's built-in workloads run (--workload), not a command of this host"
    if kw.get("prepare"):
        return "--prepare runs a shell command, and an environment holds only the engine"
    check(command=list(kw["command"]), workload=kw["workload"], reps=kw["reps"], size=kw["size"],
          time_limit=kw["time_limit"])  # fmt: skip
    return None


@click.command("appscale", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--workload", metavar="NAME", help="A built-in application instead of CMD (see 'oslens workloads').")
@click.option(
    "--list-workloads",
    "list_workloads",
    is_flag=True,
    hidden=True,
    callback=renamed("--list-workloads", "oslens workloads"),
)
@click.option(
    "--cpu-counts",
    "cpus",
    metavar="N|A-B[:S]|max[,…]",
    help="CPU counts: numbers, ranges (1-48, 1-96:8) and 'max' (default: 1, 2, 4, … plus each socket "
    "boundary, all physical cores and all CPUs under the placement).",
)
@click.option("--cpus", "old_cpus", hidden=True, callback=renamed("appscale --cpus", "--cpu-counts"))
@click.option(
    "--placement",
    type=click.Choice(["compact", "spread"]),
    default="compact",
    show_default=True,
    help="compact fills a socket first; spread alternates sockets.",
)
@click.option("--reps", type=int, default=3, show_default=True, help="Repetitions per CPU count (interleaved).")
@click.option("--size", type=int, metavar="K", help="--workload's problem size (default: its own).")
@click.option(
    "--mode",
    type=click.Choice(["thread", "process"]),
    default="thread",
    show_default=True,
    help="--workload's workers as threads or processes.",
)
@click.option("--time-limit", "time_limit", type=float, metavar="S", help="Stop a run (SIGTERM) after this long.")
@click.option(
    "--prepare",
    metavar="CMD",
    help="A shell command run untimed before each repetition, on any CPU ({n} = the CPU count): a build's "
    "'make clean', a cache dropped.",
)
@click.option(
    "--dry-run",
    "dry_run",
    is_flag=True,
    help="Print the plan (per CPU count: CPUs, sockets, SMT siblings used) and exit; nothing runs or is stored.",
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="[-- CMD ARGS…]")
@measuring_options
@environment_option("appscale", lambda kw: _refused_inside(kw))
def command(ctx: Context, command: tuple[str, ...], list_workloads: bool, old_cpus: str | None, dry_run: bool, **kw):
    """Does an application speed up with cores, and is the time lost in the kernel? ({n} in CMD = the CPU count.)"""
    from .. import appscale as app
    from ..plan.appscale import plan as appscale_plan
    from ..runner import execute
    from .workloads import print_workloads

    if list_workloads:
        return print_workloads(ctx)
    kw["cpus"] = one_of(kw["cpus"], old_cpus, "--cpu-counts", "--cpus")
    plan = appscale_plan(command=list(command), **kw)
    what = f"workload {plan.params['workload']}" if plan.params["workload"] else " ".join(command)
    if dry_run:
        from ..plan.appscale import dry_run as appscale_dry_run

        return print_dry_run(
            ctx, appscale_dry_run(plan), f"{what} on {len(plan.points)} CPU counts × {plan.reps} repetitions"
        )
    with ctx.store() as store, app.prepared(plan) as points:
        ctx.say(
            f"oslens appscale: {what} on {','.join(map(str, plan.params['cpus']))} CPUs × {plan.reps}, "
            f"store {store.path}"
        )
        runs = app.runs(points, plan.reps, kw["time_limit"])
        run_id = execute(
            store,
            "appscale",
            sys.argv,
            ctx.tagged(plan.params),
            runs,
            len(runs),
            ctx.err,
            ctx.quiet,
        )
        summary = print_run(ctx, store, run_id)
    return EXIT_FAILED if summary["failed_points"] else 0
