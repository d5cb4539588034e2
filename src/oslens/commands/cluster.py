"""`oslens cluster`: the same measurement on every rank of an MPI job at
once, stored as one run with a row per rank, and `cluster bsp`, the
bulk-synchronous loop that checks what that noise does to a job."""

from __future__ import annotations

import functools
import shlex
import sys

import click

from . import Context, environment_option, measuring_options, print_run

CLUSTER_HELP = "What does OS noise on each node do to a job that spans them all?"


def launch_options(fn):
    @click.option(
        "--launch",
        metavar="CMD",
        help='The MPI launcher and its options, e.g. "mpirun -n 64 --hostfile hosts" or "srun -N 16" '
        "(default: mpirun -n RANKS on this host).",
    )
    @click.option("--ranks", type=int, metavar="N", help="Ranks of the default launcher on this host (default 2).")
    @functools.wraps(fn)
    def wrapper(*a, **kw):
        return fn(*a, **kw)

    return wrapper


def _job(argv: list[str], launch: str | None):
    """The launcher started once: the ranks it starts and their CPUs. After
    every option is checked, so that bad input starts no job."""
    from ..plan.cluster import check_launcher

    return check_launcher(argv, ours=launch is None)


def _measure(ctx: Context, what: str, plan, job, note: str | None, headline: str) -> None:
    from ..runner import check, execute

    check(plan.points)
    if note:
        ctx.say(f"oslens cluster: {note}")
    with ctx.store() as store:
        ctx.say(f"oslens cluster {what}: {headline}; {job.describe()}, store {store.path}")
        run_id = execute(
            store,
            "cluster",
            sys.argv,
            ctx.tagged(plan.params),
            plan.points,
            plan.total_reps,
            ctx.err,
            ctx.quiet,
            checked=True,
        )
        print_run(ctx, store, run_id)


def _params(what: str, job) -> dict:
    return {"measure": what, "launch": list(job.launch), "ranks": len(job.ranks)}


@click.group("cluster", help=CLUSTER_HELP)
def command():
    pass


@command.command("noise")
@click.option("--duration", type=float, default=5.0, show_default=True, metavar="S", help="Seconds per repetition.")
@click.option("--reps", type=int, default=1, show_default=True)
@click.option("--warmup", type=float, default=0.2, show_default=True, metavar="S")
@click.option("--threshold-ns", "threshold", type=int, metavar="NS", help="Shortest gap counted, in ns.")
@click.option("--no-bpf", "no_bpf", is_flag=True, help="Do not trace the kernel: detours without their causes.")
@click.option("--step-us", type=float, default=1000.0, show_default=True, help="Tail at scale: one step, in µs.")
@launch_options
@measuring_options
@environment_option("cluster")
def noise(ctx: Context, launch, ranks, no_bpf, step_us, **kw):
    """Detours on every CPU of every rank at once: the noisy nodes, and why."""
    from ..plan.cluster import launcher, plan_run
    from ..plan.noise import plan as noise_plan

    argv, note = launcher(launch, ranks)
    inner = noise_plan(
        cpus=None, mode="thread", compete=None, attribution=not no_bpf, step_us=step_us, ftq_us=None, **kw
    )
    job = _job(argv, launch)
    plan = plan_run(inner, "noise", job, _params("noise", job), workers="max")
    where = shlex.join(job.launch)
    _measure(
        ctx, "noise", plan, job, note, f"{kw['duration']:g} s × {kw['reps']} on every CPU of every rank of '{where}'"
    )


@command.command("timerlat")
@click.option("--duration", type=float, default=5.0, show_default=True, metavar="S", help="Seconds per repetition.")
@click.option("--period-us", type=int, default=1000, show_default=True, metavar="US", help="The timer's period.")
@click.option(
    "--prio", type=int, default=95, show_default=True, metavar="N", help="SCHED_FIFO priority (0: SCHED_OTHER)."
)
@click.option(
    "--dma-latency", "dma_latency_us", type=int, metavar="US", help="Hold /dev/cpu_dma_latency at US on every node."
)
@click.option("--reps", type=int, default=1, show_default=True)
@click.option("--warmup", type=float, default=0.2, show_default=True, metavar="S")
@click.option("--no-bpf", "no_bpf", is_flag=True, help="Do not trace the kernel: latencies without their causes.")
@launch_options
@measuring_options
@environment_option("cluster")
def timerlat(ctx: Context, launch, ranks, no_bpf, **kw):
    """Timer wake-up latency on every CPU of every rank at once, as `oslens
    timerlat` on one node: the late nodes, and what held their worst
    wake-ups back."""
    from ..plan.cluster import launcher, plan_run
    from ..plan.timerlat import plan as timerlat_plan

    argv, note = launcher(launch, ranks)
    inner = timerlat_plan(cpus=None, compete=None, attribution=not no_bpf, **kw)
    job = _job(argv, launch)
    plan = plan_run(inner, "timerlat", job, _params("timerlat", job), workers="max")
    prio = f"SCHED_FIFO {kw['prio']}" if kw["prio"] else "SCHED_OTHER"
    head = f"every {kw['period_us']} µs at {prio}, {kw['duration']:g} s × {kw['reps']} on every CPU of every rank"
    _measure(ctx, "timerlat", plan, job, note, head)


