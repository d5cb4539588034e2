"""`oslens tune show|apply|reset`: what makes this machine's numbers
unstable, read, set and put back (tune.py), as `pyperf system tune`."""

from __future__ import annotations

import json

import click
from rich.table import Table
from rich.text import Text

from ..errors import UsageError
from ..format import plural
from . import Context, common_options

CPUS_HELP = "The CPUs you measure on: interrupts are moved off them (default: none moved)."


def _cpus(text: str | None) -> tuple[int, ...] | None:
    from ..parse import parse_cpus

    return parse_cpus(text, "--cpus") if text else None


def _say(ctx: Context):
    """ctx.say, never wrapped: a note names paths, whole on one line."""

    def say(msg: str) -> None:
        if not ctx.quiet:
            ctx.err.print(msg, highlight=False, markup=False, soft_wrap=True)

    return say


def _show(ctx: Context, rows: list[dict], title: str) -> None:
    if ctx.as_json:
        click.echo(json.dumps({"settings": rows}, indent=1))
        return
    t = Table(title=Text(title, style="bold"), title_justify="left")
    for col in ("setting", "now", "tuned", "to tune"):
        t.add_column(col)
    for r in rows:
        state = ("yes" if r["tuned"] else "no") if r["tuned"] is not None else "–"
        note = r["unavailable"] or ("; ".join(r.get("failed", [])) if r.get("failed") else r["wanted"])
        style = "green" if r["tuned"] else ("red" if r.get("failed") or r["tuned"] is False else "yellow")
        t.add_row(Text(r["name"]), Text(", ".join(r["now"]) or "–"), Text(state, style=style), Text(note))
    ctx.out.print(t)


@click.group("tune")
def tune():
    """Prepare the machine for measuring, as `pyperf system tune`: show what
    makes numbers unstable, apply the steadier settings, reset them."""


@tune.command("show")
@click.option("--cpus", metavar="LIST", help=CPUS_HELP)
@common_options
def show(ctx: Context, cpus: str | None):
    """Each setting as the machine has it, and whether it is tuned."""
    from .. import tune as tuning

    say = _say(ctx)
    rows = [s.to_dict() for s in tuning.status(_cpus(cpus))]
    _show(ctx, rows, "what makes numbers unstable here")
    try:
        pending = tuning.pending()
    except UsageError as e:  # show reads only: what it cannot trust, it says and leaves
        say(str(e))
        return
    if pending and not ctx.as_json:
        say(f"oslens tune apply changed {len(pending)} files that `oslens tune reset` has not put back yet")


@tune.command("apply")
@click.option("--cpus", metavar="LIST", help=CPUS_HELP)
@common_options
def apply(ctx: Context, cpus: str | None):
    """Set what can be set (needs root); the originals are written to a state
    file first, so that `reset` puts them back even after a crash."""
    from .. import tune as tuning

    rows = tuning.apply(_cpus(cpus), _say(ctx))
    _show(ctx, rows, f"tuned (state kept in {tuning.state_path()})")
    return 1 if any(r.get("failed") for r in rows) else 0


@tune.command("reset")
@common_options
def reset(ctx: Context):
    """Put back every file `apply` changed, byte for byte."""
    from .. import tune as tuning

    say = _say(ctx)
    out = tuning.reset(say)
    changed = [o for o in out if o["changed"]]
    if ctx.as_json:
        click.echo(json.dumps({"files": out}, indent=1))
    elif not out:
        say("nothing to reset: no tuning applied")
    elif not changed:
        say(f"nothing was changed: the {plural(len(out), 'file')} the state names hold their originals")
    else:
        back = sum(o["restored"] for o in changed)
        say(f"restored {back} of {plural(len(changed), 'changed file')}")
        for o in out:
            if not o["restored"]:
                say(f"  {o['file']}: not restored ({o['why']}); the state file {tuning.state_path()} is kept")
    return 0 if all(o["restored"] for o in out) else 1
