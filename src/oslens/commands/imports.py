"""`oslens import FILE.db`: another results store's runs copied into this
one, so that `compare`, `show` and `report` see runs of two machines or
kernels side by side."""

from __future__ import annotations

import json

import click

from ..format import plural
from ..store import Source
from . import Context, common_options


@click.command("import")
@click.argument("source", metavar="FILE.db", type=click.Path(dir_okay=False))
@click.option(
    "--run", "run_ids", type=click.IntRange(min=1), multiple=True, metavar="ID", help="Only this run (repeatable)."
)
@common_options
def import_(ctx: Context, source: str, run_ids: tuple[int, ...]) -> None:
    """Copy the runs of another oslens store (all, or --run ID…) into this one, under new ids.

    Each run comes with its records, byte for byte; a run already here (same
    kind, start, host, pid, arguments and parameters) is skipped, so importing
    again changes nothing. A run still being written there arrives as an
    incomplete snapshot, and importing again once it has grown or ended
    replaces the snapshot with the whole run.
    All or nothing: a file that is not a readable oslens store is refused
    before anything is written."""
    # The file is checked (and every --run found in it) before this store is opened, let alone created.
    with Source(source, run_ids) as src, ctx.store() as store:
        done = store.import_runs(src)
    copied = sum(d.copied for d in done)
    if ctx.as_json:
        click.echo(
            json.dumps(
                {
                    "source": str(src.path),
                    "store": str(ctx.db_path),
                    "runs": [
                        {
                            "from": d.old_id,
                            "to": d.new_id,
                            "kind": d.kind,
                            "imported": d.copied,
                            "refreshed": d.refreshed,
                            "snapshot": d.snapshot,
                        }
                        for d in done
                    ],  # fmt: skip
                },
                indent=1,
            )
        )
        return
    for d in done:
        note = " (replaces the snapshot taken while it ran)" if d.refreshed else ""
        if not d.copied:
            note = " (already here)"
        if d.snapshot:
            note += " (still running there: an incomplete snapshot; import again once it has ended)"
        ctx.out.print(f"run {d.old_id} → {d.new_id}  {d.kind}{note}", highlight=False, markup=False)
    ctx.say(f"{plural(copied, 'run')} imported from {src.path} into {ctx.db_path}, {len(done) - copied:,} already here")
