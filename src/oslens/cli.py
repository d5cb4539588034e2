"""The `oslens` command line.

Results go to stdout (a table, or one JSON document with --json), progress
and messages to stderr. Exit status: 0 success, 1 a measurement failed,
2 bad usage, 128+N interrupted by signal N.

The commands that measure are the kinds of run, one module each in
commands/, added here from the registry (kinds.py); the commands below work
on stored runs of any kind through the same registry."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.text import Text

from . import __version__, engine, kinds, runtime, stopsignals
from .commands import EXIT_FAILED, EXIT_USAGE, Context, common_options, one_of, print_run, renamed, shared_options
from .commands.doctor import doctor
from .commands.imports import import_
from .commands.study import study
from .commands.tune import tune
from .commands.workloads import workloads
from .errors import Interrupted, MeasurementError, UsageError
from .parse import default_worker_counts
from .store import StoreError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="oslens")
@shared_options
def cli(db, as_json, quiet, verbose):
    """Measure how this Linux kernel behaves and scales, and explain it."""
    if click.get_current_context().invoked_subcommand != "doctor":  # doctor sweeps and says what it found
        runtime.start()


for _kind in kinds.KINDS.values():
    cli.add_command(_kind.load("command"), _kind.name)
cli.add_command(workloads)
cli.add_command(study)
cli.add_command(doctor)
cli.add_command(tune)
cli.add_command(import_)


# ------------------------------------------------------------------ report


@cli.command()
@click.argument("run_refs", nargs=-1, required=True, metavar="RUN…")
@click.option(
    "-o",
    "--output",
    type=click.Path(),
    help="The HTML file (default: oslens-report-RUNS.html here); a directory with --format png|svg.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["html", "png", "svg"]),
    default="html",
    show_default=True,
    help="html: one self-contained interactive page; png/svg: each figure as a file, for papers.",
)
@common_options
def report(ctx: Context, run_refs: tuple[str, ...], output: str | None, fmt: str):
    """Write a report with plots of stored runs (several runs of one kind are overlaid)."""
    with ctx.store(write=False) as store:
        runs = [r for ref in run_refs for r in store.resolve(ref)]  # a tag: every run so tagged
        if len({r.id for r in runs}) != len(runs):
            raise UsageError("a run is named twice")
        name = "-".join(str(r.id) for r in runs)
        target = Path(output or (f"oslens-report-{name}.html" if fmt == "html" else f"oslens-report-{name}"))
        _check_report_target(target, fmt)  # before the page is built, which takes seconds
        from .report.html import RunData, build

        data = [RunData(r, store.records(r.id)) for r in runs]
    page = build(data)
    try:
        if fmt == "html":
            target.write_text(page.to_html())
            written = [target]
        else:
            written = page.write_static(target, fmt)
    except OSError as e:
        raise UsageError(f"cannot write {target}: {e.strerror or e}") from None
    if ctx.as_json:
        click.echo(
            json.dumps({"runs": [r.id for r in runs], "format": fmt, "files": [str(p.resolve()) for p in written]})
        )
    else:
        for p in written:
            click.echo(str(p.resolve()))


def _check_report_target(target: Path, fmt: str) -> None:
    """Where the report goes can be written (checked, like every input,
    before anything is done): an HTML file in an existing directory, or a
    directory of figures that exists or can be made."""
    if fmt == "html" and target.is_dir():
        raise UsageError(f"-o {target}: a directory; give the HTML file's name")
    if fmt != "html" and target.exists() and not target.is_dir():
        raise UsageError(f"-o {target}: not a directory (--format {fmt} writes one file per figure there)")
    where = target.parent
    if fmt != "html":  # made with its parents: the nearest that exists must take it
        where = next(d for d in (target.absolute(), *target.absolute().parents) if d.exists())
    _check_writable_in(str(target), where)


def _check_export_target(output: str | None) -> None:
    """An export's -o (a file, or DIR/ made if only its last part is
    missing), checked before anything is read or built."""
    if output is not None:
        path = Path(output)
        _check_writable_in(output, path if path.is_dir() else path.absolute().parent)


def _check_writable_in(output: str, where: Path) -> None:
    import os

    if not where.is_dir():
        raise UsageError(f"-o {output}: no such directory {where}")
    if not os.access(where, os.W_OK | os.X_OK):
        raise UsageError(f"-o {output}: cannot write in {where}")


# ----------------------------------------------------------------- compare


@cli.command()
@click.argument("run_refs", nargs=-1, required=True, metavar="RUN_A RUN_B [RUN…]")
@click.option(
    "--threshold-pct",
    "threshold",
    metavar="PCT",
    help="A significant change smaller than this many percent is reported as within the threshold (default 5).",
)
@click.option("--threshold", "old_threshold", hidden=True, callback=renamed("compare --threshold", "--threshold-pct"))
@click.option(
    "--fail-on-regression",
    "fail_on_regression",
    is_flag=True,
    help="Exit 1 if B (or any run after A) is significantly worse than A beyond the threshold (for CI).",
)
@common_options
def compare(
    ctx: Context, run_refs: tuple[str, ...], threshold: str | None, old_threshold: str | None, fail_on_regression: bool
):
    """Compare runs of one kind: medians, intervals, change, and whether it is
    significant. Two runs: B against A, in full. More (or one tag:KEY=VALUE
    selecting several): each against the first, a column per run."""
    with ctx.store(write=False) as store:
        # a bad reference is refused before the slow import below
        if len(run_refs) == 1:
            runs = store.resolve(run_refs[0])
            if len(runs) < 2:
                raise UsageError(f"{run_refs[0]} names one run: compare takes two runs or more")
        else:
            runs = [store.run(ref) for ref in run_refs]
        from . import compare as comparing

        one_of(threshold, old_threshold, "--threshold-pct", "--threshold")
        if threshold is not None:
            limit = comparing.parse_percent(threshold)
        elif old_threshold is not None:
            limit = comparing.parse_threshold(old_threshold)
        else:
            limit = comparing.DEFAULT_THRESHOLD
        if len(runs) > 2:
            many = comparing.compare_many(store, runs, threshold=limit)
            if ctx.as_json:
                click.echo(json.dumps(many.to_dict(), indent=1))
            else:
                from .report.compare import render_many

                render_many(ctx.out, many)
            return comparing.exit_status_many(many, fail_on_regression)
        result = comparing.compare(store, runs[0], runs[1], threshold=limit)
    if ctx.as_json:
        click.echo(json.dumps(result.to_dict(), indent=1))
    else:
        from .report.compare import render

        render(ctx.out, result)
    return comparing.exit_status(result, fail_on_regression)


# --------------------------------------------------------- store commands


def _selection(kind: str | None, tags: tuple[str, ...], since: str | None):
    """`runs`' filters as one predicate, each checked before the store is read."""
    from datetime import datetime, timezone

    from .store import parse_tag

    if kind is not None:
        kinds.get(kind)
    try:
        pairs = [parse_tag(t) for t in tags]
    except ValueError as e:
        raise UsageError(f"--tag: {e}") from None
    start = None
    if since is not None:
        try:
            start = datetime.fromisoformat(since)
        except ValueError:
            raise UsageError(f"--since: '{since}' is not a date (2026-11-26, or 2026-11-26T14:00)") from None
        if start.tzinfo is None:  # a date as people type it: local time
            start = start.astimezone()

    def wanted(r) -> bool:
        if kind is not None and r.kind != kind:
            return False
        if any(r.tags.get(k) != v for k, v in pairs):
            return False
        if start is not None:
            started = datetime.fromisoformat(r.started)
            if (started if started.tzinfo else started.replace(tzinfo=timezone.utc)) < start:
                return False
        return True

    return wanted


