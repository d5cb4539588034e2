"""`oslens scale`: does each OS primitive scale with cores? (OSMark-style)"""

from __future__ import annotations

import click

from ..format import plural
from ..parse import OSMARK_PROBES
from . import Context, environment_option, explain_option, measure, measuring_options, print_dry_run


@click.command("scale")
@click.option(
    "--probe",
    "probe",
    metavar="P[:VARIANT][,…]",
    help=f"Probes to run, or 'all' (default: the OSMark five, {','.join(OSMARK_PROBES)}).",
)
@click.option(
    "--workers",
    metavar="N|A-B[:S]|max[,…]",
    help="Worker counts: numbers, ranges (1-48: every count; 1-96:8: 1, 9, …, 96) and 'max' "
    "(default: 1, 2, 4, … plus each socket boundary, all physical cores and all CPUs under the placement).",
)
@click.option(
    "--mode",
    type=click.Choice(["process", "thread", "both"]),
    default="process",
    show_default=True,
    help="Workers as processes or as threads of one process.",
)
@click.option(
    "--placement",
    type=click.Choice(["compact", "spread"]),
    default="compact",
    show_default=True,
    help="compact fills a socket first; spread deals workers round-robin over sockets.",
)
@click.option("--duration", type=float, metavar="S", help="Fixed time: seconds measured per repetition (default 1).")
@click.option("--ops", type=int, metavar="N", help="Fixed work: operations per worker, timed (OSMark's method).")
@click.option("--reps", type=int, default=3, show_default=True, help="Repetitions per point.")
@click.option("--warmup", type=float, default=0.3, show_default=True, metavar="S", help="Warm-up seconds, discarded.")
@click.option(
    "--interval",
    type=float,
    default=0.1,
    show_default=True,
    metavar="S",
    help="Sampling interval of the workers' counters (fixed time).",
)
@click.option("--opt", "opts", multiple=True, metavar="KEY=VALUE", help="A probe option, e.g. pages=125000.")
@explain_option(
    "Say why: after each point, the same point again with every worker's time charged to its kernel "
    "causes (system calls, page faults, named lock waits, interrupts, run-queue wait), per operation."
)
@click.option("--quick", is_flag=True, help="The quick suite: the OSMark five, short durations.")
@click.option(
    "--dry-run",
    "dry_run",
    is_flag=True,
    help="Print the plan (per worker count: CPUs, sockets, SMT siblings used) and exit; nothing runs or is stored.",
)
@measuring_options
@environment_option("scale")
def command(ctx: Context, quick: bool, dry_run: bool, **kw):
    """Does each OS primitive scale with cores? (OSMark-style)"""
    from ..plan.scale import dry_run as scale_dry_run
    from ..plan.scale import plan as scale_plan

    if quick:
        kw.update(duration=kw["duration"] or 0.5, warmup=min(kw["warmup"], 0.2))
    plan = scale_plan(**kw)
    if dry_run:
        from ..runner import check

        check(plan.points)  # the engine accepts every invocation as it would for a run
        p = plan.params
        return print_dry_run(
            ctx,
            scale_dry_run(plan),
            f"{len(plan.points)} engine invocations of {plan.reps} repetitions: probes {','.join(p['probes'])} × "
            f"modes {','.join(p['modes'])} × {len(p['workers'])} worker counts",
        )
    measure(
        ctx,
        "scale",
        plan,
        f"{plural(sum(not p.explained for p in plan.points), 'point')} × {plural(plan.reps, 'repetition')}"
        + (f", each explained ({kw['explain']})" if kw["explain"] else "")
        + f", workers {','.join(map(str, plan.params['workers']))}",
    )
