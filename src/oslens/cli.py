"""The `oslens` command line.

Results go to stdout (a table, or one JSON document with --json), progress
and messages to stderr. Exit status: 0 success, 1 a measurement failed,
2 bad usage, 128+N interrupted by signal N."""
from __future__ import annotations

import functools
import json
import sys
from contextlib import contextmanager
from pathlib import Path

import click
from rich.console import Console

from . import __version__, engine
from .errors import MeasurementError, UsageError
from .plan import OSMARK_PROBES, default_worker_counts, latency_plan, noise_plan, scale_plan
from .runner import Interrupted, execute, machine_metadata
from .store import Store, StoreError, default_path, export_run, records_frame

EXIT_FAILED, EXIT_USAGE = 1, 2


class Context:
    def __init__(self, db: str | None, as_json: bool, quiet: bool, verbose: int):
        self.db_path = Path(db) if db else default_path()
        self.as_json = as_json
        self.quiet = quiet
        self.verbose = verbose
        # Wide enough for the tables when stdout is a file or a pipe.
        self.out = Console(width=None if sys.stdout.isatty() else 160)
        self.err = Console(stderr=True)

    def store(self, create: bool = True) -> Store:
        """Commands that only read never create a store at a mistyped path."""
        if not create and not self.db_path.exists():
            raise UsageError(f"no results store at {self.db_path} (nothing measured there yet)")
        return Store(self.db_path)

    def say(self, msg: str) -> None:
        if not self.quiet:
            self.err.print(msg, highlight=False)


def common_options(fn):
    """--db, --json, -q, -v on every subcommand, where users type them."""
    @click.option("--db", envvar="OSLENS_DB", metavar="PATH",
                  help="Results store (default: OSLENS_DB or the user data directory).")
    @click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
    @click.option("-q", "--quiet", is_flag=True, help="No progress or messages on stderr.")
    @click.option("-v", "--verbose", count=True, help="More detail.")
    @functools.wraps(fn)
    def wrapper(db, as_json, quiet, verbose, **kw):
        return fn(Context(db, as_json, quiet, verbose), **kw)
    return wrapper


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="oslens")
def cli():
    """Measure how this Linux kernel behaves and scales, and explain it."""


# ------------------------------------------------------------------- scale

@cli.command()
@click.option("--probe", "probe", metavar="P[:VARIANT][,…]",
              help=f"Probes to run, or 'all' (default: the OSMark five, {','.join(OSMARK_PROBES)}).")
@click.option("--workers", metavar="N[,N…]|max", help="Worker counts (default: 1, 2, 4, … and all CPUs).")
@click.option("--mode", type=click.Choice(["process", "thread", "both"]), default="process", show_default=True,
              help="Workers as processes or as threads of one process.")
@click.option("--placement", type=click.Choice(["compact", "spread"]), default="compact", show_default=True,
              help="compact fills a socket first; spread deals workers round-robin over sockets.")
@click.option("--duration", type=float, metavar="S", help="Fixed time: seconds measured per repetition (default 1).")
@click.option("--ops", type=int, metavar="N", help="Fixed work: operations per worker, timed (OSMark's method).")
@click.option("--reps", type=int, default=3, show_default=True, help="Repetitions per point.")
@click.option("--warmup", type=float, default=0.3, show_default=True, metavar="S", help="Warm-up seconds, discarded.")
@click.option("--interval", type=float, default=0.1, show_default=True, metavar="S",
              help="Sampling interval of the workers' counters (fixed time).")
@click.option("--opt", "opts", multiple=True, metavar="KEY=VALUE", help="A probe option, e.g. pages=125000.")
@click.option("--quick", is_flag=True, help="The quick suite: the OSMark five, short durations.")
@common_options
def scale(ctx: Context, quick: bool, **kw):
    """Does each OS primitive scale with cores? (OSMark-style)"""
    if quick:
        kw.update(duration=kw["duration"] or 0.5, warmup=min(kw["warmup"], 0.2))
    plan = scale_plan(**kw)
    _measure(ctx, "scale", plan, f"{len(plan.points)} points × {plan.reps} repetitions, "
             f"workers {','.join(map(str, plan.params['workers']))}", _print_scale)


def _measure(ctx: Context, kind: str, plan, headline: str, printer) -> None:
    """Runs a checked plan into the store, then prints the run as `show` would."""
    with ctx.store() as store:
        ctx.say(f"oslens {kind}: {headline}, store {store.path}")
        run_id = execute(store, kind, sys.argv, plan.params, plan.points, plan.total_reps,
                         ctx.err, ctx.quiet)
        printer(ctx, store, run_id)