@cli.command()
@click.option("--kind", metavar="KIND", help="Only runs of this kind.")
@click.option(
    "--tag", "tags", multiple=True, metavar="KEY=VALUE", help="Only runs with this tag (repeatable: all of them)."
)
@click.option("--since", metavar="DATE", help="Only runs started at or after this date (2026-11-26, or with a time).")
@common_options
def runs(ctx: Context, kind: str | None, tags: tuple[str, ...], since: str | None):
    """List the stored runs."""
    wanted = _selection(kind, tags, since)
    with ctx.store(write=False) as store:  # a mistyped --db is an error, as for show
        rows = [r for r in store.runs() if wanted(r)]
    if ctx.as_json:
        click.echo(
            json.dumps(
                [
                    {
                        "id": r.id,
                        "kind": r.kind,
                        "status": r.status,
                        "started": r.started,
                        "finished": r.finished,
                        "host": r.host,
                        "reason": r.reason,
                        "tags": r.tags,
                        "params": r.params,
                    }
                    for r in rows
                ],
                indent=1,
            )
        )
        return
    if not rows:
        ctx.say(f"no run in {ctx.db_path} matches" if kind or tags or since else f"no runs in {ctx.db_path}")
        return
    from rich.table import Table

    tagged = any(r.tags for r in rows)
    t = Table("run", "kind", "status", "started", "host", "what", *(["tags"] if tagged else []), box=None)
    for r in rows:
        what = kinds.KINDS[r.kind].what(r.params or {}) if r.kind in kinds.KINDS else "?"
        status = r.status + (f" ({r.reason})" if r.reason and r.status != "complete" else "")
        labels = [" ".join(f"{k}={v}" for k, v in r.tags.items())] if tagged else []
        # Text, not markup: a command line may hold '[/]'.
        t.add_row(*(Text(x) for x in (str(r.id), r.kind, status, r.started, r.host, what, *labels)))
    ctx.out.print(t)


