"""`oslens study NAME`: a published experiment re-run as its authors ran it,
printed next to their findings. One subcommand per study."""

from __future__ import annotations

import contextlib
import json
import os
import sys

import click

from .. import engine, kinds
from ..errors import UsageError
from ..plan import check_reps
from . import EXIT_FAILED, Context, analyze, measure, measuring_options, print_run

OSMARK = "fork,fork-static,mmap,dup,socket,sem"
# --paper: the paper's mmapbench maps, touches and unmaps 125,000 pages of
# the shared file per operation; its other fixed workloads are not given as
# counts, so each is what one worker does alone here in PAPER_WORK_S.
PAPER_PAGES = 125_000
PAPER_WORK_S = 1.0
PAPER_REPS = 5
SCALEOUT = "nginx,streaming,redis,search,analysis,hpcc"  # the servers and jobs standing in for CloudSuite's


class _Studies(click.Group):
    """The subcommands are the studies the registry of kinds declares
    (kinds.Kind.studies), each imported when it is asked for."""

    def list_commands(self, ctx):
        return sorted(s.name for k in kinds.KINDS.values() for s in k.studies)

    def get_command(self, ctx, name):
        return kinds.study(name).load("command") if name in self.list_commands(ctx) else None


@click.group("study", cls=_Studies, invoke_without_command=True)
@click.pass_context
def study(click_ctx):
    """Re-run a published study of OS behaviour beside the paper's findings
    (kept as data in src/oslens/studies/; README.md, "oslens study osmark").
    Alone, it lists the studies and their papers."""
    if click_ctx.invoked_subcommand is None:
        from ..studies import findings

        studies = sorted((s for k in kinds.KINDS.values() for s in k.studies), key=lambda s: s.name)
        width = max(len(s.name) for s in studies)
        for s in studies:
            counted = f" ({len(findings(s.findings))} findings as data)" if s.findings else ""
            click.echo(f"oslens study {s.name:{width}} {s.paper}{counted}")


@click.command("osmark")
@click.option("--workers", metavar="N[,N…]|max", help="Worker counts (default: 1, 2, 4, … and all CPUs).")
@click.option("--ops", type=int, metavar="N", help="Operations per worker, timed (default 2000).")
@click.option("--reps", type=int, metavar="N", help=f"Repetitions per point (default 3; --paper {PAPER_REPS}).")
@click.option("--warmup", type=float, default=0.3, show_default=True, metavar="S", help="Warm-up seconds.")
@click.option("--explain/--no-explain", default=True, show_default=True, help="Name the cause of each knee.")
@click.option(
    "--explain-duration",
    type=float,
    default=1.0,
    show_default=True,
    metavar="S",
    help="Seconds of each explained repetition (fixed time: the attribution charges a window).",
)
@click.option(
    "--paper",
    is_flag=True,
    help=f"The paper's method: every CPU count from 1 to all, each probe's work per worker what one worker does "
    f"alone in {PAPER_WORK_S:g} s here, mmap of {PAPER_PAGES:,} pages, {PAPER_REPS} repetitions.",
)
@measuring_options
def osmark(ctx: Context, workers, ops, reps, warmup, explain, explain_duration, paper):
    """OSMark (parallel scalability of OS primitives): fork (dynamic and
    static), mmap of a shared file, dup, socket and SysV semaphores, one
    pinned worker per CPU, a fixed amount of work each, the fastest worker's
    time; with each knee's kernel cause, beside the paper's findings."""
    from ..parse import parse_opts, parse_probes
    from ..plan.scale import plan as scale_plan
    from ..plan.scale import work_alone

    if paper and ops is not None:
        raise UsageError("--ops: --paper sizes each probe's work itself")
    opts = (f"pages={PAPER_PAGES}",) if paper else ()

    def planned(sized: dict[str, int] | None = None):
        return scale_plan(
            probe=OSMARK,
            workers=workers or ("1-max" if paper else None),
            mode="process",
            placement="compact",
            duration=None,
            ops=2000 if ops is None else ops,
            reps=reps if reps is not None else PAPER_REPS if paper else 3,
            warmup=warmup,
            interval=0.1,
            opts=opts,
            explain=engine.Explain() if explain else None,
            explain_duration=explain_duration,
            ops_per_probe=sized,
            work_s=PAPER_WORK_S if paper else None,  # the limit of sized work, checked before the sizing runs
        )

    plan = planned()  # every option checked before anything runs
    work = f"{plan.params['ops']} operations per worker"  # --paper: sized below
    if paper:
        ctx.say(f"oslens study osmark: sizing each probe's work to {PAPER_WORK_S:g} s of one worker alone")
        sized = work_alone(parse_probes(OSMARK), parse_opts(opts, parse_probes(OSMARK)), PAPER_WORK_S)
        plan = planned(sized)
        work = "work per worker " + ", ".join(f"{p} {n:,}" for p, n in sized.items())
    plan.params["study"] = "osmark"
    measure(ctx, "scale", plan, f"OSMark, {work}, workers {','.join(map(str, plan.params['workers']))}")