def _print_scale(ctx: Context, store: Store, run_id: int) -> None:
    # numpy and scipy load here, not at start-up: most commands never need them.
    from .analysis import scale as scale_analysis
    from .report import scale as scale_report

    run = store.run(run_id)
    series = scale_analysis.summarize(store.records(run.id))
    summaries = {name: p.summary for name, p in engine.probes().items()}
    _publish(ctx, store, run, {"series": [s.to_dict() for s in series]},
             lambda: scale_report.render(ctx.out, series, summaries))


def _publish(ctx: Context, store: Store, run, summary: dict, render, extra_json: dict | None = None) -> None:
    """Stores a run's summary, then prints it: one JSON document with the
    run's metadata, or the run line and the command's tables."""
    store.set_summary(run.id, summary)
    if ctx.as_json:
        doc = {"run": run.id, "kind": run.kind, "status": run.status, "started": run.started,
               "params": run.params, "machine": run.machine, **summary, **(extra_json or {})}
        click.echo(json.dumps(doc, indent=1, default=str), file=ctx.out.file)
        return
    _print_run_line(ctx, run)
    render()


def _print_run_line(ctx: Context, run) -> None:
    m = run.machine
    kernel = m.get("kernel", {}).get("release", "?")
    cpu = m.get("cpu", {}).get("model_name", "?")
    ctx.out.print(f"[bold]run {run.id}[/] {run.kind} {run.status} · {run.started} · {run.host} · "
                  f"Linux {kernel} · {cpu} · {m.get('topology', {}).get('available', '?')} CPUs",
                  highlight=False)


# ----------------------------------------------------------------- latency

@cli.command()
@click.option("--probe", "probe", metavar="P[:VARIANT][,…]",
              help="Operations to time (default: the whole catalogue; see 'oslens probes').")
@click.option("--workers", default="1", show_default=True, metavar="N|max",
              help="Workers timing the same operation at once, each on its own CPU.")
@click.option("--mode", type=click.Choice(["process", "thread"]), default="process", show_default=True)
@click.option("--placement", type=click.Choice(["compact", "spread"]), default="compact", show_default=True)
@click.option("--duration", type=float, metavar="S", help="Seconds per operation and repetition (default 0.3).")
@click.option("--ops", type=int, metavar="N", help="Operations per worker instead of a duration.")
@click.option("--reps", type=int, default=3, show_default=True, help="Repetitions.")
@click.option("--warmup", type=float, default=0.1, show_default=True, metavar="S", help="Untimed warm-up seconds.")
@click.option("--mix", is_flag=True, help="Every worker runs the whole catalogue, one operation after another.")
@click.option("--compete", metavar="P[:VARIANT][:CPUS]",
              help="Also measure with this probe running on other CPUs (default: every CPU left free).")
@common_options
def latency(ctx: Context, **kw):
    """What does each operation cost, and how variable is it?"""
    plan = latency_plan(**kw)
    _measure(ctx, "latency", plan, f"{len(plan.points)} measurements × {plan.reps} repetitions on CPUs "
             f"{','.join(map(str, plan.params['cpus']))}", _print_latency)


def _print_latency(ctx: Context, store: Store, run_id: int) -> None:
    from .analysis import latency as latency_analysis
    from .report import latency as latency_report

    run = store.run(run_id)
    summary = latency_analysis.summarize(store.records(run.id))
    _publish(ctx, store, run, summary.to_dict(), lambda: latency_report.render(ctx.out, summary))


# ------------------------------------------------------------------- noise

@cli.command()
@click.option("--cpus", metavar="LIST", help="CPUs to probe, e.g. 0-3,8 (default: every available CPU).")
@click.option("--duration", type=float, default=5.0, show_default=True, metavar="S", help="Seconds per repetition.")
@click.option("--threshold", type=int, metavar="NS", help="Shortest gap counted (default: 20 loop times, ≥ 500 ns).")
@click.option("--reps", type=int, default=1, show_default=True)
@click.option("--warmup", type=float, default=0.2, show_default=True, metavar="S")
@click.option("--mode", type=click.Choice(["process", "thread"]), default="thread", show_default=True)
@click.option("--compete", metavar="P[:VARIANT][:CPUS]", help="Also measure with this probe running on other CPUs.")
@click.option("--no-attribution", "no_attribution", is_flag=True, help="Do not trace the kernel (no BPF).")
@click.option("--ftq-us", "ftq_us", type=int, metavar="US",
              help="Also count work per fixed time quantum of this many µs (FTQ), a regular time series.")
