"""`oslens workloads`: the built-in applications appscale can run, as `probes` lists the probes."""

from __future__ import annotations

import json

import click

from . import Context, common_options


def print_workloads(ctx: Context) -> None:
    from .. import engine

    known = engine.workloads()
    if ctx.as_json:
        click.echo(
            json.dumps({name: {k: v for k, v in w.items() if k != "type"} for name, w in known.items()}, indent=1)
        )
        return
    for w in known.values():
        ctx.out.print(f"{w['name']:<10} {w['kind']:<8} {w['summary']}", highlight=False, markup=False)


@click.command("workloads")
@common_options
def workloads(ctx: Context) -> None:
    """List the built-in applications of 'oslens appscale --workload'."""
    print_workloads(ctx)
