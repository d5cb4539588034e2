"""What every command shares: the context (store, consoles, --json, -q),
the common options, and printing a run through the registry of kinds.

One module per kind of run (commands/<kind>.py) defines its click command;
cli.py adds them from the registry (kinds.py)."""

from __future__ import annotations

import functools
import json
import shlex
import sys
from pathlib import Path
from typing import Callable

import click
from click.core import ParameterSource
from rich.console import Console
from rich.text import Text

from .. import engine, kinds
from ..errors import MeasurementError, UsageError
from ..format import plural
from ..store import Store, default_path, parse_tag

EXIT_FAILED, EXIT_USAGE = 1, 2


class Context:
    def __init__(self, db: str | None, as_json: bool, quiet: bool, verbose: int, tags: dict[str, str] | None = None):
        self.db_path = Path(db) if db else default_path()
        self.tags = tags or {}  # --tag KEY=VALUE of a measuring command: kept with the run it makes
        self.as_json = as_json
        self.quiet = quiet
        self.verbose = verbose
        # Wide enough for the tables when stdout is a file or a pipe.
        self.out = Console(width=None if sys.stdout.isatty() else 160)
        self.err = Console(stderr=True)
        if verbose and not quiet:
            # every engine invocation, as a command line that can be run again by hand
            engine.echo_invocations(self._echo)

    def _echo(self, argv: list[str]) -> None:
        self.err.print(f"oslens: runs {shlex.join(argv)}", highlight=False, markup=False, soft_wrap=True)

    def store(self, write: bool = True) -> Store:
        """Commands that only read never create a store (at a mistyped path)
        nor write one (a read-only or full one still reads)."""
        return Store(self.db_path, read_only=not write)

    def say(self, msg: str) -> None:
        """A progress line on stderr; machine and user strings are text, never markup."""
        if not self.quiet:
            self.err.print(msg, highlight=False, markup=False)

    def tagged(self, params: dict) -> dict:
        """A run's params with this command's --tag's, which `runs --tag` and `tag:K=V` select by."""
        if self.tags:
            params["tags"] = dict(self.tags)
        return params


def shared_options(fn):
    """--db, --json, -q and -v, declared once: on the `oslens` group and on
    every subcommand, so users may type them before or after the command."""
    for option in reversed(
        (
            click.option(
                "--db",
                envvar="OSLENS_DB",
                metavar="PATH",
                help="Results store (default: OSLENS_DB or the user data directory).",
            ),
            click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout."),
            click.option("-q", "--quiet", is_flag=True, help="No progress or messages on stderr."),
            click.option(
                "-v", "--verbose", count=True, help="Print each engine invocation on stderr, to run it again by hand."
            ),
        )
    ):
        fn = option(fn)
    return fn


def common_options(fn):
    """The shared options of a subcommand, turned into its Context."""

    @shared_options
    @functools.wraps(fn)
    def wrapper(db, as_json, quiet, verbose, **kw):
        # --db and --json also work before the subcommand (oslens --db X show 3);
        # typed after it, they win; OSLENS_DB applies where neither is typed.
        here = click.get_current_context()
        root = here.find_root()
        _refuse_empty_options(root)
        _refuse_empty_options(here)
        if (
            here.get_parameter_source("db") != ParameterSource.COMMANDLINE
            and root.get_parameter_source("db") == ParameterSource.COMMANDLINE
        ):
            db = root.params["db"]
        return fn(
            Context(
                db,
                as_json or root.params.get("as_json", False),
                quiet or root.params.get("quiet", False),
                verbose + root.params.get("verbose", 0),
                here.meta.get(TAGS),
            ),
            **kw,
        )

    return wrapper


TAGS = "oslens.tags"


def _parse_tags(ctx: click.Context, param, values: tuple[str, ...]) -> None:
    tags: dict[str, str] = {}
    for text in values:
        try:
            key, value = parse_tag(text)
        except ValueError as e:
            raise UsageError(f"--tag: {e}") from None
        if key in tags and tags[key] != value:
            raise UsageError(f"--tag: {key} given twice ({tags[key]} and {value})")
        tags[key] = value
    ctx.meta[TAGS] = tags


def measuring_options(fn):
    """The common options of a command that measures and stores a run, and
    --tag KEY=VALUE (repeatable): labels kept with the run."""
    return click.option(
        "--tag",
        "tags",
        multiple=True,
        metavar="KEY=VALUE",
        expose_value=False,
        callback=_parse_tags,
        help="Label the run (repeatable): `runs --tag`, and tag:KEY=VALUE where a run is named, select by it.",
    )(common_options(fn))


def _refuse_empty_options(ctx: click.Context) -> None:
    """An option given an empty value (`--workers ''`, `--db ''`) is bad
    input, never "the default": a script whose variable came out empty must
    not measure something else than it asked."""
    for param in ctx.command.params:
        if not isinstance(param, click.Option) or ctx.get_parameter_source(param.name) != ParameterSource.COMMANDLINE:
            continue
        value = ctx.params.get(param.name)
        values = value if isinstance(value, (tuple, list)) else (value,)
        if any(isinstance(v, str) and not v.strip() for v in values):
            raise UsageError(f"{max(param.opts, key=len)}: an empty value (leave the option out for its default)")