@click.command("codesign")
@click.option("--reps", type=int, default=3, show_default=True, help="Repetitions per call.")
@click.option("--duration", type=float, default=0.3, show_default=True, metavar="S",
              help="Seconds of each repetition (plain and explained).")  # fmt: skip
@click.option("--paper", is_flag=True, help="The paper's care: 10 repetitions of 1 s each.")
@measuring_options
def codesign(ctx: Context, reps, duration, paper):
    """The OS/hardware co-design study (Nellans): the cost of each system call
    of its Table 2.4 on this kernel, one pinned worker issuing it, timed in
    the kernel by an explained run, beside the paper's Pentium 4 figures."""
    from ..analysis.codesign import probes
    from ..plan.scale import plan as scale_plan

    if paper:
        reps, duration = 10, 1.0
    plan = scale_plan(
        probe=",".join(probes()),
        workers="1",
        mode="process",
        placement="compact",
        duration=duration,
        ops=None,
        reps=reps,
        warmup=0.1,
        interval=0.1,
        opts=(),
        explain=engine.Explain("full"),  # the table is of calls: only full mode counts them
        explain_duration=duration,
    )
    plan.params["study"] = "codesign"
    plan.params["kernel_syscalls"] = _kernel_syscalls()
    measure(ctx, "scale", plan, f"co-design study: {len(probes())} operations, {reps} repetitions of {duration} s")


def _kernel_syscalls() -> int | None:
    """The system calls this kernel implements, as its distinct __x64_sys_*
    entry points in kallsyms (an approximation of its table: a few calls
    share an entry point); None where kallsyms hides them."""
    names = {name for name, _, _ in engine.kernel_symbols().names if name.startswith("__x64_sys_")}
    return len(names) or None


@click.command("variability")
@click.option("--reps", type=int, default=3, show_default=True, help="Repetitions of the mix.")
@click.option("--duration", type=float, default=1.0, show_default=True, metavar="S",
              help="Seconds of each repetition, every CPU issuing the whole catalogue (a p99 needs 1,000 "
              "values of each operation: shorter runs leave it untold).")  # fmt: skip
@click.option("--compete", metavar="SPEC", help="Also with a competing workload, as `latency --compete` takes it.")
@click.option("--paper", is_flag=True, help="The paper's care: 10 repetitions of 5 s each.")
@measuring_options
def variability(ctx: Context, reps, duration, compete, paper):
    """Variability in operating systems (Kocoloski et al.): every CPU issuing
    the whole catalogue of operations at once, and the share of operations
    whose median and 99th percentile lie under 1 µs, 10 µs, 100 µs, 1 ms and
    10 ms, beside the paper's tables."""
    from ..plan.latency import plan as latency_plan

    if paper:
        reps, duration = 10, 5.0
    plan = latency_plan(probe=None, workers="max", mode="process", placement="compact", duration=duration, ops=None,
                        reps=reps, warmup=0.1, compete=compete, mix=True)  # fmt: skip
    plan.params.update(study="variability", environment="native")
    measure(ctx, "latency", plan, f"variability study: the catalogue mixed on every CPU, {reps} × {duration} s")


@click.command("scaleout")
@click.option("--reps", type=int, default=3, show_default=True, help="Repetitions per server (interleaved).")
@click.option("--warmup", type=float, default=2.0, show_default=True, metavar="S",
              help="Seconds of load before each profile.")  # fmt: skip
@click.option("--duration", type=float, default=3.0, show_default=True, metavar="S",
              help="Seconds each server is profiled under load (the jobs are profiled whole).")  # fmt: skip
