"""`oslens envs`: what does moving a service into a container or a VM cost
in kernel time and in tail latency?"""

from __future__ import annotations

import contextlib

import click

from ..errors import UsageError
from . import Context, common_options, measure


@click.command("envs")
@click.argument("probes", nargs=-1, metavar="[PROBE[:VARIANT]]…")
@click.option(
    "--envs",
    "specs",
    default="native,container,kvm",
    show_default=True,
    metavar="ENV[;ENV…]",
    help="Environments, as --in takes them, separated by ';' (or by ',' where no ENV has options): "
    "native, container[:…], kvm[:…].",
)
@click.option("--workers", type=int, default=1, show_default=True, help="Workers timing the operation at once.")
@click.option("--placement", type=click.Choice(["compact", "spread"]), default="compact", show_default=True)
@click.option("--ops", type=int, metavar="N", help="Operations per worker and round (default 20000).")
@click.option("--duration", type=float, metavar="S", help="Seconds per round instead of a number of operations.")
@click.option(
    "--rounds",
    type=int,
    default=7,
    show_default=True,
    help="Rounds; in each, every environment times every operation (7 lets a difference be told at 1%).",
)
@click.option("--warmup", type=float, default=0.1, show_default=True, metavar="S", help="Untimed warm-up seconds.")
@common_options
def command(ctx: Context, probes: tuple[str, ...], specs: str, **kw):
    """What does moving a service into a container or a VM cost in kernel time and tail latency?

    PROBES (default: getppid, fault:anon, fork, pingpong:pipe) are timed in
    each environment, round after round, the environments taking turns; each
    operation gets p50, p99, p99.9 and throughput per environment, with the
    ratio to native and whether the rounds tell it apart."""
    from .. import envs
    from ..plan.envs import labels, plan

    parts = split_specs(specs)
    made = {label: envs.parse(spec) for label, spec in zip(labels(parts), parts)}  # refused before anything is made
    with contextlib.ExitStack() as stack:
        for env in made.values():
            if env is not None:
                ctx.say(f"oslens: making the {env.name} environment")
                stack.enter_context(env)
        p = plan(probe=",".join(probes) or None, made=made, **kw)
        envs_text = ", ".join(made)
        measure(ctx, "envs", p, f"{len(p.params['probes'])} operations × {envs_text} × {p.params['rounds']} rounds")


def split_specs(text: str) -> list[str]:
    """'native,container,kvm' or 'native;kvm:cpus=2,mem=1G': environments
    apart by ';' when any is given, else by ','."""
    parts = [s.strip() for s in (text.split(";") if ";" in text else text.split(","))]
    if not all(parts):
        raise UsageError(f"--envs: an empty environment in '{text}'")
    if len(set(parts)) != len(parts):
        raise UsageError(f"--envs: an environment named twice in '{text}'")
    return parts