@click.option("--step-us", type=float, default=1000.0, show_default=True,
              help="Tail at scale: the length of one synchronised step.")
@common_options
def noise(ctx: Context, no_attribution: bool, step_us: float, **kw):
    """How much does the OS interrupt a thread that only computes, and why?"""
    plan = noise_plan(attribution=not no_attribution, step_us=step_us, **kw)
    _measure(ctx, "noise", plan, f"CPUs {','.join(map(str, plan.params['cpus']))}, "
             f"{plan.params['duration_s']:g} s × {plan.reps}", _print_noise)


def _print_noise(ctx: Context, store: Store, run_id: int) -> None:
    from .analysis import noise as noise_analysis
    from .report import noise as noise_report

    run = store.run(run_id)
    phases = noise_analysis.summarize_phases(store.records(run.id))
    step = run.params.get("step_ns", 1e6)
    tails = {p: noise_analysis.tail_at_scale(s, step) for p, s in phases.items()}
    detours = {p: [[d.cpu, d.start_ns, d.duration_ns, d.cause] for d in s.detours] for p, s in phases.items()}

    def render():
        for p, s in phases.items():
            noise_report.render(ctx.out, p, s, tails[p])

    _publish(ctx, store, run, {"phases": {p: s.to_dict(tails[p]) for p, s in phases.items()}}, render,
             extra_json={"detours": detours})


# ----------------------------------------------------------------- profile

@cli.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--pid", type=int, metavar="PID", help="Attach to this running process (and its descendants).")
@click.option("--duration", type=float, metavar="S", help="With --pid: profile this long (default: until it exits "
              "or Ctrl-C).")
@click.option("--time-limit", "time_limit", type=float, metavar="S",
              help="Stop the command (SIGTERM, then SIGKILL) after this long.")
@click.option("--no-bpf", "no_bpf", is_flag=True, help="procfs and perf counters only: no kernel tracing.")
@click.option("--no-syscalls", "no_syscalls", is_flag=True,
              help="Do not trace system calls: the only cost that grows with the call rate (see bench/profile.py).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True),
              help="Write the report (or the JSON) here instead of stderr (stdout with --json).")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="[-- CMD ARGS…]")
@common_options
def profile(ctx: Context, command: tuple[str, ...], pid: int | None, duration: float | None,
            time_limit: float | None, no_bpf: bool, no_syscalls: bool, output: str | None):
    """Where does a workload's time go in the kernel? (CMD's exit status, stdout and stderr pass through.)"""
    from .profile import collect
    from .plan import check_profile_target

    check_profile_target(list(command), pid, duration, time_limit)
    params = {"command": list(command) or None, "pid": pid, "duration_s": duration, "time_limit_s": time_limit,
              "bpf": not no_bpf, "syscalls": not no_syscalls}
    what = f"pid {pid}" if pid is not None else " ".join(command)
    with ctx.store() as store:
        ctx.say(f"oslens profile: {what}, store {store.path}")
        run_id = store.begin_run("profile", sys.argv, params, machine_metadata())
        try:
            prof = collect.run(list(command) or None, pid, duration, time_limit, bpf=not no_bpf,
                               syscalls=not no_syscalls)
        except (UsageError, MeasurementError) as e:
            store.finish_run(run_id, "failed", str(e))
            raise
        store.add_records(run_id, prof.records)
        signum = prof.interrupted_by or (prof.first("end") or {}).get("signal")
        store.finish_run(run_id, "complete" if prof.complete else "incomplete",
                         None if prof.complete else f"interrupted by signal {signum}")
        with _report_to(ctx, output):
            _print_profile(ctx, store, run_id)
    return prof.exit_status()


@contextmanager
def _report_to(ctx: Context, output: str | None):
    """The command's output owns stdout: the report goes to stderr (as perf
    stat's does), JSON to stdout, or either to a file."""
    saved = ctx.out
    f = open(output, "w") if output else None
    try:
        if f:
            ctx.out = Console(file=f, width=160)
        elif not ctx.as_json:
            ctx.out = Console(stderr=True, width=None if sys.stderr.isatty() else 160)
        yield
    finally:
        ctx.out = saved
        if f:
            f.close()


def _print_profile(ctx: Context, store: Store, run_id: int) -> None:
    from .profile import summary as profile_summary

    run = store.run(run_id)
    summary = profile_summary.summarize(store.records(run.id))
    _publish(ctx, store, run, summary, lambda: profile_summary.render(ctx.out, summary))


# ---------------------------------------------------------------- appscale

