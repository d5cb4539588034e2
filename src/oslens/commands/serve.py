"""`oslens serve`: where does real server software spend its time in the kernel, under load?"""

from __future__ import annotations

import click

from ..cpulist import format_cpulist
from ..format import seconds
from ..plan.serve import DEFAULT_CONNECTIONS, DEFAULT_SERVERS
from . import Context, environment_option, measure, measuring_options


@click.command("serve")
@click.option(
    "--server",
    default=DEFAULT_SERVERS,
    show_default=True,
    metavar="NAME[,NAME…]",
    help="Servers, each with its load generator: nginx (wrk, a static page), streaming (nginx, large files at a "
    "rate per connection), redis (redis-benchmark), search (xapian-tcpsrv, Xapian's clients); or jobs run to their "
    "end on every CPU and profiled whole: analysis (a word count by tr, sort and uniq), hpcc (HPC Challenge on MPI).",
)
@click.option("--server-cpus", type=int, metavar="N", help="CPUs for the server (default: half, at least one); "
              "the load generator has the rest.")  # fmt: skip
@click.option("--connections", type=int, default=DEFAULT_CONNECTIONS, show_default=True, metavar="N",
              help="The load generator's connections.")  # fmt: skip
@click.option("--warmup", type=float, default=2.0, show_default=True, metavar="S",
              help="Seconds of load before the profile: the steady state is profiled, not the ramp.")  # fmt: skip
@click.option("--duration", type=float, default=5.0, show_default=True, metavar="S",
              help="Seconds the server is profiled, under load.")  # fmt: skip
@click.option("--reps", type=int, default=1, show_default=True, help="Repetitions per server (interleaved).")
@measuring_options
@environment_option("serve")
def command(ctx: Context, **kw):
    """Where does real server software spend its time in the kernel, under load?"""
    from ..plan.serve import plan as serve_plan

    plan = serve_plan(**kw)
    p = plan.params
    measure(
        ctx,
        "serve",
        plan,
        f"{', '.join(p['servers'])}: server on CPUs {format_cpulist(p['server_cpus'])}, load generator on "
        f"{format_cpulist(p['client_cpus'])}, {seconds(p['duration_s'])} profiled after {seconds(p['warmup_s'])} "
        f"× {plan.reps}",
    )
