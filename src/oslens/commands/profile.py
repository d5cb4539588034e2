"""`oslens profile`: where does a workload's time go in the kernel?"""

from __future__ import annotations

import sys
from contextlib import contextmanager

import click
from rich.console import Console

from ..errors import Interrupted, UsageError
from . import Context, environment_option, measuring_options, print_run


@click.command("profile", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--pid", type=int, metavar="PID", help="Attach to this running process (and its descendants).")
@click.option(
    "--duration", type=float, metavar="S", help="With --pid: profile this long (default: until it exits or Ctrl-C)."
)
@click.option(
    "--time-limit",
    "time_limit",
    type=float,
    metavar="S",
    help="Stop the command (SIGTERM, then SIGKILL) after this long.",
)
@click.option("--no-bpf", "no_bpf", is_flag=True, help="procfs and perf counters only: no kernel tracing.")
@click.option(
    "--no-syscalls",
    "no_syscalls",
    is_flag=True,
    help="Do not trace system calls: the only cost that grows with the call rate (see bench/profile.py).",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, writable=True),
    help="Write the report (or the JSON) here instead of stderr (stdout with --json).",
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="[-- CMD ARGS…]")
@measuring_options
@environment_option("profile")
def command(
    ctx: Context,
    command: tuple[str, ...],
    pid: int | None,
    duration: float | None,
    time_limit: float | None,
    no_bpf: bool,
    no_syscalls: bool,
    output: str | None,
):
    """Where does a workload's time go in the kernel? (CMD's exit status, stdout and stderr pass through.)"""
    from ..plan.profile import check_target
    from ..profile.collect import Profiling
    from ..runner import execute

    check_target(list(command), pid, duration, time_limit)
    params = {
        "command": list(command) or None,
        "pid": pid,
        "duration_s": duration,
        "time_limit_s": time_limit,
        "bpf": not no_bpf,
        "syscalls": not no_syscalls,
    }
    step = Profiling(list(command) or None, pid, duration, time_limit, bpf=not no_bpf, syscalls=not no_syscalls)
    with _report_to(ctx, output), ctx.store() as store:
        ctx.say(f"oslens profile: {step.label}, store {store.path}")
        try:
            # the command owns the terminal: no progress bar
            run_id = execute(store, "profile", sys.argv, ctx.tagged(params), [step], 1, ctx.err, quiet=True)
        except Interrupted as stopped:  # as every interrupted command: 128+N, even if its command had ended
            if stopped.run_kept:
                print_run(ctx, store, stopped.run_id)
            raise
        print_run(ctx, store, run_id)
    return step.profile.exit_status()


@contextmanager
def _report_to(ctx: Context, output: str | None):
    """The command's output owns stdout: the report goes to stderr (as perf
    stat's does), JSON to stdout, or either to a file, opened before
    anything is measured so that a bad path is refused first."""
    saved = ctx.out
    try:
        f = open(output, "w") if output else None
    except OSError as e:
        raise UsageError(f"-o {output}: cannot write there: {e.strerror or e}") from None
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