class _SampleRateOption(click.Option):
    """--sample-rate, whose defaults are the engine's: asked of it only when
    the help is shown, so that no command needs the engine to start."""

    def get_help_record(self, ctx):
        names, text = super().get_help_record(ctx)
        try:
            said = ", ".join(f"{engine.Explain.default_hz(m):,} {m}" for m in engine.EXPLAIN_MODES)
        except MeasurementError as e:
            said = f"the engine's ({e})"
        return names, f"{text} [default: {said}]"


def explain_option(what: str):
    """`--explain [full|light]` and `--sample-rate HZ`: the attributed twin
    of each point, in the mode given (or the default one when none is),
    sampled at that rate; the command gets them as one `explain`, an
    engine.Explain or None."""

    def decorate(fn):
        @click.option(
            "--explain",
            type=click.Choice(engine.EXPLAIN_MODES),
            is_flag=False,
            flag_value=engine.DEFAULT_EXPLAIN,
            default=None,
            metavar="[full|light]",
            help=f"{what} full: every system call and fault timed (exact calls per op, a cost that grows with "
            "their rate); light: lock waits and interrupts timed, the rest of each worker's time, on its CPU or "
            "off it, split by samples of its CPU (a small cost whatever the system-call or fault rate). Alone: "
            f"{engine.DEFAULT_EXPLAIN}.",
        )
        @click.option(
            "--sample-rate",
            "sample_hz",
            cls=_SampleRateOption,
            type=click.IntRange(min=1),
            default=None,
            metavar="HZ",
            help="With --explain: samples per second of each worker thread's time (full) or of each worker's CPU "
            "(light). Fewer cost less and err more; each share's error is stated.",
        )
        @functools.wraps(fn)
        def wrapper(*args, explain: str | None, sample_hz: int | None, **kw):
            if sample_hz is not None and explain is None:
                raise UsageError("--sample-rate: the rate of --explain's samples, and --explain was not given")
            if sample_hz is not None and sample_hz > (most := engine.Explain.most_hz()):
                raise UsageError(f"--sample-rate: {sample_hz:,} Hz is above the {most:,} Hz the engine samples at most")
            how = engine.Explain(explain, sample_hz) if explain else None
            return fn(*args, explain=how, **kw)

        return wrapper

    return decorate


def environment_option(kind: str, refused_inside: Callable[[dict], str | None] | None = None):
    """--in ENV: the command's engine runs in that environment (envs/), made
    for the command and removed after it; a kind that takes no environment
    (kinds.Kind.in_envs) keeps the option for its one-line refusal.
    refused_inside(options) says why these options cannot run in an
    environment, checked before any is made."""
    refusal = kinds.no_environments(kind)

    def decorate(fn):
        @click.option(
            "--in",
            "where",
            metavar="ENV[:KEY=VALUE,…]",
            default="native",
            show_default=True,
            # a command that refuses every environment keeps the option for its one-line refusal, not for its help
            hidden=refusal is not None,
            help="Where the engine runs: native; container[:runtime=podman|docker,cpuset=CPUS,memory=SIZE] "
            "(an image built here from scratch with the engines); or "
            "kvm[:cpus=N,sockets=N,cores=N,threads=N,numa=N,mem=SIZE,kernel=PATH] (a guest booted from the "
            "distribution's kernel and an initramfs holding the engines).",
        )
        @functools.wraps(fn)
        def wrapper(ctx: Context, where: str, **kw):
            from .. import engine, envs

            if refusal and where != "native":
                raise UsageError(f"--in {where}: {refusal}")
            why = refused_inside(kw) if refused_inside and where != "native" else None
            if why:
                raise UsageError(f"--in {where}: {why}")
            env = envs.parse(where)
            if env is None:
                return fn(ctx, **kw)
            ctx.say(f"oslens: making the {env.name} environment")
            with env, engine.inside(env):
                return fn(ctx, **kw)

        return wrapper

    return decorate


def analyze(store: Store, run_id: int):
    """A stored run's summary, through its kind."""
    run = store.run(run_id)
    return kinds.get(run.kind, run.id).load("analyze")(run, store.records(run.id))


def print_run(ctx: Context, store: Store, run_id: int, summary=None):
    """Analyses a stored run through its kind (unless given its summary),
    stores the summary and prints it: one JSON document with the run's
    metadata, or the run line and the kind's tables. Returns the summary."""
    run = store.run(run_id)
    kind = kinds.get(run.kind, run.id)
    summary = summary or analyze(store, run_id)
    doc = summary.to_dict()
    store.set_summary(run.id, doc)
    if ctx.as_json:
        extra = summary.json_extra() if hasattr(summary, "json_extra") else {}
        out = {
            "run": run.id,
            "kind": run.kind,
            "status": run.status,
            "started": run.started,
            "params": run.params,
            "machine": run.machine,
            **doc,
            **extra,
        }
        click.echo(json.dumps(out, indent=1, default=str), file=ctx.out.file)
        return summary
    print_run_line(ctx, run)
    kind.load("render")(ctx.out, run, summary)
    return summary