@cli.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--workload", metavar="NAME", help="A built-in application instead of CMD (see --list-workloads).")
@click.option("--list-workloads", "list_workloads", is_flag=True, help="List the built-in applications.")
@click.option("--cpus", metavar="N[,N…]|max", help="CPU counts (default: 1, 2, 4, … and all CPUs).")
@click.option("--placement", type=click.Choice(["compact", "spread"]), default="compact", show_default=True,
              help="compact fills a socket first; spread alternates sockets.")
@click.option("--reps", type=int, default=3, show_default=True, help="Repetitions per CPU count (interleaved).")
@click.option("--size", type=int, metavar="K", help="--workload's problem size (default: its own).")
@click.option("--mode", type=click.Choice(["thread", "process"]), default="thread", show_default=True,
              help="--workload's workers as threads or processes.")
@click.option("--time-limit", "time_limit", type=float, metavar="S", help="Stop a run (SIGTERM) after this long.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="[-- CMD ARGS…]")
@common_options
def appscale(ctx: Context, command: tuple[str, ...], list_workloads: bool, **kw):
    """Does an application speed up with cores, and is the time lost in the kernel? ({n} in CMD = the CPU count.)"""
    from . import appscale as app

    if list_workloads:
        for w in app.builtin_workloads().values():
            ctx.out.print(f"{w['name']:<10} {w['kind']:<8} {w['summary']}", highlight=False)
        return
    plan = app.appscale_plan(command=list(command), **kw)
    what = f"workload {plan.workload}" if plan.workload else " ".join(command)
    with ctx.store() as store, app.prepared(plan) as points:
        ctx.say(f"oslens appscale: {what} on {','.join(map(str, plan.params['cpus']))} CPUs × {plan.reps}, "
                f"store {store.path}")
        run_id = execute(store, "appscale", sys.argv, plan.params, app.runs(points, plan.reps, kw["time_limit"]),
                         plan.total_runs, ctx.err, ctx.quiet)
        failed = _print_appscale(ctx, store, run_id)
    return EXIT_FAILED if failed else 0


def _print_appscale(ctx: Context, store: Store, run_id: int) -> bool:
    """Prints the run; True if some CPU count failed."""
    from .analysis import appscale as appscale_analysis
    from .report import appscale as appscale_report

    run = store.run(run_id)
    p = run.params
    summary = appscale_analysis.summarize(store.records(run.id), p.get("available_cpus"))
    what = f"workload {p['workload']}" if p.get("workload") else " ".join(p.get("command") or [])
    _publish(ctx, store, run, summary, lambda: appscale_report.render(ctx.out, what, summary))
    return bool(summary["failed_points"])


# ------------------------------------------------------------------ report

@cli.command()
@click.argument("run_refs", nargs=-1, required=True, metavar="RUN…")
@click.option("-o", "--output", type=click.Path(),
              help="The HTML file (default: oslens-report-RUNS.html here); a directory with --format png|svg.")
@click.option("--format", "fmt", type=click.Choice(["html", "png", "svg"]), default="html", show_default=True,
              help="html: one self-contained interactive page; png/svg: each figure as a file, for papers.")
@common_options
def report(ctx: Context, run_refs: tuple[str, ...], output: str | None, fmt: str):
    """Write a report with plots of stored runs (several runs of one kind are overlaid)."""
    from .report.html import RunData, build

    with ctx.store(create=False) as store:
        runs = [store.run(ref) for ref in run_refs]
        if len({r.id for r in runs}) != len(runs):
            raise UsageError("a run is named twice")
        data = [RunData(r, store.records(r.id)) for r in runs]
    name = "-".join(str(r.id) for r in runs)
    target = Path(output or (f"oslens-report-{name}.html" if fmt == "html" else f"oslens-report-{name}"))
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
        click.echo(json.dumps({"runs": [r.id for r in runs], "format": fmt,
                               "files": [str(p.resolve()) for p in written]}))
    else:
        for p in written:
            click.echo(str(p.resolve()))


# ----------------------------------------------------------------- compare

@cli.command()
@click.argument("run_a", metavar="RUN_A")
@click.argument("run_b", metavar="RUN_B")
@click.option("--threshold", default="5%", show_default=True, metavar="PCT",
              help="A significant change smaller than this is reported as within the threshold.")
@click.option("--fail-on-regression", "fail_on_regression", is_flag=True,
              help="Exit 1 if B is significantly worse than A beyond the threshold (for CI).")
@common_options
def compare(ctx: Context, run_a: str, run_b: str, threshold: str, fail_on_regression: bool):
    """Compare two runs of one kind: medians, intervals, change, and whether it is significant."""
    from . import compare as comparing

    limit = comparing.parse_threshold(threshold)
    with ctx.store(create=False) as store:
        result = comparing.compare(store, run_a, run_b, threshold=limit)
    if ctx.as_json:
        click.echo(json.dumps(result.to_dict(), indent=1))
    else:
        comparing.render(ctx.out, result)
    return comparing.exit_status(result, fail_on_regression)


# --------------------------------------------------------- store commands

@cli.command()
@common_options
def runs(ctx: Context):
    """List the stored runs."""
    if not ctx.db_path.exists():
        rows = []
    else:
        with ctx.store() as store:
            rows = store.runs()
    if ctx.as_json:
        click.echo(json.dumps([{"id": r.id, "kind": r.kind, "status": r.status, "started": r.started,
                                "finished": r.finished, "host": r.host, "reason": r.reason,
                                "params": r.params} for r in rows], indent=1))
        return
    if not rows:
        ctx.say(f"no runs in {ctx.db_path}")
        return
    from rich.table import Table
    t = Table("run", "kind", "status", "started", "host", "what", box=None)
    for r in rows:
        what = _what(r)
        status = r.status + (f" ({r.reason})" if r.reason and r.status != "complete" else "")
        t.add_row(str(r.id), r.kind, status, r.started, r.host, what)
    ctx.out.print(t)


def _what(run) -> str:
    """One short line of what a run measured, for the run list."""
    p = run.params or {}
    if run.kind == "appscale":
        what = f"workload {p['workload']}" if p.get("workload") else " ".join(p.get("command") or [])
        return f"{what} on {','.join(map(str, p.get('cpus', [])))} CPUs"
    if run.kind == "profile":
        return f"pid {p['pid']}" if p.get("pid") is not None else " ".join(p.get("command") or [])
    if run.kind == "noise":
        return f"CPUs {','.join(map(str, p.get('cpus', [])))}, {p.get('duration_s', '?')} s"
    probes = p.get("probes", [])
    return ",".join(probes) if len(probes) <= 5 else f"{len(probes)} operations"


@cli.command()
@click.argument("run_ref", metavar="RUN")
@common_options
def show(ctx: Context, run_ref: str):
    """Print a stored run as the command that made it did (RUN: id or 'last')."""
    with ctx.store(create=False) as store:
        run = store.run(run_ref)
        printers = {"scale": _print_scale, "latency": _print_latency, "noise": _print_noise,
                    "profile": _print_profile, "appscale": _print_appscale}
        if run.kind not in printers:
            raise UsageError(f"run {run.id} is a '{run.kind}' run, which this oslens cannot show")
        printers[run.kind](ctx, store, run.id)


@cli.command()
@click.argument("run_ref", metavar="RUN")
@click.option("--format", "fmt", type=click.Choice(["json", "csv", "parquet"]), default="json", show_default=True,
              help="parquet: every record as one table (pandas/Arrow), to the -o file.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), help="File (default stdout).")
@common_options
def export(ctx: Context, run_ref: str, fmt: str, output: str | None):
    """Export a stored run with every record."""
    with ctx.store(create=False) as store:
        run = store.run(run_ref)
        if fmt == "parquet":
            if not output:
                raise UsageError("--format parquet writes a file: give -o FILE.parquet")
            try:
                records_frame(store, run.id).to_parquet(output, index=False)
            except OSError as e:
                raise UsageError(f"cannot write {output}: {e.strerror or e}") from None
            ctx.say(f"run {run.id} written to {output}")
            return
        if output:
            try:
                f = open(output, "w", newline="")
            except OSError as e:
                raise UsageError(f"cannot write {output}: {e.strerror}") from None
            with f:
                export_run(store, run.id, fmt, f)
            ctx.say(f"run {run.id} written to {output}")
        else:
            export_run(store, run.id, fmt, sys.stdout)


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
        t.add_row(p.name, variants, opts, ",".join(p.syscalls), p.summary)
    ctx.out.print(t)
    ncpu = engine.topology()["available"]
    ctx.out.print(f"default worker counts here: {','.join(map(str, default_worker_counts(ncpu)))}",
                  style="dim")


# -------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> None:
    err = Console(stderr=True)
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
        _one_line(err, f"{e}; the run is kept as incomplete")
        sys.exit(128 + e.signum)
    except (KeyboardInterrupt, click.Abort):
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)


def _one_line(console: Console, msg: str) -> None:
    console.print(f"oslens: {' '.join(msg.split())}", highlight=False, markup=False, soft_wrap=True)
