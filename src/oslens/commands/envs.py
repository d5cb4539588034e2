"""`oslens envs`: what does moving a service into a container or a VM cost
in kernel time and in tail latency?"""

from __future__ import annotations

import contextlib

import click

from ..errors import MeasurementError, UsageError
from . import Context, environment_option, measure, measuring_options

DEFAULT_ENVS = "native,container,kvm"


@click.command("envs")
@click.argument("probes", nargs=-1, metavar="[PROBE[:VARIANT]]…")
@click.option(
    "--envs",
    "specs",
    metavar="ENV[,ENV…]",
    help="Environments, as --in takes them, apart by ',' or ';': native, container[:KEY=VALUE,…], "
    f"kvm[:KEY=VALUE,…]. Default: {DEFAULT_ENVS}, those that can be made here (the others skipped with the "
    "reason); one named here that cannot be made is refused.",
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
@measuring_options
@environment_option("envs")
def command(ctx: Context, probes: tuple[str, ...], specs: str, **kw):
    """What does moving a service into a container or a VM cost in kernel time and tail latency?

    PROBES (default: getppid, fault:anon, fork, pingpong:pipe) are timed in
    each environment, round after round, the environments taking turns; each
    operation gets p50, p99, p99.9 and throughput per environment, with the
    ratio to native and whether the rounds tell it apart."""
    from .. import envs
    from ..plan.envs import labels, plan, settle

    parts = split_specs(specs or DEFAULT_ENVS)
    parsed: dict = {}
    skipped: dict[str, str] = {}
    for label, spec in zip(labels(parts), parts):
        try:
            parsed[label] = envs.parse(spec, option="--envs")
        except UsageError as e:
            if specs is not None:
                raise  # named by the user: refused
            skipped[label] = str(e).removeprefix(f"--envs {label}").lstrip(": ")
            ctx.say(f"oslens: {label} skipped, it cannot be made here: {skipped[label]}")
    settings = settle(probe=",".join(probes) or None, parsed=parsed, **kw)  # refused before anything is made
    with contextlib.ExitStack() as stack:
        made: dict = {}
        for label, env in parsed.items():
            if env is not None:
                ctx.say(f"oslens: making the {env.name} environment")
                try:
                    stack.enter_context(env)
                except MeasurementError as e:
                    if specs is not None:
                        raise
                    skipped[label] = str(e)
                    ctx.say(f"oslens: {label} skipped, it could not be made: {e}")
                    continue
            made[label] = env
        p = plan(settings, made, skipped)
        envs_text = ", ".join(made)
        measure(ctx, "envs", p, f"{len(p.params['probes'])} operations × {envs_text} × {p.params['rounds']} rounds")


def split_specs(text: str) -> list[str]:
    """'native,container,kvm', 'native,kvm:cpus=2,mem=1G' or 'native;kvm:cpus=2,mem=1G':
    environments apart by ';' when any is, else by ',' — where a ',' is
    followed by an environment's name; a KEY=VALUE after it, or a value's
    continuation (cpuset=0-3,8), belongs to the environment before."""
    if ";" in text:
        parts = [s.strip() for s in text.split(";")]
    else:
        parts = []
        for item in (s.strip() for s in text.split(",")):
            if parts and parts[-1] and item and not _names_an_environment(item):
                parts[-1] += "," + item
            else:
                parts.append(item)
    if not all(parts):
        raise UsageError(f"--envs: an empty environment in '{text}'")
    if len(set(parts)) != len(parts):
        raise UsageError(f"--envs: an environment named twice in '{text}'")
    return parts


def _names_an_environment(item: str) -> bool:
    """'kvm', 'kvm:cpus=2', 'vm' (refused later, by name) do; 'cpus=2' and '8' do not."""
    name = item.partition(":")[0]
    return "=" not in name and name[:1].isalpha()
