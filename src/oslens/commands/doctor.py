"""`oslens doctor`: what oslens processes that are gone left behind (engines
still running for no one, and everything of a type of oslens.owned: SysV
semaphore sets, temporary directories, cgroups, block devices and
schedulers, containers, guests), removed, or only listed with --dry-run.
Every other command sweeps the same way when it starts, silently; this one
says what it found."""

from __future__ import annotations

import json

import click
from rich.text import Text

from .. import owned, runtime
from . import Context, common_options


@click.command(
    help=f"Find and remove what killed oslens runs left (engines, and every {', '.join(owned.TYPES)} they owned)."
)
@click.option("--dry-run", is_flag=True, help="List the leftovers; remove nothing.")
@common_options
def doctor(ctx: Context, dry_run: bool):
    found, live = runtime.sweep(dry_run=dry_run)
    where = runtime.root()
    if ctx.as_json:
        click.echo(
            json.dumps(
                {
                    "runtime_dir": str(where) if where else None,
                    "leftovers": [x.to_dict() for x in found],
                    "live": live,
                },
                indent=1,
            )
        )
        return
    ctx.say(f"runtime directory: {where or 'none usable: nothing is recorded'}")
    if live:
        ctx.say(f"live oslens processes (left alone): {', '.join(live)}")
    if not found:
        ctx.out.print("no leftovers")
        return
    from rich.table import Table

    t = Table("owner (pid.start)", "kind", "what", "action", box=None)
    for x in found:
        t.add_row(*(Text(s) for s in (x.owner, x.kind, x.what, x.action)))
    ctx.out.print(t)
