"""`oslens io`: does the block layer's IOPS grow with the CPUs issuing I/O,
and what does each I/O cost them?"""

from __future__ import annotations

import os

import click

from ..errors import UsageError
from ..format import size
from ..plan.io import (
    DEFAULT_BS,
    DEFAULT_ENGINES,
    DEFAULT_MIX,
    DEFAULT_QD,
    DEFAULT_RW,
    DEFAULT_SIZE,
    DEFAULT_TASKRUN,
    TASKRUN,
)
from . import Context, environment_option, explain_option, measure, measuring_options


@click.command("io")
@click.option(
    "--target",
    metavar="zram|loop|DEVICE|FILE",
    help="What to measure (default: a zram device made for the run, or a loop device on a tmpfs file where "
    "there is no zram; either is removed after the run). A device or file of yours is read; it is written "
    "only if it holds no filesystem or data (see --allow-overwrite), and never while mounted.",
)
@click.option("--size", metavar="SIZE", help=f"The size of a device oslens makes (default {DEFAULT_SIZE}).")
@click.option(
    "--engine",
    "engines",
    default=DEFAULT_ENGINES,
    show_default=True,
    metavar="E[,…]",
    help="psync (pread/pwrite, O_DIRECT), cached (pread/pwrite through the page cache: reads all hits, writes "
    "taken to the device by writeback), uring (io_uring, O_DIRECT), libaio (Linux AIO, O_DIRECT); fio's names.",
)
@click.option(
    "--rw",
    metavar="PATTERN[,…]",
    help=f"randread, randwrite, randrw, read, write, rw (fio's: rand* at random aligned offsets, the others in "
    f"order, each CPU through a slice of its own); default {DEFAULT_RW}.",
)
@click.option(
    "--mix", type=int, metavar="PCT", help=f"The percentage of reads of randrw and rw (default {DEFAULT_MIX})."
)
@click.option(
    "--rate",
    metavar="IOPS[,…]",
    help="Hold each submitting CPU to IOPS I/Os per second (a token bucket, as fio's rate_iops per job; 10k: "
    "10,000): CPU time per I/O at each rate. With --duration.",
)
@click.option("--fsync", type=int, metavar="N", help="An fsync after every N writes (not timed as I/O).")
@click.option("--fdatasync", type=int, metavar="N", help="An fdatasync after every N writes.")
@click.option("--qd", metavar="N[,…]", help=f"uring, libaio: I/Os in flight per CPU (default {DEFAULT_QD}).")
@click.option(
    "--uring-wait",
    is_flag=True,
    help="io_uring: submit every free slot and wait for a completion in one enter (default: an enter per I/O, "
    "waiting only when the queue is full, as fio does).",
)
@click.option(
    "--uring-poll",
    is_flag=True,
    help="io_uring: completions polled from the device (IORING_SETUP_IOPOLL), not taken from its interrupt; a "
    "device with poll queues only (nvme with poll_queues set).",
)
@click.option(
    "--taskrun",
    type=click.Choice(list(TASKRUN)),
    help="io_uring: when the kernel runs completion work: interrupt (the task), coop (at its next kernel entry: "
    f"COOP_TASKRUN), defer (only when it reaps: DEFER_TASKRUN, as fio sets its rings up); default {DEFAULT_TASKRUN}.",
)
@click.option("--bs", default=DEFAULT_BS, show_default=True, metavar="SIZE[,…]", help="Bytes per I/O.")
@click.option("--span", metavar="SIZE", help="I/Os land in the first SIZE of the target (default all; cached: ≤ 1G).")
@click.option(
    "--workers",
    metavar="N|A-B[:S]|max[,…]",
    help="Submitting CPU counts, one pinned worker each (default: 1, 2, 4, … and the machine's boundaries).",
)
@click.option("--placement", type=click.Choice(["compact", "spread"]), default="compact", show_default=True)
@click.option("--duration", type=float, metavar="S", help="Fixed time: seconds measured per repetition (default 1).")
@click.option("--ops", type=int, metavar="N", help="Fixed work: I/Os per worker.")
@click.option("--reps", type=int, default=3, show_default=True, help="Repetitions per point.")
@click.option("--warmup", type=float, default=0.2, show_default=True, metavar="S", help="Warm-up seconds, discarded.")
@click.option("--scheduler", metavar="NAME", help="The device's I/O scheduler for the run (put back after it).")
@click.option(
    "--allow-overwrite",
    is_flag=True,
    help="Write to a device that holds a filesystem or partition table, or to a file that holds data: destroys it.",
)
@explain_option(
    "After each point, the same point again with every worker's time charged to its kernel causes, per I/O."
)
@measuring_options
@environment_option("io")
def command(ctx: Context, **kw):
    """Does the block layer's IOPS grow with the CPUs issuing I/O, and what does each I/O cost?"""
    from ..blockdev import devices, scheduler
    from ..blockdev.target import lay_out
    from ..plan import io as io_plan
    from ..runner import check

    choices = io_plan.check(**kw)
    _check_store(ctx)
    target = choices["target"]
    if choices["kind"]:
        ctx.say(f"oslens io: making a {choices['kind']} device of {choices['size'] >> 20} MiB")
        target = devices.make(choices["kind"], choices["size"])
    try:
        plan = io_plan.plan(choices, target)
        check(plan.points)  # the engine's own checks of the target, before its scheduler or data is changed
        if choices["scheduler"]:
            scheduler.set_scheduler(target, choices["scheduler"])
            plan.params["target"] = target.describe()  # with the scheduler the run has
        if choices["layout"]:
            ctx.say(f"oslens io: writing the {size(choices['layout'])} of holes in {target.path}")
            lay_out(target.path, choices["span"] or target.size())
        p = plan.params
        measure(
            ctx,
            "io",
            plan,
            f"{', '.join(p['engines'])} on {target.path}, workers {','.join(map(str, p['workers']))}",
        )
    finally:
        scheduler.restore_scheduler(target)
        if target.made:
            devices.remove_device(target.made_line)


def _check_store(ctx: Context) -> None:
    """A store the run could not be kept in is refused before a device is
    made: one that exists is opened (which makes nothing); one that does
    not is made by the run, so only where it would go is checked now."""
    from ..store import StoreError

    path = ctx.db_path.expanduser()
    if path.exists():
        try:
            ctx.store().close()
        except StoreError as e:
            raise UsageError(str(e)) from None
        return
    parent = next(p for p in path.parents if p.exists())
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"cannot make results store {path}: {parent} is not a directory this user may write in")