@click.option("--paper", is_flag=True, help="Steadier: 5 repetitions, 10 s of load, then 30 s profiled.")
@measuring_options
def scaleout(ctx: Context, reps, warmup, duration, paper):
    """The scale-out study (Zheng et al.): real servers from the
    distribution's packages, each driven by its load generator over a
    private loopback and profiled in steady state — web serving (nginx and
    wrk), media streaming (nginx serving large files at a rate per
    connection), data serving (redis and redis-benchmark), web search
    (xapian-tcpsrv answering ranked queries over an index of this machine's
    text) — and two jobs run on every CPU and profiled whole: data analysis
    (a word count by tr, GNU sort and uniq, also on 1, 2, 4 … of the CPUs:
    its speedup, kernel time and lock wait against cores) and HPC compute
    (HPC Challenge, hpcc, on MPI), beside the paper's findings."""
    from ..analysis.scaleout import PLATEAU  # the cores where the paper's speedup stops being linear, and ends
    from ..plan.serve import plan as serve_plan

    if paper:
        reps, warmup, duration = 5, 10.0, 30.0
    plan = serve_plan(server=SCALEOUT, server_cpus=None, connections=64, warmup=warmup, duration=duration,
                      reps=reps, scaling=("analysis",), scaling_counts=PLATEAU)  # fmt: skip
    plan.params["study"] = "scaleout"
    measure(ctx, "serve", plan, f"scale-out study: {', '.join(plan.params['servers'])}, {reps} repetitions")


def _build_target(click_ctx, param, value: str | None) -> str | None:
    """--build-target checked as it is parsed, before any other option is
    acted on and long before the kernel tree is unpacked (plan.kernels)."""
    from ..plan.kernels import check_build_target

    return None if value is None else check_build_target(value)


@click.command("kernels")
@click.option("--cpu-counts", "cpus", metavar="N|A-B[:S]|max[,…]",
              help="CPU counts (default: 1, 2, 4, … plus each socket boundary and all CPUs).")  # fmt: skip
@click.option("--reps", type=int, default=3, show_default=True, help="Repetitions per application and count.")
@click.option("--apps", metavar="NAME[,…]",
              help="Only these applications (default: all of them; see the list below).")  # fmt: skip
@click.option("--paper", is_flag=True,
              help="The paper's sizes: a defconfig build, each workload at its full size, 5 repetitions.")  # fmt: skip
@click.option("--build-target", metavar="DIR/", callback=_build_target,
              help="Build only this part of the kernel tree (kernel/, lib/): quicker, not the paper's. A relative "
              "path inside the tree or a make target.")  # fmt: skip
@click.option("--kernels", "images", metavar="IMAGE[,IMAGE…]",
              help="Run the study in a KVM guest booting each of these kernel images (with its /lib/modules), one "
              "run per kernel, and judge whether they scale alike; the kernel build, which a guest cannot run, is "
              "left out.")  # fmt: skip
@click.option(
    "--guest",
    metavar="KEY=VALUE[,…]",
    help="With --kernels: the guests' shape and accelerator, as --in kvm takes them (cpus=4,accel=tcg).",
)
@measuring_options
def kernels(ctx: Context, cpus, reps, apps, paper, build_target, images, guest):
    """Scalability of today's kernel for real applications (Luo et al.,
    MOSBENCH and PHOENIX): a real kernel build (make -j of Debian's
    linux-source, tinyconfig), psearchy in threads and in processes (round
    robin over sockets beside sequential where there are several), and the
    PHOENIX kernels (kmeans, word count, linear regression, matrix multiply,
    PCA, string match), each run on every CPU count confined to those CPUs:
    speedup, user and system time as cores grow, beside the paper's
    findings. Applications: gmake, psearchy-threads, psearchy-processes,
    psearchy-processes-rr, kmeans, wordcount, linreg, matmul, pca, strmatch."""
    from .. import appscale as app
    from ..plan import kernels as study_plan
    from ..runner import execute

    if paper:
        reps = max(reps, 5)
    if guest is not None and images is None:
        raise UsageError("--guest: the shape of the guests --kernels boots, and --kernels was not given")
    if images is not None:
        return _across_kernels(ctx, images, guest or "", cpus=cpus, reps=reps, apps=apps, paper=paper,
                               build_target=build_target)  # fmt: skip
    plan = study_plan.plan(cpus=cpus, reps=reps, apps=apps, paper=paper, build_target=build_target)
    with ctx.store() as store, study_plan.prepared(plan) as points:
        ctx.say(f"oslens study kernels: {', '.join(plan.params['apps'])} on "
                f"{','.join(map(str, plan.params['cpus']))} CPUs × {reps}, store {store.path}")  # fmt: skip
        runs = app.runs(points, plan.reps, None)
        run_id = execute(store, "appscale", sys.argv, ctx.tagged(plan.params), runs, len(runs), ctx.err, ctx.quiet)
        summary = print_run(ctx, store, run_id)
    return EXIT_FAILED if summary["failed_points"] else 0