@cli.command()
@click.argument("run_ref", metavar="RUN")
@common_options
def show(ctx: Context, run_ref: str):
    """Print a stored run as the command that made it did (RUN: id or 'last')."""
    with ctx.store(write=False) as store:
        run = store.run(run_ref)
        print_run(ctx, store, run.id)


@cli.command()
@click.argument("run_ref", metavar="RUN")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["json", "csv", "parquet", "folded"]),
    default="json",
    show_default=True,
    help="json: metadata, every frame and every record; csv, parquet: one frame a file; "
    "folded: each explained point's sampled kernel stacks (flamegraph.pl, inferno, speedscope), a file each.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(writable=True),
    help="File (default stdout; parquet needs one), or DIR/: every frame to its own file there.",
)
@click.option("--frame", metavar="NAME", help="Only this frame (default: csv and parquet write the main one).")
@common_options
def export(ctx: Context, run_ref: str, fmt: str, output: str | None, frame: str | None):
    """Export a stored run's tidy frames (and, in JSON, every record).

    --json prints what was written (files, frames, rows, columns): give -o."""
    if ctx.as_json and not output:
        raise UsageError("export --json describes the files written: give -o FILE or -o DIR/")
    _check_export_target(output)
    from .api import Run
    from .export import export as write

    with ctx.store(write=False) as store:
        run = Run(store.run(run_ref), store)
        done = write(run, fmt, output, frame, sys.stdout)
    if ctx.as_json:
        click.echo(json.dumps({"run": run.id, "kind": run.kind, "format": fmt, "written": done}, indent=1))
    elif output:
        files = sorted({str(d["path"]) for d in done})
        ctx.say(f"run {run.id} written to {output}" + (f" ({len(files)} files)" if len(files) > 1 else ""))


@cli.command()
@common_options
def probes(ctx: Context):
    """List the probes, their variants and options."""
    ps = engine.probes()
    if ctx.as_json:
        click.echo(json.dumps({n: vars(p) for n, p in ps.items()}, indent=1, default=list))
        return
    from rich.table import Table

    t = Table("probe", "variants", "options", "system calls", "what it measures", box=None)
    for p in ps.values():
        variants = ", ".join(p.variants) if len(p.variants) > 1 else ""
        opts = ", ".join(f"{k}={o['default']}" for k, o in p.options.items())
        t.add_row(*(Text(x) for x in (p.name, variants, opts, ",".join(p.syscalls), p.summary)))
    ctx.out.print(t)
    ncpu = engine.topology()["available"]
    ctx.out.print(f"default worker counts here: {','.join(map(str, default_worker_counts(ncpu)))}", style="dim")


# -------------------------------------------------------------------- main


def _stop_signals_interrupt() -> None:
    """From the first moment, SIGINT, SIGTERM and SIGHUP (^C, a scheduler's,
    a timeout's, a closed terminal's) stop a command by one exception, so
    that what it made (a device, a container, a guest) is undone on the way
    out and every stop is worded alike. SIGTERM's and SIGHUP's default
    action would end the process at once and leave that to the next start's
    sweep. A signal the caller ignores (nohup) stays ignored; while an
    engine is read, the runner stops it in order instead."""

    def handler(signum, frame):
        raise Interrupted(signum)

    stopsignals.install(dict.fromkeys(stopsignals.STOP_SIGNALS, handler))


def main(argv: list[str] | None = None) -> None:
    err = Console(stderr=True)
    _stop_signals_interrupt()
    try:
        rc = cli.main(args=argv, prog_name="oslens", standalone_mode=False)
        sys.exit(rc if isinstance(rc, int) else 0)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.ClickException as e:
        _one_line(err, e.format_message())
        sys.exit(EXIT_USAGE)
    except (UsageError, StoreError) as e:
        _one_line(err, str(e))
        sys.exit(EXIT_USAGE)
    except MeasurementError as e:
        _one_line(err, f"measurement failed: {e}")
        sys.exit(EXIT_FAILED)
    except Interrupted as e:
        _one_line(err, f"{e}; the run is kept as incomplete" if e.run_kept else str(e))
        sys.exit(128 + e.signum)
    except click.Abort:  # ^C at a prompt of click's
        _one_line(err, str(Interrupted(signal.SIGINT)))
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)


def _one_line(console: Console, msg: str) -> None:
    console.print(f"oslens: {' '.join(msg.split())}", highlight=False, markup=False, soft_wrap=True)