def print_run_line(ctx: Context, run) -> None:
    m = run.machine
    kernel = m.get("kernel", {}).get("release", "?")
    cpu = m.get("cpu", {}).get("model_name", "?")
    line = Text.assemble(
        (f"run {run.id}", "bold"),
        f" {run.kind} {run.status} · {run.started} · {run.host} · Linux {kernel} · {cpu} · "
        f"{m.get('topology', {}).get('available', '?')} CPUs",
    )
    env = m.get("environment")
    if env:
        from ..envs import made

        how = made({k: v for k, v in env.items() if k != "shape"})
        line.append(f" · in a {env['name']}" + (f" ({how})" if how else ""))
        if env.get("note"):  # an environment whose timings mean nothing says so first
            line.append(f" · {env['note']}", "bold")
    ctx.out.print(line, highlight=False)


def measure(ctx: Context, kind: str, plan, headline: str) -> None:
    """Runs a checked plan of engine invocations into the store, then prints
    the run as `show` would."""
    from ..runner import check, execute

    check(plan.points)  # refused input says so before any progress line
    with ctx.store() as store:
        ctx.say(f"oslens {kind}: {headline}, store {store.path}")
        run_id = execute(
            store,
            kind,
            sys.argv,
            ctx.tagged(plan.params),
            plan.points,
            plan.total_reps,
            ctx.err,
            ctx.quiet,
            checked=True,
        )
        summary = analyze(store, run_id)
        failure = nothing_measured(store, run_id, summary)
        print_run(ctx, store, run_id, summary)
        if failure:
            raise failure


def nothing_measured(store: Store, run_id: int, summary) -> MeasurementError | None:
    """A point that ran to its end yet measured nothing (an io point that
    timed no I/O) fails the run, its tables printed and the failure said
    in one line, rather than standing as a complete run with no figure.
    The run is marked failed; the error to raise is returned."""
    empty = summary.nothing_measured() if hasattr(summary, "nothing_measured") else []
    if not empty:
        return None
    store.finish_run(run_id, "failed", f"nothing measured at {', '.join(empty)}")
    return MeasurementError(f"run {run_id}: nothing was measured at {', '.join(empty)}")


def print_dry_run(ctx: Context, doc: dict, what: str) -> None:
    """A plan without measuring or storing anything (--dry-run): per worker
    count, the CPUs used, the sockets they span (workers on each), the cores
    whose SMT siblings are used together, and the machine boundary it marks."""
    if ctx.as_json:
        click.echo(json.dumps(doc, indent=1, default=str), file=ctx.out.file)
        return
    from rich.table import Table

    m = doc["machine"]
    ctx.out.print(
        f"dry run, nothing measured or stored: {what}\n"
        f"machine: {plural(m['cpus'], 'CPU')}, {plural(m['sockets'], 'socket')}, {plural(m['cores'], 'core')}, "
        f"{plural(m['threads_per_core'], 'thread')} per core; "
        f"placement {doc['params']['placement']}",
        highlight=False,
        markup=False,
    )
    t = Table(box=None)
    for name in ("workers", "sockets", "per socket", "cores", "SMT shared", "boundary", "CPUs", "siblings together"):
        numeric = name in ("workers", "sockets", "cores", "SMT shared")
        t.add_column(name, justify="right" if numeric else "left", overflow="fold")  # every CPU, never "…"
    for p in doc["points"]:
        t.add_row(
            *(
                Text(str(x))
                for x in (
                    p["workers"],
                    len(p["sockets"]),
                    " ".join(f"{s}:{k}" for s, k in p["sockets"].items()),
                    p["cores"],
                    len(p["smt_shared"]),
                    p["landmark"] or "",
                    p["cpus"].replace(",", ", "),  # long lists wrap between CPUs
                    p["smt_shared_text"].replace(",", ", ") or "-",
                )
            )
        )
    ctx.out.print(t)
    ctx.out.print(
        "per socket = socket:workers · SMT shared = cores running two or more workers · "
        "siblings together: a+b share a core, a-b+c-d pairs a with c … b with d",
        style="dim",
        highlight=False,
    )


def renamed(old: str, new: str):
    """An old spelling kept for scripts: it still works, and says what replaced it."""

    def callback(click_ctx, param, value):
        if _given(value):
            click.echo(f"oslens: {old} is deprecated; use {new}", err=True)
        return value

    return callback


def one_of(new_value, old_value, new: str, old: str):
    """The value of an option given under its new or its old spelling (not both)."""
    if _given(old_value) and _given(new_value):
        raise UsageError(f"{new} and {old} are one option: give it once")
    return new_value if _given(new_value) else old_value


def _given(value) -> bool:
    """Typed by the user: 0 is a value, an unset option or flag is not."""
    return value is not None and value is not False and value != ()