@contextlib.contextmanager
def _worded(option: str):
    """A refusal of the kvm environment's, worded for the option the user typed."""
    try:
        yield
    except UsageError as e:
        said = str(e)
        raise UsageError(
            option + (said.removeprefix("--in kvm") if said.startswith("--in kvm") else f": {said}")
        ) from None


def _guests(images: str, guest: str, *, cpus, reps, apps, paper, build_target, say) -> tuple[list, list[str]]:
    """Every input of `--kernels` checked before any guest is made: the
    guests to boot, (kernel name, guest made but not booted), and why the
    kernels this host cannot boot so (a PVM host's KVM, no /dev/kvm) are not
    run ("NAME: why"), which their study says it cannot tell."""
    from ..envs import kvm, parse_options
    from ..plan import kernels as study_plan

    if build_target is not None:
        raise UsageError(f"--build-target with --kernels: {study_plan.NO_BUILD_IN_GUEST}")
    check_reps(reps)
    with _worded("--guest"):
        opts = parse_options(guest, kvm.KEYS, "kvm") if guest else {}
        shape = kvm.shape(opts, len(os.sched_getaffinity(0)))  # whether any guest can be booted or not
    if "kernel" in opts:
        raise UsageError("--guest: kernel= is what --kernels gives, one guest per image")
    if opts.get("accel", "kvm") not in ("kvm", "tcg"):
        raise UsageError(f"--guest: accel={opts['accel']} is not kvm or tcg")
    study_plan.check_in_guests(apps, cpus, shape.cpus, shape.mem_mib, paper)
    paths = [p.strip() for p in images.split(",")]
    if not all(paths):
        raise UsageError(f"--kernels: '{images}' is not a list of kernel images (IMAGE[,IMAGE…])")
    guests, not_run = [], []
    for path in paths:
        with _worded("--kernels"):
            image, _ = kvm.guest_kernel(path)  # a file that is no guest kernel: one line, exit 2
            name = image.name.removeprefix("vmlinuz-")
            if why := kvm.machine_refusal(opts.get("accel", "kvm"), image):
                not_run.append(f"{name}: {why}")
                say(f"oslens study kernels: {name} is not run: {why}")
            else:  # made, not booted
                guests.append((name, kvm.make({**opts, "kernel": path})))
    return guests, not_run


def _across_kernels(ctx: Context, images: str, guest: str, *, cpus, reps, apps, paper, build_target) -> int:
    """`study kernels --kernels A,B`: the study once in a guest of each
    kernel (one stored run each, tagged with the kernel), then the finding
    that needs several kernels judged from them (analysis.kernels.across_kernels)."""
    from .. import appscale as app
    from ..analysis.kernels import across_kernels
    from ..plan import kernels as study_plan
    from ..report.verdicts import show_across
    from ..runner import execute

    guests, not_run = _guests(images, guest, cpus=cpus, reps=reps, apps=apps, paper=paper, build_target=build_target,
                              say=ctx.say)  # fmt: skip
    runs, failed = [], False
    with ctx.store() if guests else contextlib.nullcontext() as store:
        for name, env in guests:
            ctx.say(f"oslens study kernels: a guest booting {name}")
            with env, engine.inside(env):
                plan = study_plan.plan(cpus=cpus, reps=reps, apps=apps, paper=paper, in_guest=True)
                plan.params["kernel"] = name
                with study_plan.prepared(plan) as points:
                    ctx.say(f"oslens study kernels: {', '.join(plan.params['apps'])} under {name} on "
                            f"{','.join(map(str, plan.params['cpus']))} CPUs × {reps}")  # fmt: skip
                    run_id = execute(store, "appscale", sys.argv, ctx.tagged(plan.params),
                                     app.runs(points, plan.reps, None), len(points) * plan.reps, ctx.err,
                                     ctx.quiet)  # fmt: skip
            runs.append((name, store.run(run_id)))
            summary = analyze(store, run_id)
            if ctx.as_json:
                store.set_summary(run_id, summary.to_dict())
            else:
                print_run(ctx, store, run_id, summary)
            failed = failed or bool(summary["failed_points"])
        row = across_kernels([(name, run.machine.get("environment"), store.records(run.id)) for name, run in runs],
                             not_run=not_run)  # fmt: skip
    if ctx.as_json:
        runs_out = [{"kernel": name, "run": run.id} for name, run in runs]  # a kernel may be given twice (A/A)
        click.echo(json.dumps({"runs": runs_out, "not_run": not_run, "across": row}, indent=1), file=ctx.out.file)
    else:
        show_across(ctx.out, row, not_run)
    return EXIT_FAILED if failed else 0