@command.command("bsp")
@click.option("--compute-us", type=int, default=1000, show_default=True, help="The work of one step, in µs.")
@click.option("--iterations", type=int, default=2000, show_default=True, help="Steps measured.")
@click.option("--collective", type=click.Choice(["barrier", "allreduce"]), default="barrier", show_default=True)
@click.option("--threshold-ns", "threshold_ns", type=int, metavar="NS", help="Shortest gap counted as a detour.")
@click.option("--no-bpf", "no_bpf", is_flag=True, help="Do not trace the kernel: detours without their causes.")
@launch_options
@measuring_options
@environment_option("cluster")
def bsp(ctx: Context, launch, ranks, compute_us, iterations, collective, threshold_ns, no_bpf):
    """Compute, then a collective, on every rank: the measured slowdown
    against the tail-at-scale prediction, and who made each step late."""
    from ..plan.cluster import launcher, plan_bsp

    argv, note = launcher(launch, ranks)
    plan = plan_bsp(
        compute_us=compute_us,
        iterations=iterations,
        collective=collective,
        threshold_ns=threshold_ns,
        attribution=not no_bpf,
        launch=argv,
    )
    job = _job(argv, launch)
    plan.params.update(_params("bsp", job))
    _measure(ctx, "bsp", plan, job, note, f"{compute_us} µs × {iterations} steps, {collective}")


@command.command("latency")
@click.option("--probe", "probe", metavar="P[:VARIANT][,…]", help="Operations to time (default: the whole catalogue).")
@click.option(
    "--workers", default="1", show_default=True, metavar="N|max", help="Workers per rank, each on its own CPU."
)
@click.option("--mode", type=click.Choice(["process", "thread"]), default="process", show_default=True)
@click.option("--placement", type=click.Choice(["compact", "spread"]), default="compact", show_default=True)
@click.option("--duration", type=float, metavar="S", help="Seconds per operation and repetition (default 0.3).")
@click.option("--ops", type=int, metavar="N", help="Operations per worker instead of a duration.")
@click.option("--reps", type=int, default=3, show_default=True)
@click.option("--warmup", type=float, default=0.1, show_default=True, metavar="S")
@launch_options
@measuring_options
@environment_option("cluster")
def latency(ctx: Context, launch, ranks, workers, placement, **kw):
    """Each operation's latency on every rank at once: the percentiles per
    rank, how they spread across the ranks, and the outliers."""
    from ..plan.cluster import launcher, plan_run, worker_counts
    from ..plan.latency import plan as latency_plan

    # planned for one worker here (options refused before any launch); each rank places its own n
    argv, note = launcher(launch, ranks)
    inner = latency_plan(workers="1", placement=placement, compete=None, mix=False, **kw)
    job = _job(argv, launch)
    n = worker_counts(workers, job, placement, one=True)[0]
    params = {**_params("latency", job), "workers_per_rank": n, "placement": placement}
    plan = plan_run(inner, "latency", job, params, workers=str(n))
    head = f"{len(plan.points)} operations × {plan.reps} repetitions, {n} worker(s) per rank"
    _measure(ctx, "latency", plan, job, note, head)


@command.command("scale")
@click.option("--probe", "probe", metavar="P[:VARIANT][,…]", help="Probes to run (default: the OSMark five).")
@click.option(
    "--workers",
    metavar="N|A-B[:S]|max[,…]",
    help="Worker counts per rank; max: the fewest CPUs any rank has (default: 1, 2, 4, … up to it).",
)
@click.option("--mode", type=click.Choice(["process", "thread", "both"]), default="process", show_default=True)
@click.option("--placement", type=click.Choice(["compact", "spread"]), default="compact", show_default=True)
@click.option("--duration", type=float, metavar="S", help="Fixed time: seconds per repetition (default 1).")
@click.option("--ops", type=int, metavar="N", help="Fixed work: operations per worker.")
@click.option("--reps", type=int, default=3, show_default=True)
@click.option("--warmup", type=float, default=0.3, show_default=True, metavar="S")
@click.option("--interval", type=float, default=0.1, show_default=True, metavar="S")
@click.option("--opt", "opts", multiple=True, metavar="KEY=VALUE", help="A probe option, e.g. pages=125000.")
@launch_options
@measuring_options
@environment_option("cluster")
def scale(ctx: Context, launch, ranks, workers, placement, **kw):
    """Each primitive's scaling with cores on every rank at once: a curve per
    rank, the ranks whose nodes scale worse, and the whole job's throughput."""
    from ..plan.cluster import launcher, plan_run, worker_counts
    from ..plan.scale import plan as scale_plan

    argv, note = launcher(launch, ranks)
    scale_plan(workers="1", placement=placement, available=1, explain=None, **kw)  # refuses bad options now
    job = _job(argv, launch)
    counts = worker_counts(workers, job, placement)
    _, fewest = job.fewest
    inner = scale_plan(workers=",".join(map(str, counts)), placement=placement, available=fewest, explain=None, **kw)
    plan = plan_run(inner, "scale", job, {**_params("scale", job), "placement": placement})
    head = f"{len(plan.points)} points × {plan.reps} repetitions, workers per rank {','.join(map(str, counts))}"
    _measure(ctx, "scale", plan, job, note, head)
